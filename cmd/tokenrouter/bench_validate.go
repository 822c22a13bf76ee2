package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/lab"
)

// benchValidateLong is the bench validate command's help text.
const benchValidateLong = `bench validate checks the throughput model against the runtime: sim engine,
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

With the --model files a profile was calibrated on (bench calibrate), the
points run on the cpu engine placed as the profile was; --recalibrate
predicts each concurrency's points from calibrations of the models as placed
(the --calibrate-* grid) taken just before and during its rounds instead.

  tokenrouter bench validate --concurrency 2,3,4 --duration 20s --rounds 4
  tokenrouter bench validate --model slm=A.gguf --model llm=B.gguf --profile pair.partitioned.json --recalibrate`

// newBenchValidateCmd builds "bench validate": lab.RunValidate.
func newBenchValidateCmd() *cobra.Command {
	var d deployFlags
	var m benchModelFlags
	var rc recalibrateFlags
	l := loopFlags{concurrency: []int{2, 3, 4, 5, 6}, duration: 10 * time.Second, warmup: time.Second, maxTokens: 4096}
	var v lab.ValidateRun
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Compare measured and predicted throughput for every B1 (B0 = 1) at each concurrency",
		Long:  benchValidateLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := d.speculate.parse()
			if err != nil {
				return err
			}
			if v.Params, err = benchParams(d); err != nil {
				return err
			}
			v.Profile, v.Engine, v.Agree, v.Algorithm, v.Thresholds, v.MaxWait = d.profile, d.engine, d.agree, d.algorithm, d.thresholds, d.maxWait
			v.Speculate, v.BusDelay, v.Models, v.Placement, v.KVReserveMB = spec, d.busDelay, namedModels(m), m.placement, l.kvReserveMB
			v.Recalibrate, v.RecalibrateEvery, v.Calibrate = rc.on, rc.every, rc.grid.options(l.promptLen)
			c := &v.Config
			c.Concurrency, c.Duration, c.Warmup, c.MaxTokens, c.PromptLen, c.Seed = l.concurrency, l.duration, l.warmup, l.maxTokens, l.promptLen, l.seed
			v.Format, v.Out, v.Progress = l.format, cmd.OutOrStdout(), cmd.ErrOrStderr()
			return lab.RunValidate(cmd.Context(), v)
		},
	}
	fl := cmd.Flags()
	addDeployFlags(fl, &d, 0)
	addLoopFlags(fl, &l)
	fl.Lookup("duration").Usage = "measuring time per point, split into --rounds slices"
	fl.Lookup("warmup").Usage = "warm-up before each slice"
	addModelFileFlags(fl, &m)
	addPlacementFlag(fl, &m)
	fl.IntVar(&v.Config.Rounds, "rounds", 2, "interleaved slices per point (round r uses seed --seed + r)")
	fl.Float64Var(&v.Config.Tolerance, "tolerance", 0.02, "allowed relative gap between measured and predicted")
	fl.IntVar(&v.Config.Retries, "retries", 3, "re-measure a slice the machine starved up to this many times")
	fl.DurationVar(&v.Config.MaxLateness, "max-lateness", time.Millisecond, "a slice whose mean timer lateness exceeds this was starved")
	fl.Float64Var(&v.Config.MaxStepDev, "max-step-dev", 0.02, "a slice whose mean step time is off the profile by more than this was starved")
	fl.DurationVar(&v.Config.Resolve, "resolve", 0, "measuring time per N to spend telling the best B1 apart from its runner-up (0: none)")
	fl.StringVar(&v.Plot, "plot", "", "write validate.png into this folder")
	addRecalibrateFlags(fl, &rc)
	return cmd
}
