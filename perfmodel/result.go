package perfmodel

// Method names how a Result was produced.
type Method string

const (
	// MethodExact is the stationary distribution of the exact chain.
	MethodExact Method = "exact"
	// MethodSimulation is the seeded discrete-event simulation.
	MethodSimulation Method = "simulation"
	// MethodNone marks a result that was not evaluated (infeasible B).
	MethodNone Method = "none"
)

// Result is the predicted throughput of one threshold vector at one
// concurrency.
type Result struct {
	// N is the concurrency (requests in the closed system).
	N int
	// B is the threshold vector, one entry per model.
	B []int
	// Feasible is false when Σ(B_i − 1) ≥ N; such a vector is never
	// evaluated and TokensPerSecond is 0.
	Feasible bool
	// TokensPerSecond is the predicted throughput.
	TokensPerSecond float64
	// Method says which method produced TokensPerSecond.
	Method Method
	// CIHalfWidth is the half-width of the 95% confidence interval of a
	// simulation result (0 for exact results).
	CIHalfWidth float64
	// States is the number of reachable states of the exact chain.
	States int
	// Residual is ‖πP − π‖₁ of the exact stationary distribution.
	Residual float64
	// Sweeps is the number of iterations of the stationary solver: GMRES
	// iterations plus any fallback Gauss–Seidel sweeps (0 for a dense solve).
	Sweeps int
	// Solver names the stationary solver that produced the distribution
	// (SolverDense, SolverGMRES, SolverGaussSeidel or SolverTrivial).
	Solver string
	// Events is the number of simulated batch-completion events measured.
	Events int
}
