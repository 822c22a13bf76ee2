package cpu

import (
	"context"
	"errors"
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

// TestKVReserve opens engines with a KV reserve: the memory is in place
// before the first step and the cache's blocks come from it; the reserve
// is capped at the budget, tops up a shared arena rather than adding to
// it, and is refused when negative or cancelled.
func TestKVReserve(t *testing.T) {
	path := filepath.Join(modelsDir(t), "stories260K.gguf")
	e, err := Open(path, Options{Threads: 2, KVReserveBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	a := e.kv.arena
	if a == nil || a.Held() < 1<<20 {
		t.Fatal("an engine opened with a KV reserve holds no reserved memory")
	}
	held := a.Held()
	if got := greedy(t, e, 1, []int32{1}, len(refStories)); !slices.Equal(got, refStories) {
		t.Fatalf("on reserved memory: got %v, want %v", got, refStories)
	}
	if a.Held() != held || len(e.kv.slabs) == 0 || e.kv.slabs[0] != a.slabs[0] {
		t.Fatalf("the cache's blocks did not come from the reserve (held %d, then %d)", held, a.Held())
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	// Capped at the budget: a 1 GiB reserve under a budget of one slab.
	e, err = Open(path, Options{Threads: 1, KVBudgetBytes: 4 * slabFloats, KVReserveBytes: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.kv.arena.Held(); got != 4*slabFloats {
		t.Fatalf("a reserve above the budget holds %d bytes, want the budget, %d", got, 4*slabFloats)
	}
	_ = e.Close()

	// A shared arena that already holds the reserve does not grow.
	shared := NewArena()
	if err := shared.Reserve(context.Background(), 1<<20); err != nil {
		t.Fatal(err)
	}
	before := shared.Held()
	e, err = Open(path, Options{Threads: 1, Arena: shared, KVReserveBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if shared.Held() != before || e.kv.arena != shared {
		t.Fatalf("the shared arena grew from %d to %d bytes for a reserve it held", before, shared.Held())
	}
	_ = e.Close()

	if _, err := Open(path, Options{Threads: 1, KVReserveBytes: -1}); err == nil {
		t.Fatal("a negative KV reserve was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := OpenContext(ctx, path, Options{Threads: 1, KVReserveBytes: 1 << 20}); !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenContext with a cancelled context: %v, want context.Canceled", err)
	}
}
