package cpu

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"
)

// TestArenaRecyclesAcrossEngines opens the two tiny models (KV blocks of
// different sizes) one after another on one arena whose memory starts out
// as NaN: every engine reproduces the reference greedy output on memory
// the one before it wrote, and once the first pair has run the arena
// holds no more memory (the later engines took only returned blocks).
func TestArenaRecyclesAcrossEngines(t *testing.T) {
	a := NewArena()
	if err := a.Reserve(context.Background(), 1<<20); err != nil {
		t.Fatal(err)
	}
	for _, s := range a.slabs {
		for i := range s.mem {
			s.mem[i] = float32(math.NaN())
		}
	}
	var held int64
	for round := range 3 {
		for _, tc := range []struct {
			file string
			ref  []int32
		}{
			{"stories260K.gguf", refStories},
			{"llama2xs-model.bin", refLlama2xs},
		} {
			e, err := Open(filepath.Join(modelsDir(t), tc.file), Options{Threads: 2, Arena: a})
			if err != nil {
				t.Fatal(err)
			}
			got := greedy(t, e, 1, []int32{1}, len(tc.ref))
			// A second sequence on the first one's released blocks.
			e.Release(1)
			again := greedy(t, e, 2, []int32{1}, len(tc.ref))
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.ref) || !slices.Equal(again, tc.ref) {
				t.Fatalf("round %d, %s on the arena's memory:\n got %v\n and %v\nwant %v", round, tc.file, got, again, tc.ref)
			}
		}
		switch {
		case round == 0:
			held = a.Held()
			if held < 1<<20 {
				t.Fatalf("the arena holds %d bytes, less than it reserved", held)
			}
		case a.Held() != held:
			t.Fatalf("round %d: the arena grew from %d to %d bytes: the engines did not reuse its blocks", round, held, a.Held())
		}
	}
	for _, s := range a.slabs {
		if s.out != 0 || s.used != 0 {
			t.Fatalf("a slab has %d blocks out (%d floats carved) after every engine closed", s.out, s.used)
		}
	}
}

// TestArenaSlabs checks the carving: a returned block goes to the next
// request of its size; a slab whose blocks are all back is carved anew for
// any size; a block larger than a slab gets a slab of its own.
func TestArenaSlabs(t *testing.T) {
	a := NewArena()
	b1, s1 := a.get(1000)
	b2, s2 := a.get(1000)
	if s1 != s2 || len(b1) != 1000 || cap(b1) != 1000 || &b1[0] == &b2[0] {
		t.Fatalf("two blocks of one slab: slabs %p %p, len %d cap %d", s1, s2, len(b1), cap(b1))
	}
	a.put(b1, s1)
	if b3, _ := a.get(1000); &b3[0] != &b1[0] {
		t.Fatal("a returned block was not handed out again")
	} else {
		a.put(b3, s1)
	}
	a.put(b2, s2)
	if s1.out != 0 || s1.used != 0 {
		t.Fatalf("slab with no block out: out %d, used %d", s1.out, s1.used)
	}
	b4, s4 := a.get(3000)
	if s4 != s1 || &b4[0] != &s1.mem[0] {
		t.Fatal("a whole slab was not carved anew for another size")
	}
	big, sb := a.get(slabFloats + 1)
	if sb == s1 || len(big) != slabFloats+1 || len(a.slabs) != 2 {
		t.Fatalf("a block larger than a slab: %d floats, %d slabs", len(big), len(a.slabs))
	}
	if got, want := a.Held(), int64(4*(2*slabFloats+1)); got != want {
		t.Fatalf("Held = %d, want %d", got, want)
	}
}

// TestArenaReserveCancelled returns the context's error.
func TestArenaReserveCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := NewArena().Reserve(ctx, 1<<30); err == nil {
		t.Fatal("Reserve with a cancelled context returned nil")
	}
}
