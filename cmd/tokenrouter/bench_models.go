package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/lab"
	"github.com/tokenrouter/tokenrouter/loader"
)

// benchModelFlags are bench's flags for the models, their placement, the
// workload and servers given by URL.
type benchModelFlags struct {
	models, threads, cpus, urls []string
	replicas                    []string
	configPath, preset          string
	tokenizer, placement        string
	prompts, urlModel, apiKey   string
	rangeRatio                  float64
	vocab, clientProcs          int
	keepEOS                     bool
}

// addModelFileFlags registers --model and --tokenizer.
func addModelFileFlags(fl *pflag.FlagSet, m *benchModelFlags) {
	fl.StringArrayVar(&m.models, "model", nil, "a real model NAME=PATH on the cpu engine (GGUF, or llama2.c with --tokenizer; repeatable, small model first)")
	fl.StringVar(&m.tokenizer, "tokenizer", "", "tokenizer file for llama2.c checkpoints")
}

// addModelSourceFlags registers --config, --preset, --threads and --cpus.
func addModelSourceFlags(fl *pflag.FlagSet, m *benchModelFlags) {
	fl.StringVar(&m.configPath, "config", "", "take the models (and, unless their flags are given, algorithm, parameters, thresholds, max-wait, placement) from a preset of this configuration file")
	fl.StringVar(&m.preset, "preset", "", "with --config: the preset (default: the first)")
	fl.StringArrayVar(&m.threads, "threads", nil, "cpu engine threads: N for every model, or NAME=N (repeatable; default: as --placement says)")
	fl.StringArrayVar(&m.cpus, "cpus", nil, "pin a model's threads (Linux): CPU list such as 0-1 for every model, or NAME=LIST (repeatable)")
}

// addPlacementFlag registers --placement.
func addPlacementFlag(fl *pflag.FlagSet, m *benchModelFlags) {
	fl.StringVar(&m.placement, "placement", string(config.PlacementAuto), "how the models share the cores: partitioned (threads of their own), time-shared (one step at a time on every core) or auto (measure and pick)")
}

// addModelFlags registers the model flags of bench run and compare.
func addModelFlags(fl *pflag.FlagSet, m *benchModelFlags) {
	addModelFileFlags(fl, m)
	addModelSourceFlags(fl, m)
	addPlacementFlag(fl, m)
	addReplicasFlag(fl, &m.replicas)
}

// addWorkloadFlags registers the prompts' flags.
func addWorkloadFlags(fl *pflag.FlagSet, m *benchModelFlags) {
	fl.StringVar(&m.prompts, "prompts", "", "prompts file: JSON Lines with \"prompt\" (or \"text\"), or one prompt per line; tokenised with the models' shared tokenizer (default: random token ids of --prompt-len)")
	fl.Float64Var(&m.rangeRatio, "range-ratio", 0, "spread lengths: each request's output (and a generated prompt's) length is uniform in [L·(1−r), L·(1+r)] around --max-tokens (--prompt-len)")
	fl.IntVar(&m.vocab, "vocab", 0, "generated prompt ids are below this (0: the models' vocabulary)")
	fl.BoolVar(&m.keepEOS, "keep-eos", false, "end a request at its end-of-sequence token (default: ignore it and produce the full length, as random-weight models need)")
}

// addURLFlags registers the flags of servers given by URL.
func addURLFlags(fl *pflag.FlagSet, m *benchModelFlags) {
	fl.StringArrayVar(&m.urls, "url", nil, "also measure the OpenAI-compatible server at this URL, [LABEL=]URL (repeatable; side by side with --systems)")
	fl.StringVar(&m.urlModel, "url-model", "", "with --url: the model the requests name (default: the first the server lists)")
	fl.StringVar(&m.apiKey, "api-key", "", "with --url: send this key as \"Authorization: Bearer <key>\"")
	fl.IntVar(&m.clientProcs, "client-procs", 1, "with --url: processors bench runs on while it measures a server (GOMAXPROCS; each extra one's thread wakes take cores from a server on this machine); 0: all")
}

// benchDescribe reads the models from --config, --model or --profile, and
// applies --threads and --cpus; changed says which flags were given. The
// spec it returns describes the deployment (models, label, algorithm,
// parameters, thresholds, max-wait and placement).
func benchDescribe(changed func(string) bool, f deployFlags, m benchModelFlags) (bench.Spec, error) {
	d := bench.Spec{Algorithm: f.algorithm, Thresholds: f.thresholds, MaxWait: f.maxWait}
	var err error
	if d.Placement, err = config.ParsePlacement(m.placement); err != nil {
		return d, fmt.Errorf("--placement: %w", err)
	}
	if d.Params, err = benchParams(f); err != nil {
		return d, err
	}
	switch {
	case m.configPath != "":
		for _, n := range []string{"model", "tokenizer", "profile", "agree"} {
			if changed(n) {
				return d, fmt.Errorf("--%s: the models come from --config", n)
			}
		}
		if err := describeConfig(&d, m.configPath, m.preset, changed); err != nil {
			return d, err
		}
	case len(m.models) > 0:
		if changed("engine") && f.engine != loader.KindCPU || changed("profile") {
			return d, errors.New("--model runs on the cpu engine: drop --engine sim and --profile")
		}
		for i, v := range m.models {
			d.Models = append(d.Models, cpuModel(parseModelSpec(v), i, m.tokenizer, 0))
		}
		d.Label = "cpu engine"
	case f.engine == loader.KindCPU:
		return d, errors.New("--engine cpu needs --model NAME=PATH (one per model, small first) or --config")
	case f.engine != loader.KindSim:
		return d, fmt.Errorf("--engine %q: want sim or cpu", f.engine)
	default:
		preset, err := sim.LoadPreset(f.profile)
		if err != nil {
			return d, err
		}
		d.Models, d.Label = bench.SimModels(preset, f.agree), "profile "+preset.Name
	}
	if err := applyPlacementFlags(d.Models, m.threads, m.cpus); err != nil {
		return d, err
	}
	if err := applyReplicas(d.Models, m.replicas); err != nil {
		return d, err
	}
	if d.Label == "cpu engine" || strings.HasPrefix(d.Label, "config") {
		d.Label += ": " + strings.Join(modelNames(d.Models), ", ")
	}
	return d, loader.Builtin().CheckAll(&config.Config{Models: d.Models})
}

// describeConfig takes the models of a preset of a configuration file, and
// its algorithm, parameters, thresholds, max-wait and placement where
// their flags were not given.
func describeConfig(d *bench.Spec, path, name string, changed func(string) bool) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	p := cfg.Presets[0]
	if name != "" {
		i := slices.IndexFunc(cfg.Presets, func(p config.Preset) bool { return p.Name == name })
		if i < 0 {
			return fmt.Errorf("--preset %q: %s has no such preset", name, path)
		}
		p = cfg.Presets[i]
	}
	for _, n := range p.Models {
		m, _ := cfg.Model(n) // Load validated the references
		m.Replicas = p.ReplicasOf(m)
		d.Models = append(d.Models, m)
	}
	if !changed("algorithm") {
		d.Algorithm = p.Algorithm
		if !changed("param") && !changed("p") {
			d.Params = p.Params
		}
	}
	if !changed("thresholds") {
		d.Thresholds = p.Thresholds
	}
	if !changed("max-wait") {
		d.MaxWait = max(p.MaxWait, 0)
	}
	if !changed("placement") {
		d.Placement = p.Placement
	}
	d.Label = "config " + path + " preset " + p.Name
	return nil
}

func modelNames(ms []config.Model) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// applyPlacementFlags sets the models' threads and CPUs from --threads and
// --cpus values: VALUE for every model, or NAME=VALUE for one.
func applyPlacementFlags(ms []config.Model, threads, cpus []string) error {
	each := func(flag string, vals []string, set func(m *config.Model, v string) error) error {
		for _, kv := range vals {
			name, v, one := strings.Cut(kv, "=")
			if !one {
				v = kv
			}
			hit := false
			for i := range ms {
				if one && ms[i].Name != name {
					continue
				}
				hit = true
				if err := set(&ms[i], v); err != nil {
					return fmt.Errorf("--%s %q: %w", flag, kv, err)
				}
			}
			if !hit {
				return fmt.Errorf("--%s %q: no model %q (have %s)", flag, kv, name, strings.Join(modelNames(ms), ", "))
			}
		}
		return nil
	}
	err := each("threads", threads, func(m *config.Model, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return errors.New("want a positive thread count")
		}
		m.Threads = n
		return nil
	})
	if err != nil {
		return err
	}
	return each("cpus", cpus, func(m *config.Model, v string) (err error) {
		m.CPUs, err = config.ParseCPUList(v)
		return err
	})
}

// namedModels describes the --model files on the cpu engine, each named
// by its NAME= or else its file name (made unique).
func namedModels(m benchModelFlags) []config.Model {
	var ms []config.Model
	for i, v := range m.models {
		spec := parseModelSpec(v)
		if spec.name == "" {
			spec.name = strings.TrimSuffix(filepath.Base(spec.path), filepath.Ext(spec.path))
		}
		c := cpuModel(spec, i, m.tokenizer, 0)
		if slices.ContainsFunc(ms, func(o config.Model) bool { return o.Name == c.Name }) {
			c.Name = fmt.Sprintf("%s-%d", c.Name, i)
		}
		ms = append(ms, c)
	}
	return ms
}

// benchInterferenceLong is the bench interference command's help text.
const benchInterferenceLong = `bench interference measures how much the models slow each other stepping at
once: each model's median decode step alone and with every model stepping at
once, partitioned on one thread each (unless --threads says), unpinned and
pinned to a CPU each (Linux), at each --interference-batches size. Every round
(--rounds) measures every case; a row keeps the quickest round's medians.

  tokenrouter bench interference --model slm=A.gguf --model llm=B.gguf --interference-batches 1,4,8 --rounds 3`

// newBenchInterferenceCmd builds "bench interference": lab.RunInterference.
func newBenchInterferenceCmd() *cobra.Command {
	var d deployFlags
	var m benchModelFlags
	r := lab.InterferenceRun{}
	cmd := &cobra.Command{
		Use:   "interference",
		Short: "Measure how much the models slow each other stepping at once",
		Long:  benchInterferenceLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := benchDescribe(cmd.Flags().Changed, d, m)
			if err != nil {
				return err
			}
			r.Models, r.Label, r.Out, r.Progress = s.Models, s.Label, cmd.OutOrStdout(), cmd.ErrOrStderr()
			return lab.RunInterference(cmd.Context(), r)
		},
	}
	fl := cmd.Flags()
	addSimFlags(fl, &d)
	addModelFileFlags(fl, &m)
	addModelSourceFlags(fl, &m)
	addKVReserveFlag(fl, &r.KVReserveMB)
	fl.IntVar(&r.Rounds, "rounds", 2, "measure every case this many times (a row keeps the quickest)")
	fl.IntSliceVar(&r.Batches, "interference-batches", []int{1, 4, 8}, "decode batch sizes")
	fl.StringVar(&r.Format, "format", "table", "output: table or json")
	return cmd
}
