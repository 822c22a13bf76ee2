package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/internal/progress"
)

// benchLong is the bench command's help text.
const benchLong = `bench measures serving systems under a closed loop of concurrent requests,
and the throughput model against them. Each subcommand keeps --concurrency
requests in flight (a finished request is replaced at once), warms up, then
counts committed tokens over a measured window; on a terminal, a bar on stderr
shows each run's progress.

  tokenrouter bench run --profile paper-r2r --concurrency 4 --thresholds 1,3
  tokenrouter bench compare --model slm=A.gguf --model llm=B.gguf --systems all --concurrency 1,4,8
  tokenrouter bench calibrate --model slm=A.gguf --model llm=B.gguf --out pair.json
  tokenrouter bench validate --concurrency 2,3,4

Without a subcommand, bench prints this help.`

// benchRunLong is the bench run command's help text.
const benchRunLong = `bench run measures one serving system: it keeps --concurrency requests in
flight (a finished request is replaced at once), warms up, then counts
committed tokens over a measured window, for each concurrency in turn.

  tokenrouter bench run --engine sim --profile paper-r2r --algorithm r2r-random --p 0.35 \
    --concurrency 4 --thresholds 1,3 --max-wait 0 --system tokenrouter --duration 15s --format json

--thresholds auto (the default) starts every model at B = 1 and lets the runtime
estimate the routing probabilities and step latencies and push the optimal
tables B*(n) (DESIGN §6); a comma-separated list fixes static thresholds.

--system lockstep runs the same engines and algorithm the way R2R's official
serving does (all requests advance in global steps).

` + benchModelsLong + `

To change r2r-random's probability during a run (drift experiments):
  --param p-after=0.10 --param switch-at=20s
switches from --p to 0.10 20 s after the system starts (warm-up included).

` + benchProcessesLong

// benchModelsLong describes the model, placement and workload flags of
// bench run and bench compare.
const benchModelsLong = `Real models run on the cpu engine, small model first (GGUF files, or llama2.c
checkpoints with --tokenizer; the models must share one vocabulary), or come
from a preset of a configuration file (--config, --preset).

--placement says how the models share the cores: partitioned (each model on
threads of its own: an even share of the cores unless --threads NAME=N says;
--cpus NAME=LIST pins them), time-shared (every model on every core, one step
at a time; each sub-server still schedules its own launches) or auto (the
default: a quick measurement of each model's decode step both ways, three times
in turn, picks one, and the output says which and why).

Prompts are random token ids of --prompt-len in the models' vocabulary, or the
lines of --prompts FILE (JSON Lines with "prompt", or plain text) tokenised with
the models' tokenizer; --range-ratio r draws each request's lengths uniformly
from [L·(1−r), L·(1+r)]. Requests ignore the end-of-sequence token (random
weights would stop anywhere) unless --keep-eos.

Client w's k-th request carries the routing seed --seed ^ w<<32 ^ k, and
seeded draws depend only on the seed and the position (route.Request.Draw), so
runs with the same --seed and concurrency see the same routing draws (common
random numbers) whatever the goroutine schedule.`

// newBenchCmd builds "bench": a parent of the measuring subcommands that
// prints its help when called alone.
func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure serving systems under a closed loop of concurrent requests, and the throughput model against them",
		Long:  benchLong,
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newBenchRunCmd(), newBenchCompareCmd(), newBenchValidateCmd(), newBenchCalibrateCmd(),
		newBenchInterferenceCmd(), newBenchEngineCmd())
	return cmd
}

// deployFlags are the flags of the deployment measured: the simulated
// models' profile, the algorithm, its launch policy and the routed
// systems' options.
type deployFlags struct {
	engine, profile, algorithm, thresholds string
	p, agree                               float64
	params                                 []string
	maxWait, busDelay                      time.Duration
	speculate                              speculateFlags
}

// addSimFlags registers --engine, --profile and --agree.
func addSimFlags(fl *pflag.FlagSet, d *deployFlags) {
	fl.StringVar(&d.engine, "engine", "sim", "engine: sim, or cpu (with --model or --config)")
	fl.StringVar(&d.profile, "profile", "paper-r2r", "sim latency profile")
	fl.Float64Var(&d.agree, "agree", 0, "sim: probability that the large model's token at a routed position equals the small model's (model 0 samples model 1's token)")
}

// addDeployFlags registers the deployment's flags, max-wait defaulting to
// maxWait.
func addDeployFlags(fl *pflag.FlagSet, d *deployFlags, maxWait time.Duration) {
	addSimFlags(fl, d)
	fl.StringVar(&d.algorithm, "algorithm", "r2r-random", "routing algorithm")
	fl.Float64Var(&d.p, "p", 0.35, "routing probability (r2r-random)")
	fl.StringArrayVar(&d.params, "param", nil, "algorithm parameter name=value (repeatable)")
	fl.StringVar(&d.thresholds, "thresholds", "auto", "batching thresholds: auto, or B per model (1,3)")
	fl.DurationVar(&d.maxWait, "max-wait", maxWait, "launch anyway after this wait (0 disables the guard)")
	addSpeculateFlags(fl, &d.speculate)
	fl.DurationVar(&d.busDelay, "bus-delay", 0, "delay every event between sub-servers by this much, one way (a split deployment; 0: none)")
}

// loopFlags are the closed loop's workload, timing and output flags.
type loopFlags struct {
	concurrency                       []int
	duration, warmup                  time.Duration
	maxTokens, promptLen, kvReserveMB int
	seed                              uint64
	format                            string
}

// addLoopFlags registers the closed loop's flags with the defaults in l.
func addLoopFlags(fl *pflag.FlagSet, l *loopFlags) {
	fl.IntSliceVar(&l.concurrency, "concurrency", l.concurrency, "requests in flight (a list runs each)")
	fl.DurationVar(&l.duration, "duration", l.duration, "measured window")
	fl.DurationVar(&l.warmup, "warmup", l.warmup, "warm-up before the window")
	fl.IntVar(&l.maxTokens, "max-tokens", l.maxTokens, "output tokens per request")
	fl.IntVar(&l.promptLen, "prompt-len", 16, "prompt tokens per request")
	fl.Uint64Var(&l.seed, "seed", 1, "seed for prompts and routing decisions")
	fl.StringVar(&l.format, "format", "table", "output: table or json")
	addKVReserveFlag(fl, &l.kvReserveMB)
}

// addKVReserveFlag registers --kv-reserve-mb.
func addKVReserveFlag(fl *pflag.FlagSet, mb *int) {
	fl.IntVar(mb, "kv-reserve-mb", 1024, "cpu engines: KV memory (MB, at most twice the model files' size together) warmed before the first measurement; the engines opened for each measurement share it and reuse what those before them held (0: none; none either when only servers given by URL are measured)")
}

// benchParams returns the algorithm parameters, with --p as p (for
// r2r-random, the one algorithm that reads it) unless --param p=... is
// given.
func benchParams(d deployFlags) (map[string]string, error) {
	params, err := parseParams(d.params)
	if err != nil {
		return nil, err
	}
	if _, ok := params["p"]; !ok && d.algorithm == config.DefaultAlgorithm {
		params["p"] = strconv.FormatFloat(d.p, 'g', -1, 64)
	}
	return params, nil
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

// newBenchRunCmd builds "bench run": one system, bench.Measure.
func newBenchRunCmd() *cobra.Command {
	cmd, _ := benchRunCmd()
	return cmd
}

// benchRunFlags are bench run's flags.
type benchRunFlags struct {
	d         deployFlags
	m         benchModelFlags
	l         loopFlags
	system    string
	processes bool
}

// benchRunCmd builds "bench run" and returns it with the flags it parses
// into.
func benchRunCmd() (*cobra.Command, *benchRunFlags) {
	f := &benchRunFlags{l: loopFlags{concurrency: []int{4}, duration: 15 * time.Second, warmup: 2 * time.Second, maxTokens: 4096}}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Measure one system's committed tokens/s under a closed loop of concurrent requests",
		Long:  benchRunLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := f.spec(cmd)
			if err != nil {
				return err
			}
			bars := newBenchBars(cmd.ErrOrStderr(), progress.Options{})
			defer bars.end()
			s.Progress, s.Loop.Progress = bars, bars.tick
			return bench.Measure(withLoadBars(cmd.Context(), cmd.ErrOrStderr()), s, f.system)
		},
	}
	fl := cmd.Flags()
	addDeployFlags(fl, &f.d, 50*time.Millisecond)
	addLoopFlags(fl, &f.l)
	addModelFlags(fl, &f.m)
	addWorkloadFlags(fl, &f.m)
	fl.StringVar(&f.system, "system", "tokenrouter", "system: "+strings.Join(bench.Systems(), ", "))
	fl.BoolVar(&f.processes, "processes", false, "run each model's sub-server in a child process over an embedded NATS server, as serve --processes does (needs static --thresholds)")
	return cmd, f
}

// spec is the bench.Spec bench run's flags describe.
func (f *benchRunFlags) spec(cmd *cobra.Command) (bench.Spec, error) {
	s, err := benchSpec(cmd, f.d, f.m, f.l)
	if err != nil || !f.processes {
		return s, err
	}
	return s, applyProcesses(cmd, &s, f.system)
}

// benchSpec builds the bench.Spec of bench run and bench compare from
// their flags.
func benchSpec(cmd *cobra.Command, d deployFlags, m benchModelFlags, l loopFlags) (bench.Spec, error) {
	spec, err := d.speculate.parse()
	if err != nil {
		return bench.Spec{}, err
	}
	s, err := benchDescribe(cmd.Flags().Changed, d, m)
	if err != nil {
		return s, err
	}
	s.Speculate, s.BusDelay, s.KVReserveMB, s.PromptsFile = spec, d.busDelay, l.kvReserveMB, m.prompts
	s.HTTP = bench.HTTPOptions{Model: m.urlModel, APIKey: m.apiKey}
	s.Loop = bench.Options{ClientProcs: m.clientProcs, PromptLen: l.promptLen, MaxTokens: l.maxTokens, RangeRatio: m.rangeRatio,
		Vocab: m.vocab, KeepEOS: m.keepEOS, Warmup: l.warmup, Duration: l.duration, Seed: l.seed}
	s.Concurrency, s.Format, s.Out, s.Progress = l.concurrency, l.format, cmd.OutOrStdout(), cmd.ErrOrStderr()
	return s, nil
}
