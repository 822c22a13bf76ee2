package perfmodel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"
)

// DefaultTolerance is the residual ‖πP − π‖₁ the stationary solver must
// reach.
const DefaultTolerance = 1e-10

// denseLimit is the largest chain solved by dense LU instead of iteration.
const denseLimit = 600

// Krylov solver parameters.
const (
	// gmresRestart is the Krylov subspace dimension of restarted GMRES.
	gmresRestart = 40
	// gmresMaxCycles bounds the restart cycles of one GMRES solve.
	gmresMaxCycles = 400
	// gmresStall is the number of consecutive cycles without a halving of
	// the best residual after which a GMRES solve gives up.
	gmresStall = 8
	// warmSweeps is the number of Gauss–Seidel sweeps that seed the Krylov
	// solve (they pick the pivot state and the starting vector).
	warmSweeps = 8
	// gsWork bounds the fallback Gauss–Seidel iteration: sweeps × nonzeros.
	gsWork = 4e9
	// gsMaxSweeps bounds the fallback Gauss–Seidel sweeps.
	gsMaxSweeps = 200000
	// gsStall is the number of sweeps without a halving of the best
	// residual after which the fallback Gauss–Seidel gives up.
	gsStall = 2000
)

// Stationary solver names reported in Result.Solver.
const (
	// SolverDense is dense LU on the balance equations with one equation
	// replaced by the normalisation Σπ = 1.
	SolverDense = "dense-lu"
	// SolverGMRES is restarted GMRES with an ILU(0) preconditioner on the
	// balance equations of the recurrent class with one state's probability
	// pinned.
	SolverGMRES = "gmres-ilu0"
	// SolverGaussSeidel is symmetric Gauss–Seidel iteration, the fallback.
	SolverGaussSeidel = "gauss-seidel"
	// SolverTrivial is a recurrent class of one absorbing state.
	SolverTrivial = "trivial"
)

// ErrNotConverged is returned when the stationary solver does not reach its
// tolerance.
var ErrNotConverged = errors.New("perfmodel: stationary solver did not converge")

// csr is a sparse row-major matrix of transition probabilities.
type csr struct {
	n      int
	rowPtr []int32
	col    []int32
	val    []float64
}

// transpose returns the column-major view (the CSR of the transpose). Its
// rows are sorted by column.
func (a *csr) transpose() *csr {
	t := &csr{n: a.n, rowPtr: make([]int32, a.n+1), col: make([]int32, len(a.col)), val: make([]float64, len(a.val))}
	for _, c := range a.col {
		t.rowPtr[c+1]++
	}
	for i := range a.n {
		t.rowPtr[i+1] += t.rowPtr[i]
	}
	next := append([]int32(nil), t.rowPtr[:a.n]...)
	for i := range a.n {
		for e := a.rowPtr[i]; e < a.rowPtr[i+1]; e++ {
			c := a.col[e]
			t.col[next[c]] = int32(i)
			t.val[next[c]] = a.val[e]
			next[c]++
		}
	}
	return t
}

// mulVec sets y = A·x.
func (a *csr) mulVec(y, x []float64) {
	for i := range a.n {
		s := 0.0
		for e := a.rowPtr[i]; e < a.rowPtr[i+1]; e++ {
			s += a.val[e] * x[a.col[e]]
		}
		y[i] = s
	}
}

// residual returns ‖πP − π‖₁ given the transpose pt of P.
func residual(pt *csr, pi []float64) float64 {
	r := 0.0
	for j := range pt.n {
		s := 0.0
		for e := pt.rowPtr[j]; e < pt.rowPtr[j+1]; e++ {
			s += pi[pt.col[e]] * pt.val[e]
		}
		r += math.Abs(s - pi[j])
	}
	return r
}

// normalise scales v to sum to 1 and clamps tiny negative entries to 0.
func normalise(v []float64) error {
	s := 0.0
	for i, x := range v {
		if x < 0 || math.IsNaN(x) {
			v[i] = 0
			x = 0
		}
		s += x
	}
	if !(s > 0) || math.IsInf(s, 0) {
		return fmt.Errorf("%w: distribution sums to %v", ErrNotConverged, s)
	}
	for i := range v {
		v[i] /= s
	}
	return nil
}

// solution is a stationary distribution with how it was obtained.
type solution struct {
	pi       []float64
	residual float64 // ‖πP − π‖₁, computed from π itself
	iters    int     // GMRES iterations or Gauss–Seidel sweeps; 0 for LU
	solver   string
}

// better reports whether s has a smaller residual than o.
func (s solution) better(o solution) bool {
	return s.pi != nil && (o.pi == nil || s.residual < o.residual)
}

// stationary returns the stationary distribution of the row-stochastic
// matrix p (started from state 0) with its residual ‖πP − π‖₁, verified on
// the returned π. Small chains are solved by dense LU. Larger ones are
// reduced to their recurrent class (transient states get probability 0)
// and solved by restarted GMRES preconditioned with ILU(0), with
// Gauss–Seidel as the fallback. When no method reaches tol, the best π found
// is returned together with an error wrapping ErrNotConverged that states
// its residual; the caller decides whether to use it.
func stationary(ctx context.Context, p *csr, tol float64) (solution, error) {
	if err := ctx.Err(); err != nil {
		return solution{}, fmt.Errorf("perfmodel: stationary solve: %w", err)
	}
	pt := p.transpose()
	var best solution
	if p.n <= denseLimit {
		pi, err := stationaryDense(p)
		if err == nil {
			best = solution{pi: pi, residual: residual(pt, pi), solver: SolverDense}
			if best.residual <= tol {
				return best, nil
			}
		}
	}
	return stationaryIterative(ctx, p, pt, tol, best)
}

// stationaryIterative is the sparse part of stationary: p and its transpose
// pt, and best, a candidate solution (pi nil if none) used as the start.
func stationaryIterative(ctx context.Context, p, pt *csr, tol float64, best solution) (solution, error) {
	n := p.n
	class, err := recurrentClass(p)
	p = nil // not needed past this point: let the collector have it
	if err != nil {
		return best, err
	}
	if len(class) == 1 {
		pi := make([]float64, n)
		pi[class[0]] = 1
		s := solution{pi: pi, residual: residual(pt, pi), solver: SolverTrivial}
		if s.residual <= tol {
			return s, nil
		}
		best = s
	}
	// Restrict Pᵀ to the recurrent class, which is closed: π vanishes
	// elsewhere and the class's balance equations involve only its states.
	sub := pt
	if len(class) < n {
		sub = restrict(pt, class)
	}
	var start []float64
	if best.pi != nil {
		start = gather(best.pi, class)
	}
	ks, kerr := krylovStationary(ctx, sub, tol, start)
	if ks.pi != nil {
		ks.pi = scatter(ks.pi, class, n)
		ks.residual = residual(pt, ks.pi)
		if ks.better(best) {
			best = ks
		}
		if best.residual <= tol {
			return best, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return best, fmt.Errorf("perfmodel: stationary solve: %w", err)
	}
	// Fallback: Gauss–Seidel from the best vector so far.
	if best.pi != nil {
		start = gather(best.pi, class)
	}
	gs, gerr := gaussSeidel(ctx, sub, tol, start)
	if gs.pi != nil {
		gs.pi = scatter(gs.pi, class, n)
		gs.residual = residual(pt, gs.pi)
		gs.iters += ks.iters
		if gs.better(best) {
			best = gs
		}
		if best.residual <= tol {
			return best, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return best, fmt.Errorf("perfmodel: stationary solve: %w", err)
	}
	detail := ""
	if kerr != nil {
		detail += "; gmres: " + kerr.Error()
	}
	if gerr != nil {
		detail += "; gauss-seidel: " + gerr.Error()
	}
	return best, fmt.Errorf("%w: best residual %.3g > %.3g (%s, %d states)%s", ErrNotConverged, best.residual, tol, best.solver, n, detail)
}

// stationaryDense solves (Pᵀ − I)π = 0 with Σπ = 1 by LU.
func stationaryDense(p *csr) ([]float64, error) {
	n := p.n
	a := mat.NewDense(n, n, nil)
	for i := range n {
		a.Set(i, i, -1)
	}
	for i := range n {
		for e := p.rowPtr[i]; e < p.rowPtr[i+1]; e++ {
			j := int(p.col[e])
			a.Set(j, i, a.At(j, i)+p.val[e])
		}
	}
	for i := range n {
		a.Set(n-1, i, 1)
	}
	b := mat.NewVecDense(n, nil)
	b.SetVec(n-1, 1)
	var x mat.VecDense
	if err := x.SolveVec(a, b); err != nil {
		var cond mat.Condition
		if !errors.As(err, &cond) {
			return nil, fmt.Errorf("perfmodel: dense stationary solve: %w", err)
		}
	}
	pi := make([]float64, n)
	for i := range n {
		pi[i] = x.AtVec(i)
	}
	if err := normalise(pi); err != nil {
		return nil, err
	}
	return pi, nil
}

// recurrentClass returns the states of the chain's closed communicating
// class, sorted. Every other state is transient and has stationary
// probability 0. A chain with more than one closed class has no unique
// stationary distribution and is reported as an error.
func recurrentClass(p *csr) ([]int32, error) {
	comp, ncomp := components(p)
	c, err := closedComponent(p, comp, ncomp)
	if err != nil {
		return nil, err
	}
	var class []int32
	for v := range int32(p.n) {
		if comp[v] == c {
			class = append(class, v)
		}
	}
	return class, nil
}

// closedComponent returns the only component (of ncomp, per state in comp)
// that no positive transition of p leaves; several such components are an
// error.
func closedComponent(p *csr, comp []int32, ncomp int32) (int32, error) {
	closed := make([]bool, ncomp)
	for i := range closed {
		closed[i] = true
	}
	for v := range p.n {
		for e := p.rowPtr[v]; e < p.rowPtr[v+1]; e++ {
			if p.val[e] > 0 && comp[p.col[e]] != comp[v] {
				closed[comp[v]] = false
			}
		}
	}
	c := int32(-1)
	for k, ok := range closed {
		if ok {
			if c >= 0 {
				return 0, fmt.Errorf("%w: the chain has several closed classes (no unique stationary distribution)", ErrNotConverged)
			}
			c = int32(k)
		}
	}
	return c, nil
}

// tarjanUnseen marks a state not yet visited by the component search.
const tarjanUnseen = -1

// tarjanFrame is one pending state of the iterative depth-first search: the
// state and its next outgoing edge to look at.
type tarjanFrame struct{ v, e int32 }

// tarjan is the state of an iterative Tarjan search for the strongly
// connected components of the positive transitions of p.
type tarjan struct {
	p       *csr
	index   []int32 // discovery order, or tarjanUnseen
	low     []int32
	comp    []int32 // component of each state
	onStack []bool
	stack   []int32
	calls   []tarjanFrame
	next    int32 // next discovery index
	ncomp   int32
}

// components returns the strongly connected component of each state of p
// (numbered sinks first) and the number of components.
func components(p *csr) ([]int32, int32) {
	n := p.n
	t := &tarjan{
		p: p, index: make([]int32, n), low: make([]int32, n),
		comp: make([]int32, n), onStack: make([]bool, n),
	}
	for i := range t.index {
		t.index[i], t.comp[i] = tarjanUnseen, tarjanUnseen
	}
	for root := range int32(n) {
		if t.index[root] == tarjanUnseen {
			t.search(root)
		}
	}
	return t.comp, t.ncomp
}

// discover numbers state v and pushes it on the component and call stacks.
func (t *tarjan) discover(v int32) {
	t.index[v], t.low[v] = t.next, t.next
	t.next++
	t.stack = append(t.stack, v)
	t.onStack[v] = true
	t.calls = append(t.calls, tarjanFrame{v, t.p.rowPtr[v]})
}

// search runs the depth-first search from root, assigning components to
// every state reached.
func (t *tarjan) search(root int32) {
	p := t.p
	t.discover(root)
	for len(t.calls) > 0 {
		f := &t.calls[len(t.calls)-1]
		v := f.v
		if f.e < p.rowPtr[v+1] {
			w := p.col[f.e]
			pv := p.val[f.e]
			f.e++
			if pv <= 0 {
				continue
			}
			if t.index[w] == tarjanUnseen {
				t.discover(w)
			} else if t.onStack[w] {
				t.low[v] = min(t.low[v], t.index[w])
			}
			continue
		}
		t.calls = t.calls[:len(t.calls)-1]
		if len(t.calls) > 0 {
			u := t.calls[len(t.calls)-1].v
			t.low[u] = min(t.low[u], t.low[v])
		}
		if t.low[v] == t.index[v] {
			t.popComponent(v)
		}
	}
}

// popComponent pops the component rooted at v off the stack.
func (t *tarjan) popComponent(v int32) {
	for {
		w := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		t.onStack[w] = false
		t.comp[w] = t.ncomp
		if w == v {
			break
		}
	}
	t.ncomp++
}

// restrict returns the principal submatrix of a on the sorted index set
// keep, renumbered 0..len(keep)−1 (rows stay sorted by column).
func restrict(a *csr, keep []int32) *csr {
	pos := make([]int32, a.n)
	for i := range pos {
		pos[i] = -1
	}
	for k, v := range keep {
		pos[v] = int32(k)
	}
	s := &csr{n: len(keep), rowPtr: make([]int32, 1, len(keep)+1)}
	for _, v := range keep {
		for e := a.rowPtr[v]; e < a.rowPtr[v+1]; e++ {
			if c := pos[a.col[e]]; c >= 0 {
				s.col = append(s.col, c)
				s.val = append(s.val, a.val[e])
			}
		}
		s.rowPtr = append(s.rowPtr, int32(len(s.col)))
	}
	return s
}

// gather returns x restricted to idx, renormalised (nil if it vanishes).
func gather(x []float64, idx []int32) []float64 {
	y := make([]float64, len(idx))
	for k, v := range idx {
		y[k] = x[v]
	}
	if normalise(y) != nil {
		return nil
	}
	return y
}

// scatter embeds y (indexed like idx) in a zero vector of length n.
func scatter(y []float64, idx []int32, n int) []float64 {
	if len(idx) == n {
		return y
	}
	x := make([]float64, n)
	for k, v := range idx {
		x[v] = y[k]
	}
	return x
}

// krylovStationary solves πP = π, Σπ = 1 for an irreducible chain given
// the transpose pt of P: the balance equation of a pivot state j is replaced
// by π_j = 1 (a nonsingular M-matrix system), solved by restarted GMRES
// with an ILU(0) right preconditioner, then normalised. A few Gauss–Seidel
// sweeps (or start, if given) choose the pivot (the most probable state,
// which keeps the system well scaled) and the initial vector; when those
// sweeps already reach tol, their result is returned. If the first
// pivot does not reach tol, the solve is repeated once with the most
// probable state of the best vector found. The returned π is the best seen;
// its residual is recomputed by the caller.
func krylovStationary(ctx context.Context, pt *csr, tol float64, start []float64) (solution, error) {
	n := pt.n
	x0 := start
	iters, solver := 0, SolverGMRES
	if x0 == nil {
		iters, solver = warmSweeps, SolverGaussSeidel
		x0 = make([]float64, n)
		for i := range x0 {
			x0[i] = 1 / float64(n)
		}
		for sweep := range warmSweeps {
			gsSweep(pt, x0, sweep%2 == 1)
			if err := normalise(x0); err != nil {
				return solution{}, err
			}
		}
	}
	best := solution{pi: slices.Clone(x0), residual: residual(pt, x0), iters: iters, solver: solver}
	if best.residual <= tol {
		return best, nil
	}
	var lastErr error
	for range 2 {
		j := int32(0)
		for i, v := range best.pi {
			if v > best.pi[j] {
				j = int32(i)
			}
		}
		lu, err := newILU0(pinnedSystem(pt, j))
		if err != nil {
			lastErr = err
			break
		}
		x := slices.Clone(best.pi)
		if x[j] > 0 {
			s := 1 / x[j]
			for i := range x {
				x[i] *= s
			}
		}
		b := make([]float64, n)
		b[j] = 1
		s, it, err := gmresSolve(ctx, pinned{pt, j}, lu, b, x, pt, tol)
		iters += it
		if s.better(best) {
			best = s
		}
		best.iters = iters
		if err == nil && best.residual <= tol {
			return best, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	best.iters = iters
	if lastErr == nil {
		lastErr = fmt.Errorf("%w: residual %.3g", ErrNotConverged, best.residual)
	}
	return best, lastErr
}

// pinnedSystem returns A with A·x = e_j for x = π/π_j: row k ≠ j is the
// balance equation x_k − Σ_i P_ik x_i = 0, row j is x_j = 1. Rows are
// sorted by column and hold their diagonal entry.
func pinnedSystem(pt *csr, j int32) *csr {
	n := pt.n
	a := &csr{n: n, rowPtr: make([]int32, 1, n+1), col: make([]int32, 0, len(pt.col)+n), val: make([]float64, 0, len(pt.col)+n)}
	for k := range int32(n) {
		if k == j {
			a.col = append(a.col, k)
			a.val = append(a.val, 1)
			a.rowPtr = append(a.rowPtr, int32(len(a.col)))
			continue
		}
		diag := false
		for e := pt.rowPtr[k]; e < pt.rowPtr[k+1]; e++ {
			c := pt.col[e]
			if c > k && !diag {
				a.col = append(a.col, k)
				a.val = append(a.val, 1)
				diag = true
			}
			if c == k {
				a.col = append(a.col, k)
				a.val = append(a.val, 1-pt.val[e])
				diag = true
				continue
			}
			a.col = append(a.col, c)
			a.val = append(a.val, -pt.val[e])
		}
		if !diag {
			a.col = append(a.col, k)
			a.val = append(a.val, 1)
		}
		a.rowPtr = append(a.rowPtr, int32(len(a.col)))
	}
	return a
}

// pinned is the matrix of pinnedSystem(pt, j), applied from pt without
// being stored: the stored copy is factored in place by newILU0.
type pinned struct {
	pt *csr
	j  int32
}

// mulVec sets y = A·x for A = pinnedSystem(pt, j).
func (a pinned) mulVec(y, x []float64) {
	pt := a.pt
	for k := range int32(pt.n) {
		if k == a.j {
			y[k] = x[k]
			continue
		}
		s := x[k]
		for e := pt.rowPtr[k]; e < pt.rowPtr[k+1]; e++ {
			s -= pt.val[e] * x[pt.col[e]]
		}
		y[k] = s
	}
}

// ilu0 is the incomplete LU factorisation of a CSR matrix with the
// matrix's own sparsity pattern: L (unit diagonal) strictly below the
// diagonal and U on and above it, stored in place.
type ilu0 struct {
	a    *csr // pattern shared with the factored matrix; val holds L and U
	diag []int32
}

// newILU0 factors a (rows sorted by column, every diagonal present) in
// place: a's values become L and U.
func newILU0(a *csr) (*ilu0, error) {
	n := a.n
	f := &ilu0{a: a, diag: make([]int32, n)}
	lu := f.a.val
	iw := make([]int32, n)
	for i := range iw {
		iw[i] = -1
	}
	for i := range int32(n) {
		lo, hi := a.rowPtr[i], a.rowPtr[i+1]
		for e := lo; e < hi; e++ {
			iw[a.col[e]] = e
		}
		e := lo
		for ; e < hi && a.col[e] < i; e++ {
			k := a.col[e]
			lu[e] /= lu[f.diag[k]]
			l := lu[e]
			for g := f.diag[k] + 1; g < a.rowPtr[k+1]; g++ {
				if w := iw[a.col[g]]; w >= 0 {
					lu[w] -= l * lu[g]
				}
			}
		}
		if e >= hi || a.col[e] != i || lu[e] == 0 || math.IsNaN(lu[e]) {
			return nil, fmt.Errorf("%w: ILU(0) has a zero pivot at row %d", ErrNotConverged, i)
		}
		f.diag[i] = e
		for e := lo; e < hi; e++ {
			iw[a.col[e]] = -1
		}
	}
	return f, nil
}

// solve overwrites x with (LU)⁻¹·x.
func (f *ilu0) solve(x []float64) {
	a, lu := f.a, f.a.val
	for i := range int32(a.n) {
		s := x[i]
		for e := a.rowPtr[i]; e < f.diag[i]; e++ {
			s -= lu[e] * x[a.col[e]]
		}
		x[i] = s
	}
	for i := int32(a.n) - 1; i >= 0; i-- {
		s := x[i]
		d := f.diag[i]
		for e := d + 1; e < a.rowPtr[i+1]; e++ {
			s -= lu[e] * x[a.col[e]]
		}
		x[i] = s / lu[d]
	}
}

// gmresSolve runs right-preconditioned restarted GMRES on a·x = b from x
// (updated in place). After every restart cycle it normalises x into a
// distribution, computes its residual ‖πP − π‖₁ from pt, and keeps the best.
// It stops when that residual reaches tol, when gmresStall cycles in a row
// fail to halve it, after gmresMaxCycles cycles, or on cancellation.
func gmresSolve(ctx context.Context, a pinned, lu *ilu0, b, x []float64, pt *csr, tol float64) (solution, int, error) {
	n := a.pt.n
	ws := newGMRES(a, lu)
	pi := make([]float64, n)
	best := solution{solver: SolverGMRES, residual: math.Inf(1)}
	iters, stall, lastGood := 0, 0, math.Inf(1)
	sqrtN := math.Sqrt(float64(n))
	for cycle := 0; cycle < gmresMaxCycles; cycle++ {
		if err := ctx.Err(); err != nil {
			return best, iters, fmt.Errorf("perfmodel: stationary solve: %w", err)
		}
		beta := ws.startResidual(b, x)
		sum := 0.0
		for _, xi := range x {
			sum += math.Abs(xi)
		}
		// ‖πP − π‖₁ ≤ 2√n‖r‖₂ / Σx; aim the inner loop well below tol.
		inner := 0.25 * tol * max(sum, 1) / sqrtN
		if beta == 0 {
			break
		}
		k := ws.cycle(beta, inner)
		iters += k
		ws.update(x, k)
		copy(pi, x)
		res := math.Inf(1)
		if normalise(pi) == nil {
			res = residual(pt, pi)
		}
		if res < best.residual {
			best = solution{pi: slices.Clone(pi), residual: res, solver: SolverGMRES}
		}
		if res <= tol {
			return best, iters, nil
		}
		if best.residual < 0.5*lastGood {
			lastGood, stall = best.residual, 0
		} else if stall++; stall >= gmresStall {
			return best, iters, fmt.Errorf("%w: GMRES stalled at residual %.3g after %d iterations", ErrNotConverged, best.residual, iters)
		}
	}
	return best, iters, fmt.Errorf("%w: GMRES residual %.3g after %d iterations", ErrNotConverged, best.residual, iters)
}

// gmres is the workspace of one restarted, right-preconditioned GMRES run
// on a·x = b with preconditioner lu.
type gmres struct {
	a      pinned
	lu     *ilu0
	n, m   int         // system size, restart length
	v      [][]float64 // the Krylov basis, allocated as it grows
	h      [][]float64 // h[i][k]: Hessenberg, column k
	cs, sn []float64   // Givens rotations
	g, y   []float64   // rotated right-hand side, least-squares solution
	w, z   []float64   // scratch vectors
}

// newGMRES allocates the workspace for a with preconditioner lu.
func newGMRES(a pinned, lu *ilu0) *gmres {
	n := a.pt.n
	m := min(gmresRestart, n)
	ws := &gmres{a: a, lu: lu, n: n, m: m, v: make([][]float64, m+1), h: make([][]float64, m+1)}
	ws.v[0] = make([]float64, n)
	for i := range ws.h {
		ws.h[i] = make([]float64, m)
	}
	ws.cs, ws.sn, ws.g, ws.y = make([]float64, m), make([]float64, m), make([]float64, m+1), make([]float64, m)
	ws.w, ws.z = make([]float64, n), make([]float64, n)
	return ws
}

// startResidual sets v[0] to r = b − a·x and returns ‖r‖₂.
func (ws *gmres) startResidual(b, x []float64) float64 {
	ws.a.mulVec(ws.w, x)
	beta := 0.0
	for i := range ws.n {
		r := b[i] - ws.w[i]
		ws.v[0][i] = r
		beta += r * r
	}
	return math.Sqrt(beta)
}

// cycle runs one restart cycle from the residual in v[0] of norm beta,
// stopping once the estimated residual reaches inner, and returns the
// number of Arnoldi steps taken.
func (ws *gmres) cycle(beta, inner float64) int {
	v0, g := ws.v[0], ws.g
	for i := range ws.n {
		v0[i] /= beta
	}
	clear(g)
	g[0] = beta
	k := 0
	for k < ws.m {
		hn := ws.arnoldi(k)
		ws.rotate(k)
		k++
		if math.Abs(g[k]) <= inner || hn == 0 {
			break
		}
	}
	return k
}

// arnoldi extends the basis by v[k+1] = (a·M⁻¹·v[k] orthogonalised), filling
// column k of h, and returns the new vector's norm before scaling.
func (ws *gmres) arnoldi(k int) float64 {
	v, h, w, z := ws.v, ws.h, ws.w, ws.z
	copy(z, v[k])
	ws.lu.solve(z)
	ws.a.mulVec(w, z)
	// Modified Gram–Schmidt, twice for stability.
	for i := 0; i <= k; i++ {
		h[i][k] = 0
	}
	for range 2 {
		for i := 0; i <= k; i++ {
			d := dot(w, v[i])
			h[i][k] += d
			axpy(-d, v[i], w)
		}
	}
	hn := math.Sqrt(dot(w, w))
	h[k+1][k] = hn
	if v[k+1] == nil {
		v[k+1] = make([]float64, ws.n)
	}
	if hn > 0 {
		for i := range ws.n {
			v[k+1][i] = w[i] / hn
		}
	}
	return hn
}

// rotate applies the previous Givens rotations to column k of h, then the
// new one that zeroes h[k+1][k], updating g.
func (ws *gmres) rotate(k int) {
	h, cs, sn, g := ws.h, ws.cs, ws.sn, ws.g
	for i := 0; i < k; i++ {
		t := cs[i]*h[i][k] + sn[i]*h[i+1][k]
		h[i+1][k] = -sn[i]*h[i][k] + cs[i]*h[i+1][k]
		h[i][k] = t
	}
	r := math.Hypot(h[k][k], h[k+1][k])
	if r == 0 {
		cs[k], sn[k] = 1, 0
	} else {
		cs[k], sn[k] = h[k][k]/r, h[k+1][k]/r
	}
	h[k][k] = r
	h[k+1][k] = 0
	g[k+1] = -sn[k] * g[k]
	g[k] = cs[k] * g[k]
}

// update solves the k×k triangular system y = H⁻¹g and adds M⁻¹·V·y to x.
func (ws *gmres) update(x []float64, k int) {
	h, g, y, z := ws.h, ws.g, ws.y, ws.z
	for i := k - 1; i >= 0; i-- {
		s := g[i]
		for l := i + 1; l < k; l++ {
			s -= h[i][l] * y[l]
		}
		if h[i][i] == 0 {
			y[i] = 0
			continue
		}
		y[i] = s / h[i][i]
	}
	clear(z)
	for i := range k {
		axpy(y[i], ws.v[i], z)
	}
	ws.lu.solve(z)
	for i := range ws.n {
		x[i] += z[i]
	}
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

// axpy sets y += α·x.
func axpy(alpha float64, x, y []float64) {
	for i, v := range x {
		y[i] += alpha * v
	}
}

// gsSweep performs one Gauss–Seidel sweep π_j ← Σ_{i≠j} π_i P_ij / (1 − P_jj)
// in place over the transpose pt, forward or backward.
func gsSweep(pt *csr, pi []float64, backward bool) {
	n := pt.n
	for k := range n {
		j := k
		if backward {
			j = n - 1 - k
		}
		s, d := 0.0, 0.0
		for e := pt.rowPtr[j]; e < pt.rowPtr[j+1]; e++ {
			i := pt.col[e]
			if int(i) == j {
				d += pt.val[e]
				continue
			}
			s += pi[i] * pt.val[e]
		}
		if d < 1 {
			pi[j] = s / (1 - d)
		}
	}
}

// gaussSeidel alternates forward and backward sweeps from start (uniform if
// nil) until ‖πP − π‖₁ ≤ tol, its work bound is spent or gsStall sweeps
// pass without halving the residual, returning the best vector seen.
func gaussSeidel(ctx context.Context, pt *csr, tol float64, start []float64) (solution, error) {
	n := pt.n
	pi := slices.Clone(start)
	if pi == nil {
		pi = make([]float64, n)
		for i := range pi {
			pi[i] = 1 / float64(n)
		}
	}
	maxSweeps := int(min(gsMaxSweeps, max(100, gsWork/float64(len(pt.col)+n))))
	best := solution{solver: SolverGaussSeidel, residual: math.Inf(1)}
	lastGood, lastSweep := math.Inf(1), 0
	for sweep := 1; sweep <= maxSweeps; sweep++ {
		if err := ctx.Err(); err != nil {
			return best, fmt.Errorf("perfmodel: stationary solve: %w", err)
		}
		gsSweep(pt, pi, sweep%2 == 0)
		if err := normalise(pi); err != nil {
			return best, err
		}
		if sweep%4 == 0 || sweep < 4 || sweep == maxSweeps {
			res := residual(pt, pi)
			if res < best.residual {
				best = solution{pi: slices.Clone(pi), residual: res, iters: sweep, solver: SolverGaussSeidel}
			}
			if res <= tol {
				return best, nil
			}
			if best.residual < 0.5*lastGood {
				lastGood, lastSweep = best.residual, sweep
			} else if sweep-lastSweep >= gsStall {
				return best, fmt.Errorf("%w: Gauss–Seidel stalled at residual %.3g after %d sweeps", ErrNotConverged, best.residual, sweep)
			}
		}
	}
	return best, fmt.Errorf("%w: Gauss–Seidel residual %.3g after %d sweeps", ErrNotConverged, best.residual, maxSweeps)
}

// routingStationary returns the stationary distribution ν of one request's
// routing chain (ν = νP) over the models.
func routingStationary(p [][]float64) ([]float64, error) {
	m := len(p)
	s := &csr{n: m, rowPtr: make([]int32, m+1)}
	for i := range m {
		for j, v := range p[i] {
			if v > 0 {
				s.col = append(s.col, int32(j))
				s.val = append(s.val, v)
			}
		}
		s.rowPtr[i+1] = int32(len(s.col))
	}
	pi, err := stationaryDense(s)
	if err != nil {
		return nil, err
	}
	if r := residual(s.transpose(), pi); r > 1e-9 {
		return nil, fmt.Errorf("%w: routing chain residual %.3g (is P reducible?)", ErrNotConverged, r)
	}
	return pi, nil
}
