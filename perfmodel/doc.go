// Package perfmodel is TokenRouter's throughput model for token-level
// routing: a discrete-time Markov chain observed at batch-completion events
// (DESIGN §6), the search for the launch thresholds B* that maximise
// throughput, and a seeded discrete-event simulator of the same transition
// rules for concurrencies where the exact chain is too large.
//
// A Model holds the step latency of every model, the routing matrix P
// (p_ij: probability that a request leaves model i for j after a step;
// p_ii: it stays) and the commit matrix C (c_ij: tokens committed on a move
// i→j). R2R and Ensemble build the two common patterns. A step latency is
// the paper's batch-independent L_i (Model.L) or, for real engines, a
// steptime.Curve L_i(b, e, c) of the batch size b, the tokens e extended
// beyond one per request and the context c (Model.Steps, DESIGN §6a): a
// launch of b requests on model i takes L_i(b, b·x_i, c̄), with x_i the
// mean extend per request there (Model.Extends: derived from P and C, 1/p −
// 1 on R2R's large model, or given) and c̄ the workload's mean context.
// Step times are rounded to whole time quanta δ (default 0.1 ms; AutoDelta
// picks a coarser one for batch-dependent curves). The constant curve
// reproduces L exactly.
//
// The chain's state holds, per model, the queue length k_i, the running
// batch size b_i and its remaining time r_i. At each event the running
// batches with the least remaining time finish; each of their requests moves
// by P (stayers rejoin their own queue and count toward B_i); the other
// running batches lose that time; then the placement's launch rule runs.
// Partitioned (the default): every idle model whose queue holds at least
// B_i requests launches with all of them, and steps overlap; a model's
// interference factor (Model.Interference, measured by bench calibrate)
// above 5% multiplies its step times. Time-shared: one step at a time, by
// TimeSharedRule; the state then also holds the queue of models waiting for
// the turn. The launch decision is sched.Decide, the same function the
// runtime calls. The chain starts with
// all N requests queued at model 0 and keeps the reachable states. Its
// stationary distribution π is computed by dense LU for small chains; larger
// chains are reduced to their recurrent class (found by a strongly connected
// component search; transient states get π = 0) and solved by restarted
// GMRES with an ILU(0) preconditioner on the balance equations with the
// most probable state's probability pinned (a nonsingular M-matrix
// system), which converges in a few dozen iterations also where
// Gauss–Seidel stalls, as on the nearly periodic chains of R2R with p near
// 1. Gauss–Seidel is the fallback. The residual
// ‖πP − π‖₁ of the returned π is verified explicitly and must be at most
// Options.Tolerance (default 1e-10); otherwise EvaluateExact returns the
// best π's throughput and residual with an error wrapping ErrNotConverged,
// and a Planner simulates instead. Then
//
//	throughput = Σ_s π(s)·E[tokens committed at s] / Σ_s π(s)·E[time to the next event at s].
//
// A threshold vector with Σ(B_i − 1) ≥ N can deadlock and is reported as
// infeasible, never evaluated. Chains with more than Options.MaxStates
// reachable states (default DefaultMaxStates) are evaluated by simulation
// instead, with a 95% batch-means confidence interval; every Result names
// the method that produced it.
//
// The runtime builds automatic threshold tables with a Planner:
//
//	pl := perfmodel.NewPlanner(perfmodel.Options{})
//	best, err := pl.Optimize(ctx, perfmodel.R2R(0.35, 6.0, 27.9), n, map[int]int{0: 1})
//	tables, err := pl.Table(ctx, m, 32, map[int]int{0: 1}) // tables[i][n] = B*_i(n)
//
// A Planner caches results by model, concurrency and thresholds and is safe
// for concurrent use. The package-level Optimize and Table use a fresh
// Planner with default options. Planner.EvaluatePolicies predicts any set of
// Policy values (sched.Policy tables and max-wait guards, and the lookahead
// rule only the model runs).
//
// Baselines: Lockstep (R2R's official serving, global steps) and Alone (one
// model serving every request: bench's slm-only and llm-only) are closed
// forms over the same step curves, extends and contexts; Planner.TokenRouter
// is the chain at static thresholds or at B*, with the runtime's max-wait
// guard when it can fire. std-serving (independent servers that re-extend
// a request's whole sequence on every return) has no formula here: its
// steps mix re-extends of whole sequences, whose rows hold no context
// before the step, with decodes, so neither the chain's per-model mean
// extend nor its mean context (Workload.Context) describes them.
//
// Beyond static thresholds: OptimalThroughput solves the semi-Markov
// decision process over every launch policy that decides at batch
// completions, an upper bound for any rule sched.Decide can express. For the
// paper's R2R pair the expected-wait rule (Policy.Lookahead on every
// model, LookaheadPolicies) reaches that optimum (within 0.01 tok/s for
// N = 2..6), and beats the static B* by 0.3% at N = 4 and 2.0% at N = 16.
// Most of the remaining gap to the no-contention bound
// (Model.NoContentionBound) is therefore contention, not the launch rule.
//
// Speculative continuation (DESIGN §6b): with Speculation (the agreement
// rate a, the depth D, a bus delay) a routed request keeps decoding on the
// small model while the large one verifies; SimulateSpeculative follows
// the rules per request (drafts, verify jobs that join, rollbacks, the
// depth bound, messages delayed by the bus) and EvaluateSpeculativeExact
// is the exact chain of the same rules with each request's draft region
// in the state, for small systems; the two agree within the simulation's
// interval. Planner.Speculative predicts a setting (D = 0 without a delay
// is today's prediction, exactly) and Planner.BestDepth picks the depth.
package perfmodel
