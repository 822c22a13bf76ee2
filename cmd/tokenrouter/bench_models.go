package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/builtin"
)

// benchModelFlags are bench's flags for the models, their placement, the
// workload and servers given by URL.
type benchModelFlags struct {
	models, threads, cpus, urls []string
	configPath, preset          string
	tokenizer, placement        string
	prompts, urlModel, apiKey   string
	rangeRatio                  float64
	vocab, clientProcs          int
	keepEOS, interference       bool
	interferenceBatches         []int
}

func addModelFlags(fl *pflag.FlagSet, m *benchModelFlags) {
	fl.StringArrayVar(&m.models, "model", nil, "a real model NAME=PATH on the cpu engine (GGUF, or llama2.c with --tokenizer; repeatable, small model first)")
	fl.StringVar(&m.tokenizer, "tokenizer", "", "tokenizer file for llama2.c checkpoints")
	fl.StringVar(&m.configPath, "config", "", "take the models (and, unless their flags are given, algorithm, parameters, thresholds, max-wait, placement) from a preset of this configuration file")
	fl.StringVar(&m.preset, "preset", "", "with --config: the preset (default: the first)")
	fl.StringArrayVar(&m.threads, "threads", nil, "cpu engine threads: N for every model, or NAME=N (repeatable; default: as --placement says)")
	fl.StringArrayVar(&m.cpus, "cpus", nil, "pin a model's threads (Linux): CPU list such as 0-1 for every model, or NAME=LIST (repeatable)")
	fl.StringVar(&m.placement, "placement", string(config.PlacementAuto), "how the models share the cores: partitioned (threads of their own), time-shared (one step at a time on every core) or auto (measure and pick)")
	fl.StringVar(&m.prompts, "prompts", "", "prompts file: JSON Lines with \"prompt\" (or \"text\"), or one prompt per line; tokenised with the models' shared tokenizer (default: random token ids of --prompt-len)")
	fl.Float64Var(&m.rangeRatio, "range-ratio", 0, "spread lengths: each request's output (and a generated prompt's) length is uniform in [L·(1−r), L·(1+r)] around --max-tokens (--prompt-len)")
	fl.IntVar(&m.vocab, "vocab", 0, "generated prompt ids are below this (0: the models' vocabulary)")
	fl.BoolVar(&m.keepEOS, "keep-eos", false, "end a request at its end-of-sequence token (default: ignore it and produce the full length, as random-weight models need)")
	fl.StringArrayVar(&m.urls, "url", nil, "also measure the OpenAI-compatible server at this URL, [LABEL=]URL (repeatable; side by side with --systems)")
	fl.StringVar(&m.urlModel, "url-model", "", "with --url: the model the requests name (default: the first the server lists)")
	fl.StringVar(&m.apiKey, "api-key", "", "with --url: send this key as \"Authorization: Bearer <key>\"")
	fl.IntVar(&m.clientProcs, "client-procs", 1, "with --url: processors bench runs on while it measures a server (GOMAXPROCS; each extra one's thread wakes take cores from a server on this machine); 0: all")
	fl.BoolVar(&m.interference, "interference", false, "measure how much the models slow each other when they step at once (partitioned: one thread each, unpinned and pinned; --rounds repeats)")
	fl.IntSliceVar(&m.interferenceBatches, "interference-batches", []int{1, 4, 8}, "with --interference: decode batch sizes")
}

// benchDesc is what a bench run measures: the models, the algorithm over
// them and a label for reports.
type benchDesc struct {
	models     []config.Model
	algorithm  string
	params     map[string]string
	thresholds string
	maxWait    time.Duration
	placement  config.Placement
	label      string // "profile paper-r2r" or "cpu slm, llm"
}

// benchDescribe reads the models from --config, --model or --profile, and
// applies --threads and --cpus.
func benchDescribe(cmd *cobra.Command, f benchFlags) (benchDesc, error) {
	changed := cmd.Flags().Changed
	m := f.models
	d := benchDesc{algorithm: f.algorithm, thresholds: f.thresholds, maxWait: f.maxWait}
	var err error
	if d.placement, err = config.ParsePlacement(m.placement); err != nil {
		return d, fmt.Errorf("--placement: %w", err)
	}
	if d.params, err = benchParams(f); err != nil {
		return d, err
	}
	switch {
	case m.configPath != "":
		for _, n := range []string{"model", "tokenizer", "profile", "agree"} {
			if changed(n) {
				return d, fmt.Errorf("--%s: the models come from --config", n)
			}
		}
		if err := d.fromConfig(m.configPath, m.preset, changed); err != nil {
			return d, err
		}
	case len(m.models) > 0:
		if changed("engine") && f.engine != loader.KindCPU || changed("profile") {
			return d, errors.New("--model runs on the cpu engine: drop --engine sim and --profile")
		}
		for i, v := range m.models {
			d.models = append(d.models, cpuModel(parseModelSpec(v), i, m.tokenizer, 0))
		}
		d.label = "cpu engine"
	case f.engine == loader.KindCPU:
		return d, errors.New("--engine cpu needs --model NAME=PATH (one per model, small first) or --config")
	case f.engine != loader.KindSim:
		return d, fmt.Errorf("--engine %q: want sim or cpu", f.engine)
	default:
		preset, err := sim.LoadPreset(f.profile)
		if err != nil {
			return d, err
		}
		d.models, d.label = bench.SimModels(preset, f.agree), "profile "+preset.Name
	}
	if err := applyPlacementFlags(d.models, m.threads, m.cpus); err != nil {
		return d, err
	}
	if d.label == "cpu engine" || strings.HasPrefix(d.label, "config") {
		d.label += ": " + strings.Join(modelNames(d.models), ", ")
	}
	return d, loader.Builtin().CheckAll(&config.Config{Models: d.models})
}

// fromConfig takes the models of a preset of a configuration file, and its
// algorithm, parameters, thresholds, max-wait and placement where their
// flags were not given.
func (d *benchDesc) fromConfig(path, name string, changed func(string) bool) error {
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
		d.models = append(d.models, m)
	}
	if !changed("algorithm") {
		d.algorithm = p.Algorithm
		if !changed("param") && !changed("p") {
			d.params = p.Params
		}
	}
	if !changed("thresholds") {
		d.thresholds = p.Thresholds
	}
	if !changed("max-wait") {
		d.maxWait = max(p.MaxWait, 0)
	}
	if !changed("placement") {
		d.placement = p.Placement
	}
	d.label = "config " + path + " preset " + p.Name
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

// benchRun is a bench run as built from the flags: the systems' setup and
// the closed loop's options.
type benchRun struct {
	desc   benchDesc
	setup  bench.Setup
	opts   bench.Options
	placed loader.Placed
}

// newBenchRun builds a run: it checks that the models share a vocabulary
// (opening each in turn), reads the prompts, and places the models when
// a system runs in this process (inProcess), saying what auto chose.
func newBenchRun(cmd *cobra.Command, f benchFlags, inProcess bool) (benchRun, error) {
	d, err := benchDescribe(cmd, f)
	if err != nil {
		return benchRun{}, err
	}
	launch, err := config.ParseLaunch(d.thresholds, len(d.models), d.maxWait)
	if err != nil {
		return benchRun{}, fmt.Errorf("--thresholds: %w", err)
	}
	ctx := cmd.Context()
	ks, err := runKinds(ctx, f, d.models, inProcess)
	if err != nil {
		return benchRun{}, err
	}
	voc, err := ks.SharedVocabulary(ctx, d.models)
	if err != nil {
		return benchRun{}, fmt.Errorf("bench: %w", err)
	}
	m := f.models
	if m.clientProcs < 0 {
		return benchRun{}, fmt.Errorf("--client-procs %d: want 0 (all) or more", m.clientProcs)
	}
	r := benchRun{desc: d, opts: bench.Options{ClientProcs: m.clientProcs, PromptLen: f.promptLen, MaxTokens: f.maxTokens, RangeRatio: m.rangeRatio,
		Vocab: voc.Size, BOS: voc.BOS, KeepEOS: m.keepEOS, Warmup: f.warmup, Duration: f.duration, Seed: f.seed}}
	if m.vocab > 0 {
		r.opts.Vocab = m.vocab
	}
	if m.rangeRatio < 0 || m.rangeRatio >= 1 {
		return r, fmt.Errorf("--range-ratio %g: want 0 ≤ r < 1", m.rangeRatio)
	}
	if m.prompts != "" {
		var enc func(string) []int32
		if voc.Tokenizer != nil {
			enc = func(s string) []int32 { return voc.Tokenizer.Encode(s, true) }
		} else if inProcess {
			return r, errors.New("--prompts: the models have no tokenizer (simulated models): give --model files, or measure only servers (--url)")
		}
		if r.opts.Prompts, err = bench.ReadPrompts(m.prompts, enc); err != nil {
			return r, err
		}
	}
	if p, o := r.opts.Longest(); inProcess && p+o > voc.ContextLength {
		return r, fmt.Errorf("the longest request (a %d-token prompt and %d output tokens) exceeds the models' context of %d tokens: lower --max-tokens or --prompt-len", p, o, voc.ContextLength)
	}
	r.setup = bench.Setup{Models: d.models, Algorithm: d.algorithm, Params: d.params, Registry: builtin.Registry(), Launch: launch, BusDelay: f.busDelay,
		HTTP: bench.HTTPOptions{Model: m.urlModel, APIKey: m.apiKey}, Speculate: f.spec, Kinds: ks}
	if !inProcess {
		return r, nil
	}
	if r.placed, err = ks.Place(ctx, d.models, d.placement, loader.PlaceOptions{}); err != nil {
		return r, err
	}
	r.setup.Models, r.setup.TimeShared = r.placed.Models, r.placed.TimeShared()
	if r.placed.Reason != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "placement: %s (%s)\n", r.placed.Placement, r.placed.Reason)
	}
	return r, nil
}

// placement describes the run's placement for reports.
func (r benchRun) placement() string {
	if r.placed.Placement == "" {
		return ""
	}
	var th []string
	for _, m := range r.placed.Models {
		if m.Threads > 0 {
			th = append(th, fmt.Sprintf("%s %d", m.Name, m.Threads))
		}
	}
	s := string(r.placed.Placement)
	if r.desc.placement == config.PlacementAuto {
		s += " (auto)"
	}
	if len(th) > 0 {
		s += ", threads " + strings.Join(th, ", ")
	}
	return s
}

// interferenceRow is one line of bench --interference.
type interferenceRow struct {
	Pinned     bool    `json:"pinned"`
	Batch      int     `json:"batch"`
	Model      string  `json:"model"`
	Threads    int     `json:"threads"`
	AloneMS    float64 `json:"alone_ms"`
	TogetherMS float64 `json:"together_ms"`
	Slowdown   float64 `json:"slowdown"`
	Rounds     int     `json:"rounds"`
}

// runInterference measures how much the models slow each other stepping
// at once on one thread each, unpinned and pinned to a CPU each. Every
// round measures every case; a row keeps the quickest round's medians
// (alone and together each), as other work on the machine only slows.
func runInterference(cmd *cobra.Command, f benchFlags) error {
	d, err := benchDescribe(cmd, f)
	if err != nil {
		return err
	}
	ms := slices.Clone(d.models)
	for i := range ms {
		if ms[i].Threads == 0 {
			ms[i].Threads = 1
		}
	}
	ks, err := runKinds(cmd.Context(), f, ms, true)
	if err != nil {
		return err
	}
	pins := []bool{false}
	if _, err := bench.CanPin(len(ms)); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "pinned: not measured (%v)\n", err)
	} else {
		pins = append(pins, true)
	}
	var rows []interferenceRow
	for round := range max(f.rounds, 1) {
		k := 0
		for _, pin := range pins {
			for _, b := range f.models.interferenceBatches {
				fr, err := bench.MeasureInterference(cmd.Context(), ks, ms, loader.StepTiming{Batch: b, Steps: 24}, pin)
				if err != nil {
					return err
				}
				for i, name := range fr.Models {
					r := interferenceRow{Pinned: pin, Batch: b, Model: name, Threads: fr.Threads[i],
						AloneMS: millis(fr.Alone[i]), TogetherMS: millis(fr.Together[i]), Rounds: round + 1}
					if round == 0 {
						rows = append(rows, r)
					} else {
						rows[k].AloneMS, rows[k].TogetherMS = min(rows[k].AloneMS, r.AloneMS), min(rows[k].TogetherMS, r.TogetherMS)
						rows[k].Rounds = r.Rounds
					}
					rows[k].Slowdown = rows[k].TogetherMS/rows[k].AloneMS - 1
					k++
				}
			}
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "round %d/%d done\n", round+1, max(f.rounds, 1))
	}
	return printInterference(cmd.OutOrStdout(), f.format, d.label, rows)
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func printInterference(w io.Writer, format, label string, rows []interferenceRow) error {
	if format == "json" {
		return json.NewEncoder(w).Encode(rows)
	}
	fmt.Fprintf(w, "%s: median decode step alone and with every model stepping at once (partitioned; quickest of %d rounds)\n", label, rows[0].Rounds)
	fmt.Fprintf(w, "%-8s %5s %-12s %7s %10s %10s %9s\n", "pinned", "batch", "model", "threads", "alone", "together", "slowdown")
	for _, r := range rows {
		fmt.Fprintf(w, "%-8v %5d %-12s %7d %8.2fms %8.2fms %+8.1f%%\n", r.Pinned, r.Batch, r.Model, r.Threads, r.AloneMS, r.TogetherMS, 100*r.Slowdown)
	}
	return nil
}

// runKinds returns the engine kinds one bench command opens its models
// with: the cpu engines share one arena of KV memory (cpu.Arena), warmed
// with kvWarmBytes before anything is measured, so that the engines bench
// opens for each measurement step on warm memory like a server's that has
// run a while, not on memory they fault in as their caches grow. The
// caches keep the blocks of finished sequences (prefix caching), so a
// slice's engines grow with the tokens it runs: the fast pair's caches
// hold 46 and 82 KB per token, and its engines grew some 560 MB (page
// faults counted) in the first round's 20-s slice at N = 8, beyond the
// 256 MB this reserve used to be; the later rounds reused that memory.
// stepsHere says whether any engine steps in this process (not when bench
// only drives servers given by URL and opens the models for their
// vocabulary).
func runKinds(ctx context.Context, f benchFlags, ms []config.Model, stepsHere bool) (loader.Kinds, error) {
	ks := loader.Builtin()
	if !slices.ContainsFunc(ms, func(m config.Model) bool { return m.Engine == loader.KindCPU }) {
		return ks, nil
	}
	warm, err := kvWarmBytes(f.kvReserveMB, ms, stepsHere)
	if err != nil {
		return nil, err
	}
	arena := cpu.NewArena()
	if err := arena.Reserve(ctx, warm); err != nil {
		return nil, err
	}
	return ks.WithKVArena(arena), nil
}

// kvWarmBytes is the KV memory bench warms before it measures: mb
// (--kv-reserve-mb) megabytes, at most twice the cpu models' files
// together (tiny models, with a few MB of weights and of KV per slice, do
// not warm 1 GiB for every run), and none when no engine steps in this
// process (stepsHere false).
func kvWarmBytes(mb int, ms []config.Model, stepsHere bool) (int64, error) {
	if mb < 0 {
		return 0, fmt.Errorf("--kv-reserve-mb %d: want 0 or more", mb)
	}
	if !stepsHere {
		return 0, nil
	}
	files := int64(0)
	for _, m := range ms {
		if fi, err := os.Stat(m.Path); err == nil && m.Engine == loader.KindCPU {
			files += fi.Size()
		}
	}
	return min(int64(mb)<<20, 2*files), nil
}
