package cpu

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
)

// mmJob is one weight matrix of a multiplication and where its outputs go
// (out[t*m.rows+r] for input row t and weight row r).
type mmJob struct {
	m   *matrix
	out []float32
}

// matmulTask multiplies T activation rows (in one Act form) by up to three
// weight matrices, each split by output rows into parts, with each
// matrix's kernel of class cls.
type matmulTask struct {
	jobs    [3]mmJob
	nj      int
	a       []byte
	narrow  []byte // a narrowed for the kernels' Few (kernels.NarrowQ8G), or nil
	aStride int
	T       int
	cls     kernels.Class
	parts   int
}

func (t *matmulTask) do(_, part int) {
	for _, j := range t.jobs[:t.nj] {
		m := j.m
		k := &m.k[t.cls]
		lo, hi := splitRows(m.rows, part, t.parts)
		switch {
		case lo >= hi:
		case t.narrow != nil:
			k.Few(m.cols, m.data[lo*m.rowBytes:], m.rowBytes, hi-lo, t.a, t.narrow, t.aStride, t.T, j.out[lo:], m.rows)
		default:
			k.Mul(m.cols, m.data[lo*m.rowBytes:], m.rowBytes, hi-lo, t.a, t.aStride, t.T, j.out[lo:], m.rows)
		}
	}
}

// tileRows is the row granularity of a split (the kernels' largest tile).
const tileRows = 16

// splitRows returns part p of parts of [0, rows), in whole tiles.
func splitRows(rows, p, parts int) (lo, hi int) {
	tiles := (rows + tileRows - 1) / tileRows
	lo = min(rows, tiles*p/parts*tileRows)
	hi = min(rows, tiles*(p+1)/parts*tileRows)
	return lo, hi
}

// mmInput is the input of a multiplication: T rows of cols values at x,
// taken as they are, or first turned into glu(x)·u in place when u is
// set, or into rmsnorm(x)·norm written to normed when norm is set.
type mmInput struct {
	x, u         []float32
	norm, normed []float32
	T, cols      int
}

// rows returns the rows the multiplication reads once they are prepared.
func (in *mmInput) rows() []float32 {
	if in.norm != nil {
		return in.normed[:in.T*in.cols]
	}
	return in.x[:in.T*in.cols]
}

// prepTask readies rows of a multiplication's input (see mmInput) and
// quantises them into form act. Its parts split the rows (for a grouped
// form, in whole groups), or with byBlocks the blocks of every row: the
// rows of a group share its records (see kernels.QuantizeBlocks), so parts
// of one group split by rows would write the same cache lines at once.
type prepTask struct {
	in       mmInput
	eps      float32
	glu      kernels.SwiGLUFunc
	act      kernels.Act
	buf      []byte
	rb       int
	parts    int
	byBlocks bool
}

func (t *prepTask) do(_, part int) {
	in := &t.in
	n := in.cols
	if t.byBlocks {
		bs := t.act.Block()
		nb := n / bs
		b0, b1 := nb*part/t.parts, nb*(part+1)/t.parts
		c0, c1 := b0*bs, b1*bs
		for r := range in.T {
			switch {
			case in.norm != nil:
				rmsnormCols(in.normed[r*n:(r+1)*n], in.x[r*n:(r+1)*n], in.norm, t.eps, c0, c1)
			case in.u != nil:
				t.glu(in.x[r*n+c0:r*n+c1], in.u[r*n+c0:r*n+c1])
			}
		}
		kernels.QuantizeBlocks(t.act, t.buf, t.rb, in.rows(), n, 0, in.T, b0, b1)
		return
	}
	g := t.act.Group()
	groups := (in.T + g - 1) / g
	r0, r1 := min(in.T, groups*part/t.parts*g), min(in.T, groups*(part+1)/t.parts*g)
	for r := r0; r < r1; r++ {
		switch {
		case in.norm != nil:
			rmsnorm(in.normed[r*n:(r+1)*n], in.x[r*n:(r+1)*n], in.norm, t.eps)
		case in.u != nil:
			t.glu(in.x[r*n:(r+1)*n], in.u[r*n:(r+1)*n])
		}
	}
	if t.act != kernels.ActF32 {
		kernels.QuantizeRows(t.act, t.buf, t.rb, in.rows(), n, r0, r1)
	}
}

// prepParallelRows is the smallest row count whose preparation is split
// over the pool.
const prepParallelRows = 4

// actRows prepares the input rows (see mmInput) and returns them in form a
// with the stride between them (between groups of rows for grouped forms),
// quantised into the worker's scratch (F32 activations are the prepared
// rows themselves, seen as bytes). Pooled, the work is split over the
// pool by rows or by blocks (see prepTask).
func (e *Engine) actRows(worker int, pooled bool, in mmInput, a kernels.Act) ([]byte, int) {
	t := &e.scratch[worker].prep
	*t = prepTask{in: in, eps: e.cfg.eps, glu: e.glu, act: a, parts: 1}
	if a == kernels.ActF32 {
		t.rb = 4 * in.cols
	} else {
		t.rb = a.RowBytes(in.cols)
		sc := &e.scratch[worker]
		sc.act[a] = grow(sc.act[a], a.Bytes(in.cols, in.T))
		t.buf = sc.act[a]
	}
	if pooled && in.T >= prepParallelRows && e.pool.n > 1 {
		g := a.Group()
		t.parts = min((in.T+g-1)/g, 4*e.pool.n)
		if t.parts < e.pool.n {
			t.parts, t.byBlocks = min(in.cols/a.Block(), 2*e.pool.n), true
		}
		e.pool.run(t, t.parts)
	} else {
		t.do(worker, 0)
	}
	buf, rb := t.buf, t.rb
	*t = prepTask{}
	if a == kernels.ActF32 {
		x := in.rows()
		return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x)), rb
	}
	return buf, rb
}

// mul multiplies the input rows (see mmInput) by the jobs' matrices: on
// the pool when pooled, else on the given worker alone, with each matrix's
// kernel of the class of T columns (kernels.ClassOf). Jobs whose kernels
// take the same activation form share one quantisation of the rows.
func (e *Engine) mul(worker int, pooled bool, in mmInput, jobs ...mmJob) {
	T, cols := in.T, in.cols
	cls := kernels.ClassOf(T)
	for i := 0; i < len(jobs); {
		act := jobs[i].m.k[cls].Act
		j, macs, tiles, wb, few := i, 0, 1, 0, act == kernels.ActQ8G && T <= kernels.FewCols
		for j < len(jobs) && jobs[j].m.k[cls].Act == act {
			macs += T * jobs[j].m.rows * cols
			tiles = max(tiles, (jobs[j].m.rows+tileRows-1)/tileRows)
			wb += jobs[j].m.rows * jobs[j].m.rowBytes
			few = few && jobs[j].m.k[cls].Few != nil
			j++
		}
		a, stride := e.actRows(worker, pooled, in, act)
		in = mmInput{x: in.rows(), T: T, cols: cols} // prepared once
		t := &e.scratch[worker].mm
		if pooled {
			t = &e.mm
		}
		t.nj = copy(t.jobs[:], jobs[i:j])
		t.a, t.narrow, t.aStride, t.T, t.cls, t.parts = a, nil, stride, T, cls, 1
		if few {
			// A few rows' activations, narrowed once for every part: the
			// kernels read a sixteenth or a quarter of the bytes.
			sc := &e.scratch[worker]
			sc.narrow = grow(sc.narrow, kernels.NarrowBytes(cols, T))
			kernels.NarrowQ8G(sc.narrow, a, cols, T)
			t.narrow = sc.narrow
		}
		if pooled && macs >= parallelMACs {
			t.parts = min(tiles, max(partsPerThread*e.pool.n, wb/partBytes), maxParts)
			e.pool.run(t, t.parts)
		} else {
			t.do(worker, 0)
		}
		t.jobs, t.a, t.narrow = [3]mmJob{}, nil, nil
		i = j
	}
}

// attnTask runs causal attention for (row, kv head) units of one layer; the
// query heads sharing a kv head run one after the other while its cached
// keys and values are hot.
type attnTask struct {
	e     *Engine
	layer int
	units int
	parts int
}

func (t *attnTask) do(worker, part int) {
	lo, hi := t.units*part/t.parts, t.units*(part+1)/t.parts
	t.e.attend(worker, t.layer, lo, hi)
}

// attend runs attention of layer l for units [lo, hi); unit u is row
// u/kvHeads and kv head u%kvHeads. The scores of the query heads sharing
// the kv head are computed together, one key block at a time; each head
// then takes its softmax and its weighted sum of values.
func (e *Engine) attend(worker, layer, lo, hi int) {
	c := e.cfg
	hd, qd := c.headDim, c.qDim()
	group := c.heads / c.kvHeads
	lf, kvd := e.kv.layerFloats, e.kv.kvDim
	ss := e.scoreStride()
	scores := e.scratch[worker].scores
	window := e.w.layers[layer].window
	for u := lo; u < hi; u++ {
		r, g := u/c.kvHeads, u%c.kvHeads
		s := e.rowSeq[r]
		n := e.rowPos[r] + 1
		first := 0 // the first position attended to
		if window > 0 && n > window {
			first = n - window
		}
		b0 := first / blockTokens
		kOff := layer*lf + g*hd*blockTokens
		vOff := layer*lf + blockTokens*kvd + g*hd
		q := e.q[r*qd+g*group*hd : r*qd+(g+1)*group*hd]
		for b := b0; b*blockTokens < n; b++ {
			blk := e.kv.blocks[s.blocks[b]]
			e.scores(q, hd, blk[kOff:kOff+hd*blockTokens], scores[b*blockTokens:], ss)
		}
		for j := range group {
			h := g*group + j
			sum := e.softmax(scores[j*ss+first : j*ss+n])
			out := e.att[r*qd+h*hd : r*qd+(h+1)*hd]
			clear(out)
			for b := b0; b*blockTokens < n; b++ {
				blk := e.kv.blocks[s.blocks[b]]
				p0, p1 := max(first, b*blockTokens), min(n, (b+1)*blockTokens)
				e.values(scores[j*ss+p0:j*ss+p1], blk[vOff+(p0-b*blockTokens)*kvd:], kvd, out)
			}
			inv := 1 / sum
			for i := range out {
				out[i] *= inv
			}
		}
	}
}

// softmax turns raw scores q·k into e^(s−max) for the scaled (and, with
// soft-capping, capped) scores s and returns their sum.
func (e *Engine) softmax(sc []float32) float32 {
	scale := e.scale
	if limit := e.cfg.attnCap; limit > 0 {
		for i, v := range sc {
			sc[i] = limit * float32(math.Tanh(float64(v*scale/limit)))
		}
		scale = 1
	}
	mx := float32(math.Inf(-1))
	for _, v := range sc {
		if v > mx { // NaN scores are skipped here; they still reach the sum
			mx = v
		}
	}
	e.expShift(sc, mx, scale)
	var sum float32
	for _, v := range sc {
		sum += v
	}
	return sum
}

// scoreStride is the distance between two heads' scores in a worker's
// score buffer: the context length rounded up to whole key blocks.
func (e *Engine) scoreStride() int {
	return (e.cfg.ctx + blockTokens - 1) / blockTokens * blockTokens
}

// ensure sizes the per-step buffers for T rows and O output rows.
func (e *Engine) ensure(T, O int) {
	c := e.cfg
	e.rowSeq = grow(e.rowSeq, T)
	e.rowPos = grow(e.rowPos, T)
	e.x = grow(e.x, T*c.dim)
	e.xb = grow(e.xb, T*c.dim)
	e.xo = grow(e.xo, T*c.dim)
	e.q = grow(e.q, T*c.qDim())
	e.att = grow(e.att, T*c.qDim())
	e.k = grow(e.k, T*c.kvDim())
	e.v = grow(e.v, T*c.kvDim())
	e.hb = grow(e.hb, T*c.hidden)
	e.hb2 = grow(e.hb2, T*c.hidden)
	e.cosSin = grow(e.cosSin, T*len(e.ropes)*c.ropeDim)
	e.outRows = grow(e.outRows, O)
	e.hn = grow(e.hn, O*c.dim)
	e.logits = grow(e.logits, O*c.vocab)
	e.tokens = grow(e.tokens, O)
	for i := range e.scratch {
		if need := c.heads / c.kvHeads * e.scoreStride(); len(e.scratch[i].scores) < need {
			e.scratch[i].scores = make([]float32, need)
		}
	}
}

func (e *Engine) embed(tok int32, dst []float32) {
	e.w.embd.row(int(tok), dst)
}

// cosSinOf returns row r's cos and sin of rotary table t.
func (e *Engine) cosSinOf(r, t int) []float64 {
	n := e.cfg.ropeDim
	i := (r*len(e.ropes) + t) * n
	return e.cosSin[i : i+n]
}

// rope rotates the first ropeDim dimensions of each head of v (n heads),
// in the pairs of the model's ropeStyle.
func (e *Engine) rope(v []float32, n int, cs []float64) {
	c := e.cfg
	half := c.ropeDim / 2
	step, off := c.ropeStyle.pairs(half)
	for h := range n {
		x := v[h*c.headDim : (h+1)*c.headDim]
		for j := range half {
			cos, sin := float32(cs[2*j]), float32(cs[2*j+1])
			i0 := j * step
			i1 := i0 + off
			a, b := x[i0], x[i1]
			x[i0] = a*cos - b*sin
			x[i1] = a*sin + b*cos
		}
	}
}

// placeRow readies row r of a pass for token tok at position pos of s:
// the row's input (the token's embedding, scaled where the architecture
// says) and its rotary cos and sin.
func (e *Engine) placeRow(r int, s *sequence, pos int, tok int32) {
	c := e.cfg
	dim := c.dim
	e.rowSeq[r], e.rowPos[r] = s, pos
	x := e.x[r*dim : (r+1)*dim]
	e.embed(tok, x)
	if c.embedScale != 0 {
		for i := range x {
			x[i] *= c.embedScale
		}
	}
	half := c.ropeDim / 2
	for t, freq := range e.ropes {
		cs, ms := e.cosSinOf(r, t), e.mscale[t]
		for k := range half {
			sin, cos := math.Sincos(float64(pos) * freq[k])
			cs[2*k], cs[2*k+1] = cos*ms, sin*ms
		}
	}
}

// forward runs the model over the T rows of the admitted batch and leaves
// the logits of its O output rows in e.logits.
//
// A batch of several sequences on a small model runs as independent parts,
// each a run of whole sequences taken through every layer by one worker:
// no barrier between kernels, and each part still reads every weight once
// for all its rows. Otherwise each kernel is split over the pool by output
// rows (matmuls) or by (row, kv head) units (attention).
func (e *Engine) forward(ctx context.Context, in []engine.Input, T, O int) error {
	c := e.cfg
	e.ensure(T, O)
	r, o := 0, 0
	work := 0
	for i := range in {
		s := e.batch[i]
		n := len(in[i].Tokens)
		first := n - 1
		if in[i].Want&engine.WantAllTokens != 0 {
			first = 0
		}
		for j, tok := range in[i].Tokens {
			pos := s.n + j
			e.placeRow(r, s, pos, tok)
			if j >= first {
				e.outRows[o] = r
				o++
			}
			work += (pos + 1) * c.heads * c.headDim * 2
			r++
		}
	}
	if parts := e.planSeqParts(in, T); parts > 1 {
		e.sp.cancelled.Store(false)
		e.sp.ctx = ctx
		e.pool.run(&e.sp, parts)
		e.sp.ctx = nil
		if e.sp.cancelled.Load() {
			return fmt.Errorf("cpu: step cancelled: %w", ctx.Err())
		}
		return nil
	}
	attnParts := 1
	if work >= parallelMACs {
		attnParts = min(T*c.kvHeads, 4*e.pool.n)
	}
	for l := range e.w.layers {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cpu: step cancelled: %w", err)
		}
		e.layer(0, l, 0, T, attnParts)
	}
	e.head(0, 0, O, true)
	return nil
}

// planSeqParts splits the batch into runs of whole sequences of about equal
// cost when that pays (several sequences, a model small enough that its
// weights stay in cache) and returns the number of parts (0 or 1: do not
// split). Part p covers rows [e.partRow[p], e.partRow[p+1]) and outputs
// [e.partOut[p], e.partOut[p+1]).
func (e *Engine) planSeqParts(in []engine.Input, T int) int {
	c := e.cfg
	if e.pool.n < 2 || len(in) < 2 || e.tokenMACs > seqSplitMACs {
		return 0
	}
	perPos := c.layers * c.heads * c.headDim * 2
	total := 0
	for i := range in {
		n := len(in[i].Tokens)
		s := e.batch[i]
		total += n*e.tokenMACs + perPos*(n*s.n+n*(n+1)/2)
	}
	if total < parallelMACs {
		return 0
	}
	parts := min(len(in), 2*e.pool.n)
	e.partRow = grow(e.partRow, parts+1)
	e.partOut = grow(e.partOut, parts+1)
	p, acc, r, o := 0, 0, 0, 0
	e.partRow[0], e.partOut[0] = 0, 0
	for i := range in {
		n := len(in[i].Tokens)
		s := e.batch[i]
		acc += n*e.tokenMACs + perPos*(n*s.n+n*(n+1)/2)
		r += n
		if in[i].Want&engine.WantAllTokens != 0 {
			o += n
		} else {
			o++
		}
		// close part p once its share is reached, or when the sequences
		// left are just enough to give each later part one
		if left := len(in) - 1 - i; p+1 < parts && (acc*parts >= total*(p+1) || left == parts-1-p) {
			p++
			e.partRow[p], e.partOut[p] = r, o
		}
	}
	parts = p + 1
	e.partRow[parts], e.partOut[parts] = r, o
	return parts
}

// seqTask runs planned parts of a batch through the whole model.
type seqTask struct {
	e         *Engine
	ctx       context.Context
	cancelled atomic.Bool
}

func (t *seqTask) do(worker, part int) {
	e := t.e
	r0, r1 := e.partRow[part], e.partRow[part+1]
	for l := range e.w.layers {
		if t.cancelled.Load() || t.ctx.Err() != nil {
			t.cancelled.Store(true)
			return
		}
		e.layer(worker, l, r0, r1, 0)
	}
	e.head(worker, e.partOut[part], e.partOut[part+1], false)
}

// layer runs layer l over rows [r0, r1). With attnParts > 0 the kernels run
// on the pool (attention in attnParts parts); with 0 everything runs on the
// given worker.
func (e *Engine) layer(worker, l, r0, r1, attnParts int) {
	c := e.cfg
	ly := &e.w.layers[l]
	dim, qd, kvd, hid := c.dim, c.qDim(), c.kvDim(), c.hidden
	pooled := attnParts > 0
	T := r1 - r0
	x := e.x[r0*dim : r1*dim]
	xb := e.xb[r0*dim : r1*dim]
	xo := e.xo[r0*dim : r1*dim]
	hb := e.hb[r0*hid : r1*hid]
	hb2 := e.hb2[r0*hid : r1*hid]
	e.mul(worker, pooled, mmInput{x: x, norm: ly.attnNorm, normed: xb, T: T, cols: dim}, mmJob{&ly.wq, e.q[r0*qd : r1*qd]},
		mmJob{&ly.wk, e.k[r0*kvd : r1*kvd]}, mmJob{&ly.wv, e.v[r0*kvd : r1*kvd]})
	if pooled && T >= prepParallelRows && e.pool.n > 1 {
		e.qt.layer, e.qt.T, e.qt.parts = l, T, min(T, 4*e.pool.n)
		e.pool.run(&e.qt, e.qt.parts)
	} else {
		e.qkvRows(l, r0, r1)
	}
	if pooled {
		e.at.layer, e.at.units, e.at.parts = l, T*c.kvHeads, attnParts
		e.pool.run(&e.at, attnParts)
	} else {
		e.attend(worker, l, r0*c.kvHeads, r1*c.kvHeads)
	}
	e.mul(worker, pooled, mmInput{x: e.att[r0*qd : r1*qd], T: T, cols: qd}, mmJob{&ly.wo, xo})
	e.residual(x, xo, ly.postAttn)
	e.mul(worker, pooled, mmInput{x: x, norm: ly.ffnNorm, normed: xb, T: T, cols: dim}, mmJob{&ly.gate, hb}, mmJob{&ly.up, hb2})
	e.mul(worker, pooled, mmInput{x: hb, u: hb2, T: T, cols: hid}, mmJob{&ly.down, xo})
	e.residual(x, xo, ly.postFFN)
}

// residual adds the rows of a sublayer's output o to x, each first
// normalised by norm when there is one.
func (e *Engine) residual(x, o, norm []float32) {
	if norm != nil {
		n := e.cfg.dim
		for r := 0; r < len(o)/n; r++ {
			rmsnorm(o[r*n:(r+1)*n], o[r*n:(r+1)*n], norm, e.cfg.eps)
		}
	}
	axpy(1, o, x)
}

// qkvTask finishes the query, key and value rows of one layer (see
// qkvRows), split by rows.
type qkvTask struct {
	e               *Engine
	layer, T, parts int
}

func (t *qkvTask) do(_, part int) {
	t.e.qkvRows(t.layer, t.T*part/t.parts, t.T*(part+1)/t.parts)
}

// qkvRows finishes rows [r0, r1) of layer l's queries, keys and values:
// biases, q/k norms, rotary embeddings; it stores the keys and values in
// the rows' KV blocks.
func (e *Engine) qkvRows(l, r0, r1 int) {
	c := e.cfg
	ly := &e.w.layers[l]
	qd, kvd := c.qDim(), c.kvDim()
	for r := r0; r < r1; r++ {
		q := e.q[r*qd : (r+1)*qd]
		k := e.k[r*kvd : (r+1)*kvd]
		v := e.v[r*kvd : (r+1)*kvd]
		if ly.bq != nil {
			axpy(1, ly.bq, q)
		}
		if ly.bk != nil {
			axpy(1, ly.bk, k)
		}
		if ly.bv != nil {
			axpy(1, ly.bv, v)
		}
		if ly.qNorm != nil {
			for h := range c.heads {
				x := q[h*c.headDim : (h+1)*c.headDim]
				rmsnorm(x, x, ly.qNorm, c.eps)
			}
		}
		if ly.kNorm != nil {
			for h := range c.kvHeads {
				x := k[h*c.headDim : (h+1)*c.headDim]
				rmsnorm(x, x, ly.kNorm, c.eps)
			}
		}
		cs := e.cosSinOf(r, ly.rope)
		e.rope(q, c.heads, cs)
		e.rope(k, c.kvHeads, cs)
		s, pos := e.rowSeq[r], e.rowPos[r]
		b := s.blocks[pos/blockTokens]
		e.kv.putKey(b, l, pos%blockTokens, k)
		copy(e.kv.value(b, l, pos%blockTokens), v)
	}
}

// head applies the final norm and the classifier to outputs [o0, o1).
func (e *Engine) head(worker, o0, o1 int, pooled bool) {
	c := e.cfg
	dim := c.dim
	for o := o0; o < o1; o++ {
		r := e.outRows[o]
		rmsnorm(e.hn[o*dim:(o+1)*dim], e.x[r*dim:(r+1)*dim], e.w.outNorm, c.eps)
	}
	if o1 > o0 {
		logits := e.logits[o0*c.vocab : o1*c.vocab]
		e.mul(worker, pooled, mmInput{x: e.hn[o0*dim : o1*dim], T: o1 - o0, cols: dim}, mmJob{&e.w.output, logits})
		if limit := c.finalCap; limit > 0 {
			for i, v := range logits {
				logits[i] = limit * float32(math.Tanh(float64(v/limit)))
			}
		}
	}
}

// finish samples tokens, fills the outputs and advances the sequences.
func (e *Engine) finish(in []engine.Input, out []engine.Output) {
	c := e.cfg
	o := 0
	for i := range in {
		ip := &in[i]
		s := e.batch[i]
		n := 1
		if ip.Want&engine.WantAllTokens != 0 {
			n = len(ip.Tokens)
		}
		for j := range n {
			row := o + j
			p := s.n + len(ip.Tokens) - n + j + 1 // position the sampled token will take
			logits := e.logits[row*c.vocab : (row+1)*c.vocab]
			if allow := ip.AllowFor(len(ip.Tokens) - n + j); allow != nil {
				engine.Restrict(logits, allow)
			}
			e.tokens[row] = e.sample(logits, ip.Sampling, p)
		}
		last := o + n - 1
		res := engine.Output{Token: e.tokens[last]}
		if ip.Want&engine.WantAllTokens != 0 {
			res.Tokens = e.tokens[o : o+n : o+n]
		}
		if ip.Want&engine.WantLogits != 0 {
			res.Logits = e.logits[last*c.vocab : (last+1)*c.vocab : (last+1)*c.vocab]
		}
		if ip.Want&engine.WantHidden != 0 {
			res.Hidden = e.hn[last*c.dim : (last+1)*c.dim : (last+1)*c.dim]
		}
		out[i] = res
		o += n
		s.n += len(ip.Tokens)
		s.inBatch, s.created = false, false
	}
}
