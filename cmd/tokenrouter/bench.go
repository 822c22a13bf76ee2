package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/autotune"
	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// benchFlags are the bench command's flags.
type benchFlags struct {
	engine, profile, algorithm, thresholds, system, format string
	p                                                      float64
	params                                                 []string
	concurrency                                            []int
	maxWait, duration, warmup                              time.Duration
	maxTokens, promptLen                                   int
	seed                                                   uint64
	validate                                               bool
	rounds                                                 int
	tolerance                                              float64
	retries                                                int
	maxLateness                                            time.Duration
	maxStepDev                                             float64
	resolve                                                time.Duration
	agree                                                  float64
	speculate                                              speculateFlags
	spec                                                   subserver.Speculation // parsed from speculate
	busDelay                                               time.Duration
	kvReserveMB                                            int
	compare                                                benchCompareFlags
	models                                                 benchModelFlags
}

// benchRow is one measured configuration, as printed.
type benchRow struct {
	System          string  `json:"system"`
	Algorithm       string  `json:"algorithm"`
	Concurrency     int     `json:"concurrency"`
	Thresholds      []int   `json:"thresholds,omitempty"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	Tokens          int     `json:"tokens"`
	Seconds         float64 `json:"seconds"`
	RoutedFraction  float64 `json:"routed_fraction"`
	// Auto marks automatic thresholds; Thresholds then holds the final
	// table's entries at this concurrency.
	Auto bool `json:"auto,omitempty"`
	// Plans counts the tables the tuner computed during the run.
	Plans int `json:"plans,omitempty"`
	// Tables is the final B*(n) table per model (auto only).
	Tables []sched.Table `json:"tables,omitempty"`
	// EstimatedP and EstimatedLatencyMS are the estimate behind the final
	// tables (auto only).
	EstimatedP         [][]float64 `json:"estimated_p,omitempty"`
	EstimatedLatencyMS []float64   `json:"estimated_latency_ms,omitempty"`
	// Placement is how the models shared the cores.
	Placement string `json:"placement,omitempty"`
}

// benchLong is the bench command's help text.
const benchLong = `bench keeps --concurrency requests in flight (a finished request is replaced at
once), warms up, then counts committed tokens over a measured window.

  tokenrouter bench --engine sim --profile paper-r2r --algorithm r2r-random --p 0.35 \
    --concurrency 4 --thresholds 1,3 --max-wait 0 --system tokenrouter --duration 15s --format json

--thresholds auto (the default) starts every model at B = 1 and lets the runtime
estimate the routing probabilities and step latencies and push the optimal
tables B*(n) (DESIGN §6); a comma-separated list fixes static thresholds.

--system lockstep runs the same engines and algorithm the way R2R's official
serving does (all requests advance in global steps).

Real models run on the cpu engine, small model first (GGUF files, or llama2.c
checkpoints with --tokenizer; the models must share one vocabulary), or come
from a preset of a configuration file (--config, --preset):

  tokenrouter bench --model slm=smol135.gguf --model llm=smol360.gguf \
    --systems tokenrouter-auto,lockstep,std-serving,slm-only,llm-only --concurrency 1,4,8

--predict FILE adds the throughput model's prediction beside each --systems
row, with the ratio measured/predicted (table, --csv and JSON), from a profile
that bench --calibrate wrote for the same models, placement and threads (a
profile of another placement or thread count is refused):

  tokenrouter bench --calibrate --model slm=A.gguf --model llm=B.gguf --out pair.json
  tokenrouter bench --model slm=A.gguf --model llm=B.gguf --placement partitioned \
    --systems tokenrouter-auto,tokenrouter,lockstep,std-serving,slm-only,llm-only \
    --concurrency 1,4,8,16 --predict pair.partitioned.json

It predicts r2r-random at --p with --prompt-len (or the prompts' mean length)
and --max-tokens as the workload: tokenrouter by the Markov chain at its
thresholds (at the best ones, B0 = 1, when automatic; the max-wait guard
simulated when it can fire), tokenrouter-auto at the best thresholds,
tokenrouter-b1 at B = 1, lockstep by n / (L0(n) + Σ_k Binomial(k; n, p)·L1(k)),
slm-only and llm-only by n / L(n). std-serving, query-level and servers given
by URL have no prediction ("-").

--recalibrate predicts the same way from curves calibrated (the --calibrate-*
grid) on the run's own models as placed, instead of from a file: it calibrates
before the first concurrency and after each (after each round with
--recalibrate-every round), and prices each concurrency's rows on the
calibrations just before and during its rounds (the mean of two, the pointwise
median of more). The machine's speed drifts from minute to minute, and a
calibration taken minutes before a run can be off by more than the model's own
error. With --validate, each concurrency's points are predicted the same way.

--placement says how the models share the cores: partitioned (each model on
threads of its own: an even share of the cores unless --threads NAME=N says;
--cpus NAME=LIST pins them), time-shared (every model on every core, one step
at a time; each sub-server still schedules its own launches) or auto (the
default: a quick measurement of each model's decode step both ways, three times
in turn, picks one, and the output says which and why). --interference measures
how much the models slow each other stepping at once on one thread each,
unpinned and pinned to a CPU each.

Prompts are random token ids of --prompt-len in the models' vocabulary, or the
lines of --prompts FILE (JSON Lines with "prompt", or plain text) tokenised with
the models' tokenizer; --range-ratio r draws each request's lengths uniformly
from [L·(1−r), L·(1+r)]. Requests ignore the end-of-sequence token (random
weights would stop anywhere) unless --keep-eos.

--url [LABEL=]URL (repeatable, or a URL in --systems) drives any OpenAI-compatible
server with the same clients, side by side with the systems run here: streamed
/v1/completions with max_tokens and ignore_eos, the prompt as text (--prompts)
or token ids; each streamed chunk with text is a token, reconciled with the
final usage. For the same prompts, describe the server's models here too
(--model, --config) or give --vocab.

  tokenrouter serve --model slm=smol135.gguf --model llm=smol360.gguf --placement time-shared --port 30001 &
  tokenrouter bench --model slm=smol135.gguf --model llm=smol360.gguf --placement time-shared \
    --systems tokenrouter --url served=http://127.0.0.1:30001 --concurrency 8 --rounds 4

Client w's k-th request carries the routing seed --seed ^ w<<32 ^ k, and
seeded draws depend only on the seed and the position (route.Request.Draw), so
runs with the same --seed and concurrency see the same routing draws (common
random numbers) whatever the goroutine schedule.

To change r2r-random's probability during a run (drift experiments):
  --param p-after=0.10 --param switch-at=20s
switches from --p to 0.10 20 s after the system starts (warm-up included).

--validate checks the throughput model against the runtime: sim engine,
batch-independent profile, r2r-random, max-wait 0 (unless set), for each
N in --concurrency (default 2..6) and every feasible B1 with B0 = 1, the
measured and the predicted (exact Markov chain) throughput side by side, and
whether the predicted best B1 is the measured best. The table also shows the
model's prediction at the routed fraction the windows actually had: a
finite run's routing draws stray from p, and throughput moves with them.
Each point is measured
for --duration (default 10s) in --rounds interleaved slices (one concurrency
after another; the order of its points is shuffled per round), each slice after
its own --warmup (default 1s).
The comparison assumes the runtime ran at the profile's step times on a
machine that was not starved: a slice whose mean step time is off the profile
by more than --max-step-dev, or during which a probe's 1 ms sleeps woke more
than --max-lateness late on average, is discarded and measured again (up to
--retries times; the table reports the retries). The criterion looks at the
machine, never at the throughput.

All points of a round share one seed, so two points' slices of a round form a
pair. The measured best is the point with the highest mean; it is told apart
(resolved) when it leads every other point by more than the 95% Student-t
confidence interval of the paired differences. Neighbouring B1 can differ by
less than the noise of a short run (the model puts N=5's B1=3 and B1=4 0.17%
apart), so --resolve gives each N a budget of further measuring: while the
best is not resolved, it and the points it does not yet clearly lead are
measured again in further rounds. The interval is checked after each round,
so its error rate is somewhat above 5%.

Progress goes to stderr.`

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure committed tokens/s under a closed loop of concurrent requests",
		Long:  benchLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if f.spec, err = f.speculate.parse(); err != nil {
				return err
			}
			switch {
			case f.compare.calibrate:
				return runCalibrate(cmd, f)
			case f.validate:
				return runValidate(cmd, f)
			case f.models.interference:
				return runInterference(cmd, f)
			case f.compare.systems != "" || len(f.models.urls) > 0:
				return runCompare(cmd, f)
			}
			return runBench(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.engine, "engine", "sim", "engine: sim, or cpu (with --model or --config)")
	fl.StringVar(&f.profile, "profile", "paper-r2r", "sim latency profile")
	fl.StringVar(&f.algorithm, "algorithm", "r2r-random", "routing algorithm")
	fl.Float64Var(&f.p, "p", 0.35, "routing probability (r2r-random)")
	fl.StringArrayVar(&f.params, "param", nil, "algorithm parameter name=value (repeatable)")
	fl.IntSliceVar(&f.concurrency, "concurrency", []int{4}, "requests in flight (a list runs each)")
	fl.StringVar(&f.thresholds, "thresholds", "auto", "batching thresholds: auto, or B per model (1,3)")
	fl.DurationVar(&f.maxWait, "max-wait", 50*time.Millisecond, "launch anyway after this wait (0 disables the guard)")
	fl.StringVar(&f.system, "system", "tokenrouter", "system: "+strings.Join(bench.Systems(), ", "))
	fl.DurationVar(&f.duration, "duration", 15*time.Second, "measured window (per point with --validate, default 10s there)")
	fl.DurationVar(&f.warmup, "warmup", 2*time.Second, "warm-up before the window (per slice with --validate, default 1s there)")
	fl.IntVar(&f.maxTokens, "max-tokens", 4096, "output tokens per request")
	fl.IntVar(&f.promptLen, "prompt-len", 16, "prompt tokens per request")
	fl.IntVar(&f.kvReserveMB, "kv-reserve-mb", 1024, "cpu engines: KV memory (MB, at most twice the model files' size together) warmed before the first measurement; the engines opened for each measurement share it and reuse what those before them held (0: none; none either when only servers given by URL are measured)")
	fl.Uint64Var(&f.seed, "seed", 1, "seed for prompts and routing decisions")
	fl.StringVar(&f.format, "format", "table", "output: table or json")
	fl.Float64Var(&f.agree, "agree", 0, "sim: probability that the large model's token at a routed position equals the small model's (model 0 samples model 1's token)")
	addSpeculateFlags(fl, &f.speculate)
	fl.DurationVar(&f.busDelay, "bus-delay", 0, "delay every event between sub-servers by this much, one way (a split deployment; 0: none)")
	addCompareFlags(fl, &f.compare)
	addModelFlags(fl, &f.models)
	fl.BoolVar(&f.validate, "validate", false, "compare measured and predicted throughput for N = 2..6 and every B1 (B0 = 1)")
	fl.IntVar(&f.rounds, "rounds", 2, "with --validate or --systems: interleaved slices per point (round r uses seed --seed + r; with --systems it starts at system r mod their number, so over a multiple of that each system runs first as often)")
	fl.Float64Var(&f.tolerance, "tolerance", 0.02, "with --validate: allowed relative gap between measured and predicted")
	fl.IntVar(&f.retries, "retries", 3, "with --validate: re-measure a slice the machine starved up to this many times")
	fl.DurationVar(&f.maxLateness, "max-lateness", time.Millisecond, "with --validate: a slice whose mean timer lateness exceeds this was starved")
	fl.Float64Var(&f.maxStepDev, "max-step-dev", 0.02, "with --validate: a slice whose mean step time is off the profile by more than this was starved")
	fl.DurationVar(&f.resolve, "resolve", 0, "with --validate: measuring time per N to spend telling the best B1 apart from its runner-up (0: none)")
	cmd.AddCommand(newBenchEngineCmd())
	return cmd
}

// benchParams returns the algorithm parameters, with --p as p (for
// r2r-random, the one algorithm that reads it) unless --param p=... is
// given.
func benchParams(f benchFlags) (map[string]string, error) {
	params, err := parseParams(f.params)
	if err != nil {
		return nil, err
	}
	if _, ok := params["p"]; !ok && f.algorithm == config.DefaultAlgorithm {
		params["p"] = strconv.FormatFloat(f.p, 'g', -1, 64)
	}
	return params, nil
}

// benchDeployment reads the profile, the algorithm parameters and the
// launch policy a run is built from.
func benchDeployment(f benchFlags) (sim.Preset, map[string]string, sched.Launch, error) {
	preset, err := sim.LoadPreset(f.profile)
	if err != nil {
		return sim.Preset{}, nil, sched.Launch{}, err
	}
	params, err := benchParams(f)
	if err != nil {
		return sim.Preset{}, nil, sched.Launch{}, err
	}
	launch, err := config.ParseLaunch(f.thresholds, len(preset.Models), f.maxWait)
	if err != nil {
		return sim.Preset{}, nil, sched.Launch{}, fmt.Errorf("--thresholds: %w", err)
	}
	return preset, params, launch, nil
}

func runBench(cmd *cobra.Command, f benchFlags) error {
	if f.format != "table" && f.format != "json" {
		return fmt.Errorf("--format %q: want table or json", f.format)
	}
	if f.compare.predict != "" || f.compare.recalibrate {
		return fmt.Errorf("--predict and --recalibrate: predictions go beside --systems rows (--systems %s)", f.system)
	}
	run, err := newBenchRun(cmd, f, true)
	if err != nil {
		return err
	}
	var rows []benchRow
	for _, n := range f.concurrency {
		row, err := benchPoint(cmd, f, run, n)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	out := cmd.OutOrStdout()
	if f.format == "json" {
		enc := json.NewEncoder(out)
		if len(rows) == 1 {
			return enc.Encode(rows[0])
		}
		return enc.Encode(rows)
	}
	if pl := run.placement(); pl != "" {
		fmt.Fprintf(out, "%s, placement %s\n", run.desc.label, pl)
	}
	fmt.Fprintf(out, "%-12s %-12s %4s %-10s %10s %8s %7s %s\n", "system", "algorithm", "N", "B", "tok/s", "tokens", "routed", "plans")
	for _, r := range rows {
		b := perfmodel.FormatB(r.Thresholds)
		plans := ""
		if r.Auto {
			b = "auto:" + b
			plans = strconv.Itoa(r.Plans)
		}
		fmt.Fprintf(out, "%-12s %-12s %4d %-10s %10.1f %8d %7.3f %s\n", r.System, r.Algorithm, r.Concurrency,
			b, r.TokensPerSecond, r.Tokens, r.RoutedFraction, plans)
	}
	return nil
}

// benchPoint measures f.system at concurrency n on fresh engines.
func benchPoint(cmd *cobra.Command, f benchFlags, run benchRun, n int) (benchRow, error) {
	setup := run.setup
	sys, err := setup.Build(cmd.Context(), f.system)
	if err != nil {
		return benchRow{}, err
	}
	o := run.opts
	o.Concurrency, o.Progress, o.Label = n, cmd.ErrOrStderr(), fmt.Sprintf("%s N=%d", f.system, n)
	res, err := bench.Run(cmd.Context(), sys, o)
	// Read the tuner before Close; its state survives Close anyway.
	var st *autotune.Status
	if r, ok := sys.(*deploy.Deployment); ok && r.Tuner() != nil {
		s := r.Tuner().Status()
		st = &s
	}
	cerr := sys.Close()
	if err != nil {
		return benchRow{}, err
	}
	if cerr != nil {
		return benchRow{}, fmt.Errorf("closing %s: %w", f.system, cerr)
	}
	row := benchRow{System: f.system, Algorithm: setup.Algorithm, Concurrency: n, TokensPerSecond: res.TokensPerSecond,
		Tokens: res.Tokens, Seconds: res.Seconds, RoutedFraction: res.RoutedFraction, Placement: run.placement()}
	if f.system == "tokenrouter" {
		if st != nil && st.Err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "auto thresholds: %v\n", st.Err)
		}
		row.thresholds(setup.Launch, st, len(setup.Models))
	}
	return row, nil
}

// thresholds records the thresholds the run used at its concurrency:
// the static tables', or the tuner's final ones (B = 1 before its first
// plan).
func (row *benchRow) thresholds(l sched.Launch, st *autotune.Status, models int) {
	switch {
	case !l.Auto:
		for _, t := range l.Tables {
			row.Thresholds = append(row.Thresholds, t[min(row.Concurrency, len(t)-1)])
		}
	case st != nil:
		row.Auto, row.Plans = true, st.Plans
		if st.Tables == nil {
			row.Thresholds = slices.Repeat([]int{1}, models)
			return
		}
		row.Tables = st.Tables
		for _, t := range st.Tables {
			row.Thresholds = append(row.Thresholds, t.At(row.Concurrency))
		}
		row.EstimatedP, row.EstimatedLatencyMS = st.Model.P, st.Planned.L
	}
}

// benchSetup describes the deployment every system of a run is built from.
func benchSetup(f benchFlags, preset sim.Preset, params map[string]string, launch sched.Launch, obs subserver.Observer) bench.Setup {
	ms := bench.SimModels(preset, f.agree)
	for i := range ms {
		ms[i].Engine = f.engine
	}
	return bench.Setup{Models: ms, Algorithm: f.algorithm, Params: params, Registry: builtin.Registry(),
		Launch: launch, Observer: obs, Speculate: f.spec, BusDelay: f.busDelay}
}

// parseParams turns name=value pairs into a map.
func parseParams(kv []string) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range kv {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--param %q: want name=value", s)
		}
		out[k] = v
	}
	return out, nil
}

func runValidate(cmd *cobra.Command, f benchFlags) error {
	fl := cmd.Flags()
	if !fl.Changed("duration") {
		f.duration = 10 * time.Second
	}
	if !fl.Changed("warmup") {
		f.warmup = time.Second
	}
	if !fl.Changed("max-wait") {
		f.maxWait = 0
	}
	if !fl.Changed("concurrency") {
		f.concurrency = []int{2, 3, 4, 5, 6}
	}
	switch {
	case f.system != "tokenrouter":
		return fmt.Errorf("--validate: --system %q: validation runs tokenrouter", f.system)
	case f.format != "table" && f.format != "json":
		return fmt.Errorf("--format %q: want table or json", f.format)
	}
	preset, params, launch, err := benchDeployment(f)
	if err != nil {
		return err
	}
	setup, steps, inter, placement, err := validateDeployment(cmd.Context(), f, preset, params, launch, cmd.ErrOrStderr())
	if err != nil {
		return fmt.Errorf("--validate: %w", err)
	}
	vc := bench.ValidateConfig{
		Setup: setup, Steps: steps, Interference: inter, Placement: placement, Concurrency: f.concurrency, Duration: f.duration, Warmup: f.warmup,
		Rounds: f.rounds, Tolerance: f.tolerance, Retries: f.retries, MaxLateness: f.maxLateness, MaxStepDev: f.maxStepDev,
		Resolve: f.resolve, MaxTokens: f.maxTokens, PromptLen: f.promptLen, Seed: f.seed, Progress: cmd.ErrOrStderr(),
	}
	if f.compare.recalibrate {
		if err := f.compare.checkRecalibrateEvery(); err != nil {
			return err
		}
		if len(f.models.models) == 0 {
			return errors.New("--validate --recalibrate: give the --model files the profile was calibrated on")
		}
		o := f.compare.cal.options(f.promptLen)
		vc.Recalibrate, vc.RecalibrateRounds = &o, f.compare.recalibrateEvery == "round"
	}
	rep, err := bench.Validate(cmd.Context(), vc)
	if err != nil {
		return fmt.Errorf("--validate: %w", err)
	}
	if err := plotValidate(cmd, f, rep); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if f.format == "json" {
		return json.NewEncoder(out).Encode(validateOutput{Profile: preset.Name, ValidateReport: rep})
	}
	printValidate(out, preset.Name, rep)
	return nil
}

// validateOutput is bench --validate's JSON: the report and the profile
// it ran.
type validateOutput struct {
	Profile string `json:"profile"`
	bench.ValidateReport
}

// printValidate prints the human table of a validation.
func printValidate(w io.Writer, profile string, rep bench.ValidateReport) {
	fmt.Fprintf(w, "profile %s (L = %s ms), %s %s, max-wait %gms, %.0fs per point in %d rounds, %s placement\n",
		profile, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(rep.LatencyMS)), ", "), "[]"),
		rep.Algorithm, paramString(rep.Params), rep.MaxWaitMS, rep.SecondsPerPoint, rep.Rounds, rep.Placement)
	printSteps(w, rep.Steps)
	fmt.Fprintf(w, "%3s %-5s %10s %10s %8s %7s %10s %8s %11s %10s %8s %6s %6s %7s %s\n", "N", "B", "measured", "predicted", "error", "routed",
		"at routed", "error", "steps/curve", "@speed", "error", "method", "slices", "retries", "best")
	for _, pt := range rep.Points {
		best := ""
		if pt.PredictedBest {
			best += " predicted"
		}
		if pt.MeasuredBest {
			best += " measured"
		}
		mark := ""
		if !pt.Within {
			mark = "!"
		}
		speedMark := ""
		if !pt.WithinAtStepSpeed {
			speedMark = "!"
		}
		fmt.Fprintf(w, "%3d %-5s %10.2f %10.2f %+7.2f%%%1s %6.3f %10.2f %+7.2f%% %11s %10.2f %+7.2f%%%1s %6s %6d %7d%s\n", pt.Concurrency, perfmodel.FormatB(pt.Thresholds),
			pt.TokensPerSecond, pt.Predicted, pt.ErrorPercent, mark, pt.RoutedFraction, pt.PredictedAtRouted, pt.ErrorAtRoutedPercent,
			stepRatios(pt.StepOverCurve), pt.PredictedAtStepSpeed, pt.ErrorAtStepSpeedPercent, speedMark, pt.Method, pt.Slices, pt.Retries, best)
	}
	fmt.Fprintln(w)
	for _, s := range rep.PerConcurrency {
		lead := "no other point"
		switch {
		case s.RunnerUpB1 > 0 && s.Pairs >= 2:
			lead = fmt.Sprintf("leads B1=%d by %.2f ± %.2f tok/s (95%%, %d pairs)", s.RunnerUpB1, s.Margin, s.MarginCI95, s.Pairs)
		case s.RunnerUpB1 > 0:
			lead = fmt.Sprintf("leads B1=%d by %.2f tok/s (%d pair: no interval)", s.RunnerUpB1, s.Margin, s.Pairs)
		}
		cal := ""
		if len(s.LatencyMS) > 0 {
			cal = fmt.Sprintf("; calibrated around it: L = %.2f ms", s.LatencyMS)
		}
		behind := ""
		if !s.Match {
			behind = fmt.Sprintf("; the predicted best is behind by %.2f ± %.2f tok/s, consistent=%v", s.PredictedLead, s.PredictedLeadCI95, s.Consistent)
		}
		fmt.Fprintf(w, "N=%d: predicted best B1=%d (ahead of the next by %.2f tok/s), measured best B1=%d, match=%v, resolved=%v (%s)%s, max |error| %.2f%%%s\n",
			s.Concurrency, s.PredictedBestB1, s.PredictedMargin, s.MeasuredBestB1, s.Match, s.Resolved, lead, behind, s.MaxErrorPercent, cal)
	}
	fmt.Fprintf(w, "all match: %v; all resolved: %v; all consistent: %v; all within %.0f%%: %v (at the engines' step speed: %v)\n", rep.AllMatch, rep.AllResolved,
		rep.AllConsistent, rep.TolerancePercent, rep.AllWithin, rep.AllWithinAtStepSpeed)
	fmt.Fprintln(w, "steps/curve: each model's steps over its curve for the same steps; @speed: the prediction with the curves scaled by it")
}
