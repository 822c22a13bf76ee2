package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
)

// subserverFlags are the subserver command's flags.
type subserverFlags struct {
	url, prefix, model, engine, profile, path, algorithm, thresholds, table string
	models, params                                                          []string
	index, threads, maxBatch, misses, vocabSize, contextLength, kvBudgetMB  int
	seed                                                                    uint64
	maxWait, heartbeat, latBase, latPerSeq, latPerToken                     time.Duration
	stdinEOF, seedSet                                                       bool
}

func newSubserverCmd() *cobra.Command {
	var f subserverFlags
	cmd := &cobra.Command{
		Use:   "subserver",
		Short: "Run one model's sub-server as its own process, attached to a NATS bus",
		Long: `subserver runs the sub-server of model --index of a deployment and connects it
to the deployment's NATS bus; the front end (serve --nats, or serve --processes,
which starts these processes itself) admits requests and streams their tokens.

  tokenrouter subserver --nats nats://10.0.0.1:4222 --index 1 --engine sim --profile paper-r2r \
    --algorithm r2r-random --param p=0.35

Every member and the front end must agree on --models, --algorithm, --prefix,
--heartbeat and --misses.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSubserver(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.url, "nats", "", "NATS server URL (required), nats://HOST:PORT")
	fl.StringVar(&f.prefix, "prefix", busnats.DefaultPrefix, "the deployment's NATS subject prefix")
	fl.IntVar(&f.index, "index", 0, "this model's index (0: the small model)")
	fl.StringSliceVar(&f.models, "models", nil, "all model names in order (default: the sim profile's)")
	fl.StringVar(&f.model, "model", "", "this model's name (default: models[index]); must match --models")
	fl.StringVar(&f.engine, "engine", "sim", "engine: sim or cpu")
	fl.StringVar(&f.profile, "profile", "paper-r2r", "sim latency profile: a preset (its model --index) or preset/model")
	fl.DurationVar(&f.latBase, "latency-base", 0, "sim: explicit step latency base (with --latency-per-seq, --latency-per-token; replaces --profile)")
	fl.DurationVar(&f.latPerSeq, "latency-per-seq", 0, "sim: explicit step latency per sequence")
	fl.DurationVar(&f.latPerToken, "latency-per-token", 0, "sim: explicit step latency per extra token")
	fl.Uint64Var(&f.seed, "seed", 0, "sim seed (default: index+1; an explicit 0 is seed 0)")
	fl.IntVar(&f.vocabSize, "vocab-size", 0, "sim: vocabulary size (0: the sim default)")
	fl.IntVar(&f.contextLength, "context-length", 0, "sim: context length; cpu: cap on the model's own (0: default)")
	fl.StringVar(&f.path, "path", "", "cpu: GGUF file or llama2.c checkpoint")
	fl.IntVar(&f.threads, "threads", 0, "cpu: kernel threads (0: GOMAXPROCS)")
	fl.IntVar(&f.kvBudgetMB, "kv-budget-mb", 0, "cpu: KV cache budget in MiB (0: the engine default)")
	fl.StringVar(&f.algorithm, "algorithm", "r2r-random", "routing algorithm")
	fl.StringArrayVar(&f.params, "param", nil, "algorithm parameter name=value (repeatable)")
	fl.StringVar(&f.thresholds, "thresholds", "1", "this model's batching threshold B")
	fl.StringVar(&f.table, "threshold-table", "", "this model's threshold table B(n) for n = 0, 1, 2, ... active requests (\"1,1,2,3\"; replaces --thresholds)")
	fl.DurationVar(&f.maxWait, "max-wait", 50*time.Millisecond, "launch a step anyway after this wait (0 disables the guard)")
	fl.IntVar(&f.maxBatch, "max-batch", 0, "largest step batch (0: default)")
	fl.DurationVar(&f.heartbeat, "heartbeat", cluster.DefaultHeartbeat, "heartbeat interval")
	fl.IntVar(&f.misses, "misses", cluster.DefaultMisses, "missed front-end heartbeats before dropping every request")
	fl.BoolVar(&f.stdinEOF, "exit-on-stdin-eof", false, "exit when stdin closes (set by a parent process)")
	_ = fl.MarkHidden("exit-on-stdin-eof")
	return cmd
}

func runSubserver(cmd *cobra.Command, f subserverFlags) error {
	if f.url == "" {
		return errors.New("--nats is required")
	}
	params, err := parseParams(f.params)
	if err != nil {
		return err
	}
	table, err := subserverTable(f)
	if err != nil {
		return err
	}
	f.seedSet = cmd.Flags().Changed("seed")
	eng, models, err := openSubserverEngine(f)
	if err != nil {
		return err
	}
	if f.index < 0 || f.index >= len(models) {
		eng.Close()
		return fmt.Errorf("--index %d: have %d models %v", f.index, len(models), models)
	}
	if f.model != "" && f.model != models[f.index] {
		eng.Close()
		return fmt.Errorf("--model %q: model %d of %v is %q", f.model, f.index, models, models[f.index])
	}
	ctx := cmd.Context()
	if f.stdinEOF {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin) // returns when the parent closes the pipe or dies
			cancel()
		}()
	}
	log := slog.Default().With("model", models[f.index], "index", f.index)
	log.Info("sub-server starting", "nats", f.url, "prefix", f.prefix, "engine", f.engine)
	err = cluster.RunMember(ctx, cluster.MemberConfig{
		URL: f.url, Prefix: f.prefix, Index: f.index, Models: models, Engine: eng,
		Registry: builtin.Registry(), Algorithm: f.algorithm, Params: params,
		Policy: sched.Policy{B: table, MaxWait: f.maxWait}, MaxBatch: f.maxBatch,
		Heartbeat: f.heartbeat, Misses: f.misses,
		OnEvent: func(msg string, args ...any) { log.Info(msg, args...) },
	})
	log.Info("sub-server stopped")
	return err
}

// subserverTable is this model's threshold table from --thresholds or
// --threshold-table.
func subserverTable(f subserverFlags) (sched.Table, error) {
	if f.table == "" {
		tables, err := sched.ParseStatic(f.thresholds)
		if err != nil || len(tables) != 1 {
			return nil, fmt.Errorf("--thresholds %q: want one value for this model (%v)", f.thresholds, err)
		}
		return tables[0], nil
	}
	var t sched.Table
	for _, v := range strings.Split(f.table, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || b < 1 {
			return nil, fmt.Errorf("--threshold-table %q: want positive integers such as \"1,1,2,3\"", f.table)
		}
		t = append(t, b)
	}
	return t, nil
}

// openSubserverEngine opens this model's engine and returns the
// deployment's model names.
func openSubserverEngine(f subserverFlags) (engine.Engine, []string, error) {
	switch f.engine {
	case "sim":
		preset, err := sim.LookupPreset(f.profile)
		explicit := f.latBase != 0 || f.latPerSeq != 0 || f.latPerToken != 0
		named := strings.Contains(f.profile, "/")
		if err != nil && !named && !explicit {
			return nil, nil, err
		}
		models := f.models
		if len(models) == 0 {
			if named || explicit {
				return nil, nil, errors.New("--engine sim with --profile preset/model or explicit latencies needs --models")
			}
			models = preset.Models
		}
		if f.index < 0 || f.index >= len(models) {
			return nil, nil, fmt.Errorf("--index %d: have %d models %v", f.index, len(models), models)
		}
		seed := f.seed
		if !f.seedSet {
			seed = uint64(f.index + 1)
		}
		name := models[f.index]
		var prof sim.Profile
		switch {
		case explicit || named:
			mc := config.Model{Name: name, Engine: config.EngineSim, Profile: f.profile}
			if explicit {
				mc.Profile = ""
				mc.Latency = &config.Latency{Base: f.latBase, PerSeq: f.latPerSeq, PerToken: f.latPerToken}
			}
			if prof, err = mc.SimProfile(); err != nil {
				return nil, nil, fmt.Errorf("model %s: %w", name, err)
			}
		case f.index < len(preset.Profiles):
			prof = preset.Profiles[f.index]
		default:
			return nil, nil, fmt.Errorf("--index %d: profile %s has %d models", f.index, preset.Name, len(preset.Profiles))
		}
		return sim.New(sim.Config{Name: name, Profile: prof, Seed: seed, VocabSize: f.vocabSize, ContextLength: f.contextLength}), models, nil
	case "cpu":
		if f.path == "" || len(f.models) == 0 {
			return nil, nil, errors.New("--engine cpu needs --path and --models")
		}
		eng, err := cpu.Open(f.path, cpu.Options{Threads: f.threads, KVBudgetBytes: int64(f.kvBudgetMB) << 20, ContextLength: f.contextLength})
		if err != nil {
			return nil, nil, err
		}
		return eng, f.models, nil
	}
	return nil, nil, fmt.Errorf("--engine %q: want sim or cpu", f.engine)
}
