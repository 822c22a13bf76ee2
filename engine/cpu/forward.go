package cpu

import (
	"context"
	"fmt"
	"math"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/gguf"
)

// matmulTask multiplies T input rows by a weight matrix, split by output rows.
type matmulTask struct {
	e     *Engine
	m     *matrix
	in    []float32
	T     int
	out   []float32
	parts int
}

func (t *matmulTask) do(worker, part int) {
	rows := t.m.rows
	lo, hi := rows*part/t.parts, rows*(part+1)/t.parts
	matmulRows(t.m, t.in, t.T, t.out, rows, lo, hi, t.e.scratch[worker].row)
}

// matmul computes out[T][m.rows] = in[T][m.cols] · mᵀ on the pool.
func (e *Engine) matmul(m *matrix, in []float32, T int, out []float32) {
	parts := 1
	if T*m.rows*m.cols >= parallelMACs {
		parts = e.pool.n
	}
	e.mm.m, e.mm.in, e.mm.T, e.mm.out, e.mm.parts = m, in, T, out, parts
	e.pool.run(&e.mm, parts)
	e.mm.m, e.mm.in, e.mm.out = nil, nil, nil
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
	e := t.e
	c := e.cfg
	lo, hi := t.units*part/t.parts, t.units*(part+1)/t.parts
	hd, qd := c.headDim, c.qDim()
	group := c.heads / c.kvHeads
	lf, kvd := e.kv.layerFloats, e.kv.kvDim
	scores := e.scratch[worker].scores
	for u := lo; u < hi; u++ {
		r, g := u/c.kvHeads, u%c.kvHeads
		s := e.rowSeq[r]
		n := e.rowPos[r] + 1
		kOff := t.layer*lf + g*hd
		vOff := kOff + blockTokens*kvd
		for j := range group {
			h := g*group + j
			q := e.q[r*qd+h*hd : r*qd+(h+1)*hd]
			sc := scores[:n]
			for b := 0; b*blockTokens < n; b++ {
				blk := e.kv.blocks[s.blocks[b]]
				m := min(blockTokens, n-b*blockTokens)
				attnScores(q, blk[kOff:], kvd, sc[b*blockTokens:b*blockTokens+m])
			}
			mx := sc[0]
			for _, v := range sc[1:] {
				mx = max(mx, v)
			}
			sum := expShiftSum(sc, mx, e.scale)
			out := e.att[r*qd+h*hd : r*qd+(h+1)*hd]
			clear(out)
			for b := 0; b*blockTokens < n; b++ {
				blk := e.kv.blocks[s.blocks[b]]
				m := min(blockTokens, n-b*blockTokens)
				attnValues(sc[b*blockTokens:b*blockTokens+m], blk[vOff:], kvd, out)
			}
			inv := 1 / sum
			for i := range out {
				out[i] *= inv
			}
		}
	}
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
	e.cosSin = grow(e.cosSin, T*c.ropeDim)
	e.outRows = grow(e.outRows, O)
	e.hn = grow(e.hn, O*c.dim)
	e.logits = grow(e.logits, O*c.vocab)
	e.tokens = grow(e.tokens, O)
	for i := range e.scratch {
		if need := c.ctx; len(e.scratch[i].scores) < need {
			e.scratch[i].scores = make([]float32, need)
		}
	}
}

func (e *Engine) embed(tok int32, dst []float32) {
	m := &e.w.embd
	if m.typ == gguf.F32 {
		copy(dst, m.f32[int(tok)*m.cols:(int(tok)+1)*m.cols])
		return
	}
	_ = gguf.Dequantize(m.typ, dst, m.q[int(tok)*m.rowBytes:(int(tok)+1)*m.rowBytes])
}

// rope rotates the first ropeDim dimensions of each head of v (n heads).
func (e *Engine) rope(v []float32, n int, cs []float64) {
	c := e.cfg
	half := c.ropeDim / 2
	for h := range n {
		x := v[h*c.headDim : (h+1)*c.headDim]
		for j := range half {
			cos, sin := float32(cs[2*j]), float32(cs[2*j+1])
			i0, i1 := 2*j, 2*j+1
			if c.ropeNeox {
				i0, i1 = j, j+half
			}
			a, b := x[i0], x[i1]
			x[i0] = a*cos - b*sin
			x[i1] = a*sin + b*cos
		}
	}
}

// forward runs the model over the T rows of the admitted batch and leaves
// the logits of its O output rows in e.logits.
func (e *Engine) forward(ctx context.Context, in []engine.Input, T, O int) error {
	c, w := e.cfg, e.w
	e.ensure(T, O)
	dim, qd, kvd, hid := c.dim, c.qDim(), c.kvDim(), c.hidden
	half := c.ropeDim / 2
	r := 0
	work := 0
	for i := range in {
		s := e.batch[i]
		for j, tok := range in[i].Tokens {
			pos := s.n + j
			e.rowSeq[r], e.rowPos[r] = s, pos
			e.embed(tok, e.x[r*dim:(r+1)*dim])
			cs := e.cosSin[r*c.ropeDim : (r+1)*c.ropeDim]
			for k := range half {
				sin, cos := math.Sincos(float64(pos) * e.invFreq[k])
				cs[2*k], cs[2*k+1] = cos, sin
			}
			work += (pos + 1) * c.heads * c.headDim * 2
			r++
		}
	}
	attnParts := 1
	if work >= parallelMACs {
		attnParts = min(T*c.kvHeads, 4*e.pool.n)
	}
	for l := range w.layers {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cpu: step cancelled: %w", err)
		}
		ly := &w.layers[l]
		for r := range T {
			rmsnorm(e.xb[r*dim:(r+1)*dim], e.x[r*dim:(r+1)*dim], ly.attnNorm, c.eps)
		}
		e.matmul(&ly.wq, e.xb, T, e.q)
		e.matmul(&ly.wk, e.xb, T, e.k)
		e.matmul(&ly.wv, e.xb, T, e.v)
		for r := range T {
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
			cs := e.cosSin[r*c.ropeDim : (r+1)*c.ropeDim]
			e.rope(q, c.heads, cs)
			e.rope(k, c.kvHeads, cs)
			s, pos := e.rowSeq[r], e.rowPos[r]
			b := s.blocks[pos/blockTokens]
			copy(e.kv.key(b, l, pos%blockTokens), k)
			copy(e.kv.value(b, l, pos%blockTokens), v)
		}
		e.at.layer, e.at.units, e.at.parts = l, T*c.kvHeads, attnParts
		e.pool.run(&e.at, attnParts)
		e.matmul(&ly.wo, e.att, T, e.xo)
		axpy(1, e.xo[:T*dim], e.x)
		for r := range T {
			rmsnorm(e.xb[r*dim:(r+1)*dim], e.x[r*dim:(r+1)*dim], ly.ffnNorm, c.eps)
		}
		e.matmul(&ly.gate, e.xb, T, e.hb)
		e.matmul(&ly.up, e.xb, T, e.hb2)
		swiglu(e.hb[:T*hid], e.hb2)
		e.matmul(&ly.down, e.hb, T, e.xo)
		axpy(1, e.xo[:T*dim], e.x)
	}
	o, r0 := 0, 0
	for i := range in {
		n := len(in[i].Tokens)
		first := r0 + n - 1
		if in[i].Want&engine.WantAllTokens != 0 {
			first = r0
		}
		for r := first; r < r0+n; r++ {
			e.outRows[o] = r
			rmsnorm(e.hn[o*dim:(o+1)*dim], e.x[r*dim:(r+1)*dim], w.outNorm, c.eps)
			o++
		}
		r0 += n
	}
	e.matmul(&w.output, e.hn, O, e.logits)
	return nil
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
			e.tokens[row] = e.sample(e.logits[row*c.vocab:(row+1)*c.vocab], ip.Sampling, p)
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
