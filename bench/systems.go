package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
	"github.com/tokenrouter/tokenrouter/system"
)

// Systems lists the serving systems Setup.Build knows, in report order
// ("all"); see system.Kinds.
func Systems() []string { return system.Kinds() }

// SystemAbout says what each system is.
func SystemAbout(name string) string {
	if a := system.About(name); a != "" {
		return a
	}
	if _, u := splitURL(name); u != "" {
		return "the OpenAI-compatible server at " + u + " (streamed /v1/completions)"
	}
	return ""
}

// Setup describes the deployment every system is built from.
type Setup struct {
	// Models describe the models, small first; every system opens fresh
	// engines from them.
	Models []config.Model
	// Kinds opens the models (nil: loader.Builtin()).
	Kinds loader.Kinds
	// Algorithm and Params are the routing algorithm under test.
	Algorithm string
	// Params are its parameters.
	Params map[string]string
	// Registry resolves algorithms.
	Registry *route.Registry
	// Launch is "tokenrouter"'s launch policy (static tables or automatic
	// thresholds); the other routed systems launch at B = 1
	// (tokenrouter-auto: automatic thresholds) with its max-wait guard.
	Launch sched.Launch
	// LargeShare is the share of large-model tokens "query-level" targets
	// (default: Params["p"], else 0.35).
	LargeShare float64
	// Observer, if set, watches the steps of the systems run in this
	// process (the routed systems' sub-servers and lockstep's engines).
	Observer subserver.Observer
	// HTTP configures the systems named by a server's URL (IsURL).
	HTTP HTTPOptions
	// Speculate configures the routed systems' speculative continuation
	// at run time (deploy.Config.Speculate); Speculation below is what
	// the predictions assume.
	Speculate subserver.Speculation
	// TimeShared runs the routed systems' steps one at a time
	// (deploy.Config.TimeShared); Models then give every model all cores
	// (loader.Kinds.Place sets both). Lockstep steps one model at a time
	// anyway.
	TimeShared bool
	// BusDelay, when positive, delays every event between the routed
	// systems' sub-servers by this much (bus.Delayed), as in a split
	// deployment; predictions add it to each hand-off.
	BusDelay time.Duration
	// Speculation is the speculative continuation the predictions of
	// TokenRouter's systems assume (agreement and depth; the zero value:
	// none). Its BusDelay is taken from Setup.BusDelay.
	Speculation perfmodel.Speculation
	// Deploy, if set, starts "tokenrouter", the one system Build then
	// builds, in place of system.Build: a deployment whose sub-servers run
	// elsewhere (bench run --processes: child processes over NATS).
	Deploy Deployer
}

// Deployer starts the deployment s describes outside system.Build (its
// sub-servers in other processes), returning it as a System.
type Deployer func(ctx context.Context, s system.Spec) (System, error)

// SimModels describes a latency preset's models on the simulated engine,
// small first: model i has seed i+1, and model 0 samples model 1's token
// with probability agree (as a real small model tracks its large one;
// speculative decoding accepts such tokens).
func SimModels(p sim.Preset, agree float64) []config.Model {
	ms := make([]config.Model, len(p.Models))
	for i, name := range p.Models {
		pr := p.Profiles[i]
		ms[i] = config.Model{Name: name, Engine: loader.KindSim, Seed: uint64(i + 1),
			Latency: &config.Latency{Curve: &pr.Curve, Interference: pr.Interference}}
	}
	if len(ms) > 1 {
		ms[0].Agree, ms[0].AgreeSeed = agree, 2
	}
	return ms
}

// Build starts the named system on fresh engines (system.Build), or
// connects to the server a URL names.
func (s Setup) Build(ctx context.Context, name string) (System, error) {
	if _, u := splitURL(name); u != "" && s.Deploy == nil {
		return NewHTTPSystem(ctx, u, s.HTTP)
	}
	spec := system.Spec{Models: s.Models, Kinds: s.Kinds, Algorithm: s.Algorithm, Params: s.Params,
		Registry: s.Registry, Launch: s.Launch, Observer: s.Observer, Speculate: s.Speculate, TimeShared: s.TimeShared,
		BusDelay: s.BusDelay}
	if s.Deploy == nil {
		return system.Build(ctx, spec, name, s.LargeShare)
	}
	switch {
	case name != "tokenrouter":
		return nil, fmt.Errorf("bench: system %q runs in bench's process only; sub-servers elsewhere run tokenrouter (its thresholds as given)", name)
	case s.TimeShared:
		return nil, errors.New("bench: time-shared placement takes turns in one process; sub-servers elsewhere step on their own (placement partitioned)")
	case s.BusDelay > 0:
		return nil, errors.New("bench: the bus delay applies to the in-process bus, not to sub-servers elsewhere")
	}
	return s.Deploy(ctx, spec)
}

// Row is one system at one concurrency, measured over interleaved rounds.
type Row struct {
	// System and Concurrency name the configuration.
	System string
	// Concurrency is the number of requests in flight.
	Concurrency int
	// Result accumulates every round.
	Result
	// PerRound holds each round's tokens per second, in round order.
	PerRound []float64
	// Steps tallies the steps of every round, warm-ups included (a system
	// run in this process; empty for a server given by URL).
	Steps *StepTally
	// ClientCPU is, for a server given by URL, the CPU time this process
	// (bench's clients: nothing else runs in it during those slices) used
	// over ClientWall, the slices' time, warm-ups included; both 0 for a
	// system run in this process, or where the process's CPU time is not
	// known.
	ClientCPU, ClientWall time.Duration
}

// Compare measures several systems at several concurrencies. Each
// (system, N) window is split into rounds run round-robin across the
// systems, so machine drift hits all of them alike; round r starts with
// system r mod len(systems) and goes round from there, so that over a
// multiple of len(systems) rounds every system runs as often in every
// place of the order (one that always ran first would carry whatever
// going first does to a run). Round r runs with seed o.Seed + r for every
// system: the systems of one round see the same routing draws (common
// random numbers), so their per-round results pair up, while different
// rounds are independent samples. progress, if set, is called after each
// slice.
func Compare(ctx context.Context, setup Setup, systems []string, concurrency []int, o Options, rounds int,
	progress func(done, total int, r Row)) ([]Row, error) {
	if rounds < 1 {
		rounds = 1
	}
	slice := o.Duration / time.Duration(rounds)
	rows := make([]Row, 0, len(systems)*len(concurrency))
	total, done := len(systems)*len(concurrency)*rounds, 0
	for _, n := range concurrency {
		base := len(rows)
		for _, name := range systems {
			rows = append(rows, Row{System: name, Concurrency: n, Steps: &StepTally{}})
		}
		for round := range rounds {
			for j := range systems {
				i := (round + j) % len(systems)
				name := systems[i]
				st := setup
				st.Observer = Observers{setup.Observer, rows[base+i].Steps}
				sys, err := st.Build(ctx, name)
				if err != nil {
					return nil, err
				}
				oo := o
				oo.Concurrency, oo.Duration, oo.Label = n, slice, fmt.Sprintf("%s N=%d", name, n)
				oo.Seed = o.Seed + uint64(round)
				var res Result
				if IsURL(name) {
					res, err = runServer(ctx, sys, oo, &rows[base+i])
				} else {
					res, err = Run(ctx, sys, oo)
				}
				cerr := sys.Close()
				if err != nil {
					return nil, fmt.Errorf("bench: %s N=%d: %w", name, n, err)
				}
				if cerr != nil {
					return nil, fmt.Errorf("bench: closing %s: %w", name, cerr)
				}
				rows[base+i].Add(res)
				rows[base+i].PerRound = append(rows[base+i].PerRound, res.TokensPerSecond)
				done++
				if progress != nil {
					progress(done, total, rows[base+i])
				}
			}
			if o.AfterRound != nil {
				if err := o.AfterRound(ctx, n, round); err != nil {
					return nil, err
				}
			}
		}
	}
	return rows, nil
}

// runServer runs one slice against a server given by URL: on
// o.ClientProcs processors if set, adding the process's CPU time and the
// slice's time to row's ClientCPU and ClientWall where the system gives
// the former.
func runServer(ctx context.Context, sys System, o Options, row *Row) (Result, error) {
	if o.ClientProcs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.ClientProcs))
	}
	cpu0, timed := processCPU()
	t0 := time.Now()
	res, err := Run(ctx, sys, o)
	if cpu1, ok := processCPU(); timed && ok {
		row.ClientCPU += cpu1 - cpu0
		row.ClientWall += time.Since(t0)
	}
	return res, err
}

// Summary is one Row as reported: throughput, latency percentiles and the
// paired difference from the first system at the same concurrency.
type Summary struct {
	// System and Concurrency name the configuration.
	System      string `json:"system"`
	Concurrency int    `json:"concurrency"`
	// TokensPerSecond is Tokens committed over Seconds measured.
	TokensPerSecond float64 `json:"tokens_per_second"`
	Tokens          int     `json:"tokens"`
	Seconds         float64 `json:"seconds"`
	// LargeShare is the share of tokens from models other than model 0
	// (a server's own account over its finished requests when
	// LargeShareFromServer; unknown when LargeShareUnknown).
	LargeShare           float64 `json:"large_model_share"`
	LargeShareFromServer bool    `json:"large_model_share_from_server,omitempty"`
	LargeShareUnknown    bool    `json:"large_model_share_unknown,omitempty"`
	// TTFT and TPOT percentiles, in milliseconds.
	TTFTp50MS float64 `json:"ttft_p50_ms"`
	TTFTp99MS float64 `json:"ttft_p99_ms"`
	TPOTp50MS float64 `json:"tpot_p50_ms"`
	TPOTp99MS float64 `json:"tpot_p99_ms"`
	// Requests counts requests completed inside the windows.
	Requests int `json:"requests_completed"`
	// VsFirst is the mean per-round difference from the first system at
	// the same concurrency (rounds share seeds, so they pair up),
	// VsFirstCI95 the half-width of its 95% confidence interval (0 with
	// fewer than two rounds).
	VsFirst     float64 `json:"vs_first_tokens_per_second"`
	VsFirstCI95 float64 `json:"vs_first_ci95"`
	// Placement is how the system's models shared the cores ("" for a
	// server given by URL, or when not recorded).
	Placement string `json:"placement,omitempty"`
	// Predicted is the throughput model's prediction (lab.AddPredictions;
	// 0: none), MeasuredOverPredicted TokensPerSecond over it. PredictedB
	// holds the thresholds it assumed, PredictedMethod how it was computed
	// (lab.Prediction.Method), PredictedCI95 a simulated prediction's 95%
	// half-width.
	Predicted             float64 `json:"predicted_tokens_per_second,omitempty"`
	MeasuredOverPredicted float64 `json:"measured_over_predicted,omitempty"`
	PredictedB            []int   `json:"predicted_thresholds,omitempty"`
	PredictedMethod       string  `json:"predicted_method,omitempty"`
	PredictedCI95         float64 `json:"predicted_ci95,omitempty"`
	// StepOverCurve holds, per model, the measured time of the run's steps
	// over what the prediction's step curves give for the same steps (1:
	// the engines stepped as fast as when calibrated; 0: the model did not
	// step). PredictedAtStepSpeed is the prediction with every curve scaled
	// by that ratio, MeasuredOverAtStepSpeed TokensPerSecond over it: the
	// throughput model's own error, with the machine's drift since the
	// calibration taken out.
	StepOverCurve           []float64 `json:"step_over_curve,omitempty"`
	PredictedAtStepSpeed    float64   `json:"predicted_at_step_speed,omitempty"`
	MeasuredOverAtStepSpeed float64   `json:"measured_over_predicted_at_step_speed,omitempty"`
	// ClientCores is, for a server given by URL, the cores bench's own
	// clients kept busy while it was measured (Row.ClientCPU over
	// Row.ClientWall): CPU the server did not have when both share a
	// machine (0: a system run in this process, or not known).
	ClientCores float64 `json:"client_cores,omitempty"`
}

// Summarize reports Compare's rows; systems is the number of systems per
// concurrency (the rows of one concurrency are consecutive, the first
// system first).
func Summarize(rows []Row, systems int) []Summary {
	out := make([]Summary, len(rows))
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	byRound := func(v []float64) map[int]float64 {
		m := make(map[int]float64, len(v))
		for r, x := range v {
			m[r] = x
		}
		return m
	}
	for i, r := range rows {
		out[i] = Summary{System: r.System, Concurrency: r.Concurrency, TokensPerSecond: r.TokensPerSecond, Tokens: r.Tokens,
			Seconds: r.Seconds, LargeShare: r.RoutedFraction, LargeShareFromServer: r.ServerShare, LargeShareUnknown: r.ShareUnknown, Requests: r.Requests,
			TTFTp50MS: ms(r.TTFT.Quantile(0.5)), TTFTp99MS: ms(r.TTFT.Quantile(0.99)),
			TPOTp50MS: ms(r.TPOT.Quantile(0.5)), TPOTp99MS: ms(r.TPOT.Quantile(0.99))}
		if r.ClientWall > 0 {
			out[i].ClientCores = r.ClientCPU.Seconds() / r.ClientWall.Seconds()
		}
		first := rows[i-i%systems]
		out[i].VsFirst, out[i].VsFirstCI95, _ = PairedLead(byRound(r.PerRound), byRound(first.PerRound))
	}
	return out
}

// Names returns the model names in order.
func (s Setup) Names() []string {
	out := make([]string, len(s.Models))
	for i, m := range s.Models {
		out[i] = m.Name
	}
	return out
}
