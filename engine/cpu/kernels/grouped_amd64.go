package kernels

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/tokenrouter/tokenrouter/gguf"
)

//go:noescape
func gMicro(nb int, panel *byte, dw, mw *float32, act *byte, shift int, acc *float32, pf uintptr, pfLines int)

//go:noescape
func gMicroMin(nb int, panel *byte, dw, mw *float32, act *byte, shift int, acc *float32, pf uintptr, pfLines int)

//go:noescape
func gTranspose(acc *float32, out *float32, outStride, rowMask, cols int)

//go:noescape
func gPanelQ8_0(w *byte, wStride, nb int, panel *byte, h *uint16)

//go:noescape
func gPanelQ4_0(w *byte, wStride, nb int, panel *byte, h *uint16)

//go:noescape
func gPanelQ4_1(w *byte, wStride, nb int, panel *byte, h *uint16)

//go:noescape
func gPanelQ5_0(w *byte, wStride, nb int, panel *byte, h *uint16)

//go:noescape
func gPanelQ5_1(w *byte, wStride, nb int, panel *byte, h *uint16)

//go:noescape
func gMicro1(nb int, panel *byte, dw, mw *float32, act *byte, lane, shift int, acc *float32)

//go:noescape
func gMicro1Min(nb int, panel *byte, dw, mw *float32, act *byte, lane, shift int, acc *float32)

//go:noescape
func gHalves(h *uint16, f *float32, n int)

//go:noescape
func gQuantize(x *float32, nb int, dst *byte, lane int)

// gKernel is the AVX-512 grouped kernel of one weight type. The assembly
// is called directly (not through function values), so that the scratch
// it is given stays on the stack.
type gKernel struct {
	t     gguf.TensorType
	bb    int // bytes per block
	shift int // log2 of the quant offset; 32 (no offset) for types with a min
	min   bool
	// noGather selects the fused kernels that load the block scales
	// without a gather (Q8_0 only: the other types' fused kernels take
	// them from the row loads).
	noGather bool
}

// dotReach is how far past a block's start the fused kernels read: 32 bytes
// from the start for the 4- and 5-bit types (their scales and quants in one
// load), the block itself for Q8_0.
func (k gKernel) dotReach() int {
	if k.t == gguf.Q8_0 {
		return k.bb
	}
	return 32
}

// panel decodes 16 rows of nb blocks at w into s.
func (k gKernel) panel(w *byte, wStride, nb int, s *gScratch) {
	switch k.t {
	case gguf.Q8_0:
		gPanelQ8_0(w, wStride, nb, &s.panel[0], &s.h[0])
	case gguf.Q4_0:
		gPanelQ4_0(w, wStride, nb, &s.panel[0], &s.h[0])
	case gguf.Q4_1:
		gPanelQ4_1(w, wStride, nb, &s.panel[0], &s.h[0])
	case gguf.Q5_0:
		gPanelQ5_0(w, wStride, nb, &s.panel[0], &s.h[0])
	case gguf.Q5_1:
		gPanelQ5_1(w, wStride, nb, &s.panel[0], &s.h[0])
	}
	gHalves(&s.h[0], &s.dw[0], nb*groupRows)
	if k.min {
		gHalves(&s.h[gChunk*groupRows], &s.mw[0], nb*groupRows)
	}
}

// micro multiplies the panel (nb blocks) by the group at act, whose first
// cols rows are in use, accumulating into acc: with the 16-column
// micro-kernel (acc[r·16+c]) for at least gWideCols columns, else column by
// column (acc[c·16+r]). The 16-column micro-kernel prefetches pfLines cache
// lines per block from pf on (the next panel's weights: that kernel takes
// long enough for them to arrive).
func (k gKernel) micro(nb int, s *gScratch, act *byte, cols int, acc []float32, pf uintptr, pfLines int) {
	switch {
	case cols >= gWideCols && k.min:
		gMicroMin(nb, &s.panel[0], &s.dw[0], &s.mw[0], act, k.shift, &acc[0], pf, pfLines)
	case cols >= gWideCols:
		gMicro(nb, &s.panel[0], &s.dw[0], &s.mw[0], act, k.shift, &acc[0], pf, pfLines)
	case k.min:
		for c := range cols {
			gMicro1Min(nb, &s.panel[0], &s.dw[0], &s.mw[0], act, c, k.shift, &acc[c*groupRows])
		}
	default:
		for c := range cols {
			gMicro1(nb, &s.panel[0], &s.dw[0], &s.mw[0], act, c, k.shift, &acc[c*groupRows])
		}
	}
}

// groupedFast returns the AVX-512 grouped kernels, or nil if the CPU lacks
// VNNI; with noGather, only Q8_0's, whose fused kernels then load the
// block scales without a gather (the level AVX512NoGather).
func groupedFast(noGather bool) map[gguf.TensorType]Kernel {
	x := cpu.X86
	if !(x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI) {
		return nil
	}
	ks := map[gguf.TensorType]gKernel{
		gguf.Q8_0: {t: gguf.Q8_0, bb: 34, shift: 7},
		gguf.Q4_0: {t: gguf.Q4_0, bb: 18, shift: 3},
		gguf.Q5_0: {t: gguf.Q5_0, bb: 22, shift: 4},
		gguf.Q4_1: {t: gguf.Q4_1, bb: 20, shift: 32, min: true},
		gguf.Q5_1: {t: gguf.Q5_1, bb: 24, shift: 32, min: true},
	}
	if noGather {
		ks = map[gguf.TensorType]gKernel{gguf.Q8_0: {t: gguf.Q8_0, bb: 34, shift: 7, noGather: true}}
	}
	m := make(map[gguf.TensorType]Kernel, len(ks))
	for t, k := range ks {
		m[t] = Kernel{Act: ActQ8G, Mul: k.mul, Few: k.few}
	}
	return m
}

// gScratch is a grouped kernel's working memory (on the stack).
type gScratch struct {
	panel  [gChunk * groupRows * 32]byte
	dw, mw [gChunk * groupRows]float32
	h      [2 * gChunk * groupRows]uint16 // scale halves, then min halves
	acc    [gMaxGroups * groupRows * groupRows]float32
	pad    [groupRows * gChunk * gMaxBlockBytes]byte // a last tile of fewer than 16 rows
}

// mul implements MulFunc. Calls of up to gDotCols columns run the fused
// kernels; others go panel by panel: for each 16 weight rows, for each
// chunk of gChunk blocks, the panel is decoded once and multiplied by every
// column group (up to gMaxGroups at a time), accumulating across chunks in
// order.
func (k gKernel) mul(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	nb := n / 32
	groups := (cols + groupRows - 1) / groupRows
	if n%32 != 0 || wStride < 0 || aStride < 0 || outStride < 0 ||
		(rows-1)*wStride+nb*k.bb > len(w) || (groups-1)*aStride+nb*gRecBytes > len(a) || (cols-1)*outStride+rows > len(out) {
		panic(fmt.Sprintf("kernels: grouped kernel: operands shorter than the shape (n=%d rows=%d cols=%d)", n, rows, cols))
	}
	if nb == 0 {
		for c := range cols {
			clear(out[c*outStride : c*outStride+rows])
		}
		return
	}
	switch {
	case cols <= gDotCols:
		k.dot(n, w, wStride, rows, a, nil, aStride, cols, out, outStride)
	case cols <= 2*gDotCols:
		k.dotTwice(n, w, wStride, rows, a, aStride, cols, out, outStride)
	default:
		k.mulPanels(n, w, wStride, rows, a, aStride, cols, out, outStride)
	}
}

// few implements FewFunc: mul's fused kernels over the narrow records.
func (k gKernel) few(n int, w []byte, wStride, rows int, a, narrow []byte, aStride, cols int, out []float32, outStride int) {
	if rows <= 0 || cols <= 0 {
		return
	}
	if cols > FewCols || len(narrow) < NarrowBytes(n, cols) {
		panic(fmt.Sprintf("kernels: grouped kernel: %d columns, %d narrow bytes for n=%d", cols, len(narrow), n))
	}
	nb := n / 32
	if n%32 != 0 || wStride < 0 || aStride < 0 || outStride < 0 ||
		(rows-1)*wStride+nb*k.bb > len(w) || nb*gRecBytes > len(a) || (cols-1)*outStride+rows > len(out) {
		panic(fmt.Sprintf("kernels: grouped kernel: operands shorter than the shape (n=%d rows=%d cols=%d)", n, rows, cols))
	}
	if nb == 0 {
		for c := range cols {
			clear(out[c*outStride : c*outStride+rows])
		}
		return
	}
	k.dot(n, w, wStride, rows, a, narrow, aStride, cols, out, outStride)
}

// dotTwice runs the fused kernels twice over each chunk of rows small
// enough to stay in the core's cache, for columns 0-3 and then the rest:
// the second pass reads the weights from the cache, so five to eight
// columns cost one pass over memory plus the second pass's arithmetic,
// instead of a whole panel decode sized for sixteen.
func (k gKernel) dotTwice(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
	chunk := max(groupRows, gTwiceBytes/max(wStride, 1)/groupRows*groupRows)
	for r0 := 0; r0 < rows; r0 += chunk {
		nr := min(chunk, rows-r0)
		k.dot(n, w[r0*wStride:], wStride, nr, a, nil, aStride, gDotCols, out[r0:], outStride)
		// columns 4..7 are the next four dwords of every block record
		k.dot(n, w[r0*wStride:], wStride, nr, a[4*gDotCols:], nil, aStride, cols-gDotCols, out[gDotCols*outStride+r0:], outStride)
	}
}

// dot runs the fused kernel over the whole tiles of 16 rows, then the last
// rows with dotTail. With narrow (NarrowQ8G of a's first group) the
// kernels read the narrow records; a is still needed for a last tile too
// long for dotTail's pad, which goes to the panel kernels.
func (k gKernel) dot(n int, w []byte, wStride, rows int, a, narrow []byte, aStride, cols int, out []float32, outStride int) {
	nb := n / 32
	full := rows / groupRows
	// a tile whose last read would pass the end of w's memory (its
	// capacity) goes to dotTail, which copies it
	for full > 0 && (full*groupRows-1)*wStride+(nb-1)*k.bb+k.dotReach() > cap(w) {
		full--
	}
	act := &a[0]
	if narrow != nil {
		act = &narrow[0]
	}
	for t0 := 0; t0 < full; t0 += gDotTiles {
		nt := min(gDotTiles, full-t0)
		k.dotCall(&w[t0*groupRows*wStride], wStride, nt, nb, act, &out[t0*groupRows], outStride, cols, narrow != nil)
	}
	for r0 := full * groupRows; r0 < rows; r0 += groupRows {
		k.dotTail(n, w[r0*wStride:], wStride, min(groupRows, rows-r0), a, narrow, aStride, cols, out[r0:], outStride)
	}
}

// dotTail runs the fused kernel on up to 16 rows copied into a padded tile
// on the stack, or, if they are too long for it, the panel kernels.
// (A function of its own, so that other calls do not clear the pad.)
func (k gKernel) dotTail(n int, w []byte, wStride, rows int, a, narrow []byte, aStride, cols int, out []float32, outStride int) {
	nb := n / 32
	rb := nb * k.bb
	var pad [groupRows * gChunk * gMaxBlockBytes]byte
	var acc [gDotCols * groupRows]float32
	if groupRows*rb-k.bb+k.dotReach() > len(pad) {
		k.mulPanels(n, w, wStride, rows, a, aStride, cols, out, outStride)
		return
	}
	for r := range rows {
		copy(pad[r*rb:(r+1)*rb], w[r*wStride:])
	}
	act := &a[0]
	if narrow != nil {
		act = &narrow[0]
	}
	k.dotCall(&pad[0], rb, 1, nb, act, &acc[0], groupRows, cols, narrow != nil)
	for c := range cols {
		copy(out[c*outStride:c*outStride+rows], acc[c*groupRows:])
	}
}

// mulPanels runs the panel kernels (see mul).
func (k gKernel) mulPanels(n int, w []byte, wStride, rows int, a []byte, aStride, cols int, out []float32, outStride int) {
	var scratch gScratch
	s := &scratch
	nb := n / 32
	groups := (cols + groupRows - 1) / groupRows
	for g0 := 0; g0 < groups; g0 += gMaxGroups {
		ng := min(gMaxGroups, groups-g0)
		for r0 := 0; r0 < rows; r0 += groupRows {
			nr := min(groupRows, rows-r0)
			clear(s.acc[:ng*groupRows*groupRows])
			for b0 := 0; b0 < nb; b0 += gChunk {
				nbc := min(gChunk, nb-b0)
				wp, ws := &w[r0*wStride+b0*k.bb], wStride
				if nr < groupRows {
					rb := nbc * k.bb
					for r := range nr {
						copy(s.pad[r*rb:(r+1)*rb], w[(r0+r)*wStride+b0*k.bb:])
					}
					wp, ws = &s.pad[0], rb
				}
				k.panel(wp, ws, nbc, s)
				// the next panel: the same blocks of the next 16 rows
				pf := uintptr(unsafe.Pointer(wp)) + uintptr(groupRows*wStride)
				pfLines := (groupRows*k.bb + 63) / 64
				for g := range ng {
					c0 := (g0 + g) * groupRows
					k.micro(nbc, s, &a[(g0+g)*aStride+b0*gRecBytes], min(groupRows, cols-c0), s.acc[g*groupRows*groupRows:], pf, pfLines)
					pfLines = 0
				}
			}
			for g := range ng {
				c0 := (g0 + g) * groupRows
				gc := min(groupRows, cols-c0)
				acc := s.acc[g*groupRows*groupRows:]
				if gc >= gWideCols {
					gTranspose(&acc[0], &out[c0*outStride+r0], outStride, 1<<nr-1, gc)
					continue
				}
				for c := range gc {
					copy(out[(c0+c)*outStride+r0:(c0+c)*outStride+r0+nr], acc[c*groupRows:])
				}
			}
		}
	}
}

// quantizeLaneFast is quantizeLane, in assembly where the CPU has AVX-512.
func quantizeLaneFast(dst []byte, lane int, x []float32) {
	nb := len(x) / 32
	if nb == 0 {
		return
	}
	if !cpu.X86.HasAVX512BW || !cpu.X86.HasAVX512VL {
		quantizeLane(dst, lane, x)
		return
	}
	if len(dst) < nb*gRecBytes || lane < 0 || lane >= groupRows {
		panic("kernels: quantizeLaneFast: destination shorter than the row")
	}
	gQuantize(&x[0], nb, &dst[0], lane)
}
