package place

import (
	"slices"
	"testing"
)

// loads builds up replicas of the given scores (KV only); a negative score
// is a replica that is down.
func loads(scores ...int) []Load {
	out := make([]Load, len(scores))
	for i, s := range scores {
		out[i] = Load{Up: s >= 0, KV: max(s, 0)}
	}
	return out
}

func TestScore(t *testing.T) {
	if s := (Load{Up: true, Queued: 2, Runnable: 3, KV: 7}).Score(); s != 12 {
		t.Fatalf("score %d, want queued + runnable + KV = 12", s)
	}
}

// TestEntryGolden pins the power of two choices: r picks two distinct up
// replicas (r mod n, then (r / n) mod (n − 1) among the others) and the
// less loaded wins, the first drawn on a tie; a down replica is never
// drawn.
func TestEntryGolden(t *testing.T) {
	ls := loads(5, 2, -1, 2) // replica 2 is down
	var got []int
	for r := range uint64(6) {
		got = append(got, Entry(ls, r))
	}
	if want := []int{1, 1, 3, 3, 1, 3}; !slices.Equal(got, want) {
		t.Fatalf("entries for r = 0..5: %v, want %v", got, want)
	}
	for r := range uint64(1000) {
		if e := Entry(ls, Mix(7, r, 0)); e != 1 && e != 3 {
			t.Fatalf("r %d: entry %d, want a less loaded up replica (1 or 3)", r, e)
		}
	}
	if e := Entry(loads(-1, -1), 3); e != -1 {
		t.Fatalf("no replica up: %d, want -1", e)
	}
	if e := Entry(loads(-1, 9, -1), 3); e != 1 {
		t.Fatalf("one replica up: %d, want it (1)", e)
	}
}

// TestEntrySpreads: with equal loads every replica is drawn about as often.
func TestEntrySpreads(t *testing.T) {
	ls := loads(4, 4, 4)
	count := make([]int, len(ls))
	for id := range uint64(3000) {
		count[Entry(ls, Mix(1, id, 0))]++
	}
	for i, n := range count {
		if n < 850 || n > 1150 {
			t.Fatalf("replica %d drawn %d times of 3000 (counts %v): want about a third", i, n, count)
		}
	}
}

// TestHandOffGolden pins the hand-off rule.
func TestHandOffGolden(t *testing.T) {
	for _, c := range []struct {
		name   string
		loads  []Load
		pinned int
		r      uint64
		want   int
		out    Outcome
	}{
		{"first visit: least loaded", loads(3, 1, 2), -1, 0, 1, Placed},
		{"first visit: ties by r", loads(1, 5, 1), -1, 1, 2, Placed},
		{"first visit: ties by r (other)", loads(1, 5, 1), -1, 2, 0, Placed},
		{"pinned and not overloaded", loads(20, 2, 9), 2, 0, 2, Affine},
		{"pinned at the bound stays", loads(20, 2, 2*2+DefaultSlack), 2, 0, 2, Affine},
		{"pinned past the bound moves", loads(20, 2, 2*2+DefaultSlack+1), 2, 0, 1, Replaced},
		{"pinned down moves", loads(7, 3, -1), 2, 0, 1, Replaced},
		{"pinned beyond the replicas moves", loads(7, 3), 5, 0, 1, Replaced},
		{"none up", loads(-1, -1), 0, 0, -1, NoReplica},
	} {
		got, out := HandOff(c.loads, c.pinned, c.r, DefaultSlack)
		if got != c.want || out != c.out {
			t.Errorf("%s: HandOff = %d, %v; want %d, %v", c.name, got, out, c.want, c.out)
		}
	}
}

func TestOverloaded(t *testing.T) {
	least := Load{Up: true, Runnable: 3, KV: 2} // score 5
	if Overloaded(Load{Up: true, KV: 2*5 + 4}, least, 4) {
		t.Fatal("at the bound (2·5 + 4): overloaded, want not")
	}
	if !Overloaded(Load{Up: true, Queued: 1, KV: 2*5 + 4}, least, 4) {
		t.Fatal("one past the bound: not overloaded, want overloaded")
	}
}

// TestMix pins the random numbers placements draw: the same inputs give the
// same number on every machine and run, and each input changes it.
func TestMix(t *testing.T) {
	if a, b := Mix(1, 2, 3), Mix(1, 2, 3); a != b || a != 0x4e5086cc3a5f2c17 {
		t.Fatalf("Mix(1, 2, 3) = %#x, %#x; want 0x4e5086cc3a5f2c17 twice", a, b)
	}
	seen := map[uint64]bool{}
	for _, x := range [][3]uint64{{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 2, 3}, {3, 2, 1}} {
		v := Mix(x[0], x[1], x[2])
		if seen[v] {
			t.Fatalf("Mix%v = %#x repeats another input's", x, v)
		}
		seen[v] = true
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{NoReplica: "none", Placed: "placed", Affine: "affine", Replaced: "replaced"} {
		if o.String() != want {
			t.Errorf("%d: %q, want %q", o, o.String(), want)
		}
	}
}
