package kernels

import (
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
)

// guarded returns a slice of n bytes that ends where an inaccessible page
// begins: a kernel reading past its end faults.
func guarded(t *testing.T, n int) []byte {
	page := syscall.Getpagesize()
	size := (n + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, size+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[size:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return mem[size-n : size : size]
}

// TestKQuantStaysInside runs every level's K-quant kernels on weights and
// activations that end at an inaccessible page, as the last tensor of a
// memory-mapped file may.
func TestKQuantStaysInside(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	const n, rows, cols = 512, 3, 2
	for _, l := range availableLevels() {
		for _, typ := range kQuantTypes {
			k, _ := NewSet(l).For(typ)
			rb, ab := n/256*kTypeOf(typ).bytes, ActQ8K.RowBytes(n)
			w := guarded(t, rows*rb)
			copy(w, randKWeights(rng, typ, n, rows, rb))
			a := guarded(t, cols*ab)
			copy(a, randActQ8K(rng, n, cols, ab))
			got, want := make([]float32, rows*cols), make([]float32, rows*cols)
			k.Mul(n, w, rb, rows, a, ab, cols, got, rows)
			mulKRef(kTypeOf(typ))(n, w, rb, rows, a, ab, cols, want, rows)
			for i := range got {
				_, mag := exactDot(typ, n, w[i%rows*rb:], a[i/rows*ab:])
				if !(math.Abs(float64(got[i]-want[i])) <= fastTol(n/256, mag)) {
					t.Errorf("%v %v: output %d = %v, reference %v", l, typ, i, got[i], want[i])
				}
			}
		}
	}
}

// TestLegacyStaysInside runs every level's kernels for the float and
// 32-value block types on weights and activations that end at an
// inaccessible page, with shapes that take every path of the grouped
// kernels (the fused kernels' whole tiles and their last tile, the panels).
func TestLegacyStaysInside(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for _, l := range availableLevels() {
		for _, typ := range legacyTypes {
			for _, sh := range [][3]int{{32, 1, 64}, {48, 3, 1024}, {35, 2, 96}, {16, 9, 64}, {33, 20, 1056}} {
				rows, cols, n := sh[0], sh[1], sh[2]
				k, _ := NewSet(l).For(typ)
				ref, _ := levelRef(l, typ)
				src, ws := randomWeights(rng, typ, rows, n, false)
				w := guarded(t, len(src))
				copy(w, src)
				asrc, as, _ := randomActRows(rng, k.Act, cols, n)
				a := guarded(t, len(asrc))
				copy(a, asrc)
				got, want := make([]float32, rows*cols), make([]float32, rows*cols)
				k.Mul(n, w, ws, rows, a, as, cols, got, rows)
				ref.Mul(n, w, ws, rows, a, as, cols, want, rows)
				for i := range got {
					if !sameBits(got[i], want[i]) {
						t.Fatalf("%v %v %v: output %d = %v, reference %v", l, typ, sh, i, got[i], want[i])
					}
				}
			}
		}
	}
}
