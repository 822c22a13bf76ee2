package cluster

import (
	"testing"
	"time"
)

func TestFreshness(t *testing.T) {
	f := newFreshness(2)
	steps := []struct {
		i        int
		inc, seq uint64
		want     bool
	}{
		{0, 7, 1, true},
		{0, 7, 1, false}, // replayed
		{0, 7, 3, true},
		{0, 7, 2, false}, // out of order
		{1, 7, 1, true},  // another sender may share nothing with the first
		{0, 9, 1, true},  // a restart: 7 is retired
		{0, 7, 4, false}, // the replaced incarnation, even with a new number
		{1, 7, 2, false}, // retired for every sender
		{0, 0, 5, false}, // no incarnation
		{0, 9, 2, true},
	}
	for k, s := range steps {
		if got := f.accept(s.i, s.inc, s.seq); got != s.want {
			t.Fatalf("step %d %+v: accepted %v", k, s, got)
		}
	}
	for inc := uint64(100); inc < 100+2*maxRetired; inc++ {
		f.accept(0, inc, 1)
	}
	if len(f.retired) != maxRetired || len(f.order) != maxRetired {
		t.Fatalf("%d retired incarnations kept, bound %d", len(f.retired), maxRetired)
	}
}

func TestRestartDelay(t *testing.T) {
	const base, limit = 100 * time.Millisecond, time.Second
	d := base
	var got []time.Duration
	for range 6 {
		d = restartDelay(d, false, base, limit)
		got = append(got, d)
	}
	want := []time.Duration{200, 400, 800, 1000, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays without joining %v", got)
		}
	}
	if d = restartDelay(d, true, base, limit); d != base {
		t.Fatalf("after a child that joined: %v, want %v", d, base)
	}
}
