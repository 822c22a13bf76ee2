package main

import (
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/internal/progress"
	"github.com/tokenrouter/tokenrouter/lab"
)

// benchCompareLong is the bench compare command's help text.
const benchCompareLong = `bench compare measures several serving systems side by side, interleaved: each
(system, N) window is split into --rounds slices run round-robin across the
systems, so machine drift hits all of them alike, and every round's systems see
the same routing draws (their per-round results pair up).

  tokenrouter bench compare --model slm=smol135.gguf --model llm=smol360.gguf \
    --systems tokenrouter-auto,lockstep,std-serving,slm-only,llm-only --concurrency 1,4,8

--predict FILE adds the throughput model's prediction beside each row, with the
ratio measured/predicted (table, --csv and JSON), from a profile that
bench calibrate wrote for the same models, placement and threads (a profile of
another placement or thread count is refused):

  tokenrouter bench calibrate --model slm=A.gguf --model llm=B.gguf --out pair.json
  tokenrouter bench compare --model slm=A.gguf --model llm=B.gguf --placement partitioned \
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
error.

--url [LABEL=]URL (repeatable, or a URL in --systems) drives any OpenAI-compatible
server with the same clients, side by side with the systems run here: streamed
/v1/completions with max_tokens and ignore_eos, the prompt as text (--prompts)
or token ids; each streamed chunk with text is a token, reconciled with the
final usage. For the same prompts, describe the server's models here too
(--model, --config) or give --vocab.

  tokenrouter serve --model slm=smol135.gguf --model llm=smol360.gguf --algorithm r2r-random --placement time-shared --port 30001 &
  tokenrouter bench compare --model slm=smol135.gguf --model llm=smol360.gguf --placement time-shared \
    --systems tokenrouter --url served=http://127.0.0.1:30001 --concurrency 8 --rounds 4

` + benchModelsLong

// recalibrateFlags are the flags of predictions from calibrations taken
// during the run (bench compare and bench validate).
type recalibrateFlags struct {
	on    bool
	every string
	grid  calibrateGridFlags
}

// addRecalibrateFlags registers --recalibrate, --recalibrate-every and the
// --calibrate-* grid.
func addRecalibrateFlags(fl *pflag.FlagSet, r *recalibrateFlags) {
	fl.BoolVar(&r.on, "recalibrate", false, "predict from step curves calibrated (the --calibrate-* grid) on the run's models as placed, before the first concurrency and after each, each concurrency on the mean of the calibrations before and after its rounds, so that the machine's drift between a calibration and the run stays out of the prediction")
	fl.StringVar(&r.every, "recalibrate-every", "concurrency", "with --recalibrate: calibrate after every concurrency, or after every round (round), each concurrency priced on the pointwise median of the calibrations taken before and during its rounds: more calibrations, spread over the minutes its slices ran, and one caught in a slow stretch moves nothing")
	addCalibrateGridFlags(fl, &r.grid, "with --recalibrate: ")
}

// newBenchCompareCmd builds "bench compare": systems side by side,
// lab.Compare.
func newBenchCompareCmd() *cobra.Command {
	var d deployFlags
	var m benchModelFlags
	var rc recalibrateFlags
	l := loopFlags{concurrency: []int{4}, duration: 15 * time.Second, warmup: 2 * time.Second, maxTokens: 256}
	var c lab.CompareRun
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Measure serving systems (and servers given by URL) side by side, interleaved, with predictions on request",
		Long:  benchCompareLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := benchSpec(cmd, d, m, l)
			if err != nil {
				return err
			}
			bars := newBenchBars(cmd.ErrOrStderr(), progress.Options{})
			defer bars.end()
			s.Progress, s.Loop.Progress, c.Progress = bars, bars.tick, bars.slice
			c.Spec, c.URLs, c.Recalibrate, c.RecalibrateEvery, c.Calibrate = s, m.urls, rc.on, rc.every, rc.grid.options(l.promptLen)
			return lab.Compare(withLoadBars(cmd.Context(), cmd.ErrOrStderr()), c)
		},
	}
	fl := cmd.Flags()
	addDeployFlags(fl, &d, 50*time.Millisecond)
	addLoopFlags(fl, &l)
	addModelFlags(fl, &m)
	addWorkloadFlags(fl, &m)
	addURLFlags(fl, &m)
	fl.StringVar(&c.Systems, "systems", "", "the systems, interleaved: a comma list of "+
		strings.Join(bench.Systems(), ", ")+", all (the list before), tokenrouter-auto (automatic thresholds whatever --thresholds says), or a server's [LABEL=]URL")
	fl.IntVar(&c.Rounds, "rounds", 2, "interleaved slices per point (round r uses seed --seed + r and starts at system r mod their number, so over a multiple of that each system runs first as often)")
	fl.StringVar(&c.CSV, "csv", "", "also write the rows to this CSV file")
	fl.StringVar(&c.Plot, "plot", "", "write throughput.png into this folder")
	fl.StringVar(&c.Predict, "predict", "", "add the throughput model's prediction per row from this calibrated profile (bench calibrate's FILE.PLACEMENT.json; it must match the run's placement and threads)")
	addRecalibrateFlags(fl, &rc)
	return cmd
}
