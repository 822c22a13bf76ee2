package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/faults"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/server"
	"github.com/tokenrouter/tokenrouter/subserver"
	"github.com/tokenrouter/tokenrouter/system"
)

// subserverFlags are the subserver command's flags.
type subserverFlags struct {
	url, prefix, model, modelConfig, algorithm, thresholds, policy string
	models, params, replicas                                       []string
	index, replica, maxBatch, misses                               int
	desc                                                           config.Model
	maxWait, heartbeat, drain                                      time.Duration
	latency                                                        config.Latency
	specOnStdin                                                    bool
	auth                                                           natsAuthFlags
	speculate                                                      speculateFlags
}

// subserverLong is the subserver command's help text.
const subserverLong = `subserver runs the sub-server of model --index of a deployment and connects it
to the deployment's NATS bus; the front end (serve --nats, or serve --processes,
which starts these processes itself) admits requests and streams their tokens.

  tokenrouter subserver --nats nats://10.0.0.1:4222 --index 1 --models slm,llm \
    --engine sim --profile paper-r2r/llm --algorithm r2r-random --param p=0.35

The model is described by --engine and its fields (--profile, --path, ...) or
by --model-config: one YAML mapping with the fields of a configuration file's
models entry. serve --processes gives its children everything, flags included,
as one versioned JSON value on their standard input (--spec-on-stdin).

Every member and the front end must agree on --models, --replicas, --algorithm,
--prefix, --heartbeat and --misses. A model with replicas runs one subserver per
replica, each with its --replica (0 to N-1); they may join from any machine on
the same NATS, and requests are placed among those up.

` + natsAuthHelp

func newSubserverCmd() *cobra.Command {
	var f subserverFlags
	cmd := &cobra.Command{
		Use:   "subserver",
		Short: "Run one model's sub-server as its own process, attached to a NATS bus",
		Long:  subserverLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runSubserver(cmd, f) },
	}
	f.register(cmd.Flags())
	return cmd
}

// register adds the flags to fl.
func (f *subserverFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.url, "nats", "", "NATS server URL (required), nats://HOST:PORT")
	fl.StringVar(&f.prefix, "prefix", busnats.DefaultPrefix, "the deployment's NATS subject prefix")
	fl.IntVar(&f.index, "index", 0, "this model's index (0: the small model)")
	fl.IntVar(&f.replica, "replica", 0, "this sub-server's replica of its model (0 to N-1 with --replicas NAME=N)")
	addReplicasFlag(fl, &f.replicas)
	fl.DurationVar(&f.drain, "drain", 30*time.Second, "with replicas: on SIGTERM, take no new request and finish those held for at most this long before leaving (0: leave at once; what is left goes on on the other replicas)")
	fl.StringSliceVar(&f.models, "models", nil, "all model names in order (required)")
	fl.StringVar(&f.model, "model", "", "this model's name (default: models[index]); must match --models")
	fl.StringVar(&f.modelConfig, "model-config", "", "this model's description as YAML (a config file's models entry; replaces the model flags below)")
	fl.StringVar(&f.desc.Engine, "engine", config.DefaultEngine, "engine kind: "+strings.Join(loader.Builtin().Names(), " or "))
	fl.StringVar(&f.desc.Profile, "profile", "", "sim: latency profile preset/model (a bare preset picks the model named like this one)")
	fl.DurationVar(&f.latency.Base, "latency-base", 0, "sim: explicit step latency base (with --latency-per-seq, --latency-per-token; replaces --profile)")
	fl.DurationVar(&f.latency.PerSeq, "latency-per-seq", 0, "sim: explicit step latency per sequence")
	fl.DurationVar(&f.latency.PerToken, "latency-per-token", 0, "sim: explicit step latency per extra token")
	fl.Uint64Var(&f.desc.Seed, "seed", 0, "sim seed (default: index+1; an explicit 0 is seed 0)")
	fl.IntVar(&f.desc.VocabSize, "vocab-size", 0, "sim: vocabulary size (0: the sim default)")
	fl.IntVar(&f.desc.ContextLength, "context-length", 0, "sim: context length; cpu: cap on the model's own (0: default)")
	fl.StringVar(&f.desc.Path, "path", "", "cpu: GGUF file or llama2.c checkpoint (or embedded:FILE, a file built into the binary)")
	fl.IntVar(&f.desc.Threads, "threads", 0, "cpu: kernel threads (0: GOMAXPROCS)")
	fl.IntVar(&f.desc.KVBudgetMB, "kv-budget-mb", 0, "cpu: KV cache budget in MiB (0: the engine default)")
	fl.IntVar(&f.desc.KVReserveMB, "kv-reserve-mb", 0, "cpu: KV cache memory in MiB (at most the budget) written at start-up (0: none)")
	fl.StringVar(&f.algorithm, "algorithm", config.DefaultAlgorithm, "routing algorithm")
	fl.StringArrayVar(&f.params, "param", nil, "algorithm parameter name=value (repeatable)")
	fl.StringVar(&f.thresholds, "thresholds", "1", "batching thresholds B: one value, one per model (\"1,3\": this model takes its own) or @plan.json")
	fl.DurationVar(&f.maxWait, "max-wait", 50*time.Millisecond, "launch a step anyway after this wait (0 disables the guard)")
	fl.StringVar(&f.policy, "policy", "", "this model's launch policy as JSON, {\"b\":[1,1,2,3],\"max_wait\":\"50ms\"} (replaces --thresholds and --max-wait)")
	fl.IntVar(&f.maxBatch, "max-batch", 0, "largest step batch (0: default)")
	fl.DurationVar(&f.heartbeat, "heartbeat", cluster.DefaultHeartbeat, "heartbeat interval")
	fl.IntVar(&f.misses, "misses", cluster.DefaultMisses, "missed front-end heartbeats before dropping every request")
	fl.BoolVar(&f.specOnStdin, "spec-on-stdin", false, "read everything from one JSON line on stdin (replaces every other flag), and exit when stdin closes (set by a parent process)")
	_ = fl.MarkHidden("spec-on-stdin")
	f.auth.register(fl)
	addSpeculateFlags(fl, &f.speculate)
}

func runSubserver(cmd *cobra.Command, f subserverFlags) error {
	stdin := bufio.NewReader(os.Stdin)
	spec, err := subserverSpec(cmd, f, stdin)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if f.specOnStdin {
		var cancel context.CancelFunc
		ctx, cancel = cancelOnEOF(ctx, stdin)
		defer cancel()
	}
	return runChild(ctx, spec)
}

// runChild runs the member spec describes (cluster.RunChild) with this
// binary's algorithms and the faults $TOKENROUTER_FAULTS asks for: the one
// way the subserver command runs, whether its spec came from a parent or
// from flags.
func runChild(ctx context.Context, spec cluster.ChildSpec) error {
	inject, err := faults.Parse(os.Getenv(faults.Env))
	if err != nil {
		return err
	}
	m := spec.Member
	log := slog.Default().With("model", m.Model.Name, "index", m.Index)
	log.Info("sub-server starting", "nats", spec.Bus.NATS, "prefix", spec.Bus.Prefix, "engine", m.Model.Engine)
	if inject.Active() {
		log.Warn("faults injected", "faults", inject.String())
	}
	err = cluster.RunChild(ctx, spec, system.Spec{Registry: builtin.Registry(), Faults: inject, Vocab: server.OutputVocab,
		OnPanic: logPanic(log), OnEvent: func(msg string, args ...any) { log.Info(msg, args...) }})
	log.Info("sub-server stopped")
	return err
}

// subserverSpec is the member's ChildSpec: read from stdin
// (--spec-on-stdin, which no other subserver flag goes with), or built
// from the flags.
func subserverSpec(cmd *cobra.Command, f subserverFlags, stdin *bufio.Reader) (cluster.ChildSpec, error) {
	if !f.specOnStdin {
		return flagSpec(cmd, f)
	}
	var set []string
	cmd.LocalNonPersistentFlags().VisitAll(func(fl *pflag.Flag) {
		if fl.Changed && fl.Name != "spec-on-stdin" {
			set = append(set, "--"+fl.Name)
		}
	})
	if len(set) > 0 {
		return cluster.ChildSpec{}, fmt.Errorf("--spec-on-stdin: the spec replaces %s", strings.Join(set, ", "))
	}
	return cluster.ReadChildSpec(stdin)
}

// flagSpec is the ChildSpec the flags describe, derived as a parent
// derives its children's (cluster.NewChildSpec).
func flagSpec(cmd *cobra.Command, f subserverFlags) (cluster.ChildSpec, error) {
	var c cluster.ChildSpec
	if f.url == "" {
		return c, errors.New("--nats is required")
	}
	params, err := parseParams(f.params)
	if err != nil {
		return c, err
	}
	desc, err := subserverModel(cmd, f)
	if err != nil {
		return c, err
	}
	launch, err := subserverLaunch(cmd, f)
	if err != nil {
		return c, err
	}
	sp, err := f.speculate.parse()
	if err != nil {
		return c, err
	}
	secrets, err := f.auth.secrets(os.Getenv)
	if err != nil {
		return c, err
	}
	models := make([]config.Model, len(f.models))
	for i, name := range f.models {
		models[i].Name = name
	}
	models[f.index] = desc
	if err := applyReplicas(models, f.replicas); err != nil {
		return c, err
	}
	s := system.Spec{Models: models, Algorithm: f.algorithm, Params: params, Launch: launch, MaxBatch: f.maxBatch, Speculate: sp}
	return cluster.NewChildSpec(s, f.index, f.replica, cluster.BusSpec{NATS: f.url, Prefix: f.prefix, Secrets: secrets,
		Heartbeat: f.heartbeat, Misses: f.misses, Drain: f.drain})
}

// cancelOnEOF returns a context that ends when stdin does: when the parent
// closes the pipe or dies.
func cancelOnEOF(ctx context.Context, stdin io.Reader) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, _ = io.Copy(io.Discard, stdin) // returns when the parent closes the pipe or dies
		cancel()
	}()
	return ctx, cancel
}

// subserverModel is this model's description: --model-config, or the
// model flags, named after --models[--index].
func subserverModel(cmd *cobra.Command, f subserverFlags) (config.Model, error) {
	if f.index < 0 || f.index >= len(f.models) {
		return config.Model{}, fmt.Errorf("--index %d: --models has %d names %v", f.index, len(f.models), f.models)
	}
	name := f.models[f.index]
	if f.model != "" && f.model != name {
		return config.Model{}, fmt.Errorf("--model %q: model %d of %v is %q", f.model, f.index, f.models, name)
	}
	desc := f.desc
	if f.modelConfig != "" {
		for _, n := range []string{"engine", "profile", "latency-base", "latency-per-seq", "latency-per-token", "seed", "vocab-size",
			"context-length", "path", "threads", "kv-budget-mb"} {
			if cmd.Flags().Changed(n) {
				return config.Model{}, fmt.Errorf("--%s: --model-config describes the model", n)
			}
		}
		dec := yaml.NewDecoder(strings.NewReader(f.modelConfig))
		dec.KnownFields(true)
		desc = config.Model{}
		if err := dec.Decode(&desc); err != nil {
			return config.Model{}, fmt.Errorf("--model-config: %w", err)
		}
		if desc.Name != name {
			return config.Model{}, fmt.Errorf("--model-config names model %q; model %d of %v is %q", desc.Name, f.index, f.models, name)
		}
		return desc, nil
	}
	desc.Name = name
	if f.latency != (config.Latency{}) {
		desc.Latency = &f.latency
	}
	if !cmd.Flags().Changed("seed") {
		desc.Seed = uint64(f.index + 1)
	}
	return desc, nil
}

// subserverLaunch is the launch that gives model --index the policy
// --policy says, or what --thresholds and --max-wait say.
func subserverLaunch(cmd *cobra.Command, f subserverFlags) (sched.Launch, error) {
	if f.maxWait < 0 {
		return sched.Launch{}, fmt.Errorf("--max-wait %v is negative: give a wait, or 0 to launch only at the thresholds", f.maxWait)
	}
	if f.policy == "" {
		l, err := config.ParseLaunch(f.thresholds, len(f.models), f.maxWait)
		if err != nil {
			return l, fmt.Errorf("--thresholds: %w", err)
		}
		if l.Auto {
			return l, errors.New(`--thresholds auto: a sub-server on its own cannot tune; give B values or @plan.json`)
		}
		return l, nil
	}
	if cmd.Flags().Changed("thresholds") || cmd.Flags().Changed("max-wait") {
		return sched.Launch{}, errors.New("--policy replaces --thresholds and --max-wait")
	}
	var p sched.Policy
	if err := json.Unmarshal([]byte(f.policy), &p); err != nil {
		return sched.Launch{}, fmt.Errorf("--policy: %w", err)
	}
	tables := make([]sched.Table, len(f.models))
	tables[f.index] = p.B
	return sched.Launch{Tables: tables, MaxWait: p.MaxWait}, nil
}

// logPanic logs a recovered panic once, with its stack.
func logPanic(log *slog.Logger) func(*subserver.Panic) {
	return func(p *subserver.Panic) {
		log.Error("panic recovered", "where", p.Where, "request", p.Request, "panic", fmt.Sprint(p.Value), "stack", string(p.Stack))
	}
}
