package sched

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// TestDecideGolden pins the delayed-batching rule: the runtime, the
// throughput model's simulator and these cases all go through Decide.
func TestDecideGolden(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name string
		p    Policy
		s    State
		now  time.Duration
		want Decision
	}{
		{"nothing runnable", Policy{B: Static(1)}, State{Active: 4}, 0, Decision{}},
		{"B=1 launches at once", Policy{B: Static(1)}, State{Runnable: 1, Active: 4}, 0, Decision{Launch: true}},
		{"below B waits without guard", Policy{B: Static(3)}, State{Runnable: 2, Active: 4}, 0, Decision{}},
		{"at B launches", Policy{B: Static(3)}, State{Runnable: 3, Active: 4}, 0, Decision{Launch: true}},
		{"above B launches", Policy{B: Static(3)}, State{Runnable: 4, Active: 4}, 0, Decision{Launch: true}},
		{"B clamps to active count", Policy{B: Static(3)}, State{Runnable: 2, Active: 2}, 0, Decision{Launch: true}},
		{"guard sets a wake-up", Policy{B: Static(3), MaxWait: 5 * ms}, State{Runnable: 1, Active: 4, ReadySince: 10 * ms}, 12 * ms,
			Decision{Wake: true, WakeAt: 15 * ms}},
		{"guard fires at its deadline", Policy{B: Static(3), MaxWait: 5 * ms}, State{Runnable: 1, Active: 4, ReadySince: 10 * ms}, 15 * ms,
			Decision{Launch: true}},
		{"table by active count", Policy{B: Table{1, 1, 2, 3}}, State{Runnable: 2, Active: 3}, 0, Decision{}},
		{"table beyond its end uses the last entry", Policy{B: Table{1, 1, 2}}, State{Runnable: 2, Active: 9}, 0, Decision{Launch: true}},
	} {
		if got := Decide(c.p, c.s, c.now); got != c.want {
			t.Errorf("%s: Decide = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestParseStaticAndFeasible(t *testing.T) {
	tabs, err := ParseStatic("1, 3")
	if err != nil || len(tabs) != 2 || tabs[0].At(4) != 1 || tabs[1].At(4) != 3 {
		t.Fatalf("ParseStatic = %v, %v", tabs, err)
	}
	for _, bad := range []string{"", "1,x", "0,1", "-2"} {
		if _, err := ParseStatic(bad); err == nil {
			t.Errorf("ParseStatic(%q) accepted", bad)
		}
	}
	if !Feasible([]int{1, 3}, 3) || Feasible([]int{1, 4}, 3) || Feasible([]int{2, 2}, 2) {
		t.Fatal("feasibility is Σ(B_i−1) < N")
	}
}

func TestPolicyJSON(t *testing.T) {
	p := Policy{B: Table{1, 1, 2, 3}, MaxWait: 50 * time.Millisecond}
	b, err := json.Marshal(p)
	if err != nil || string(b) != `{"b":[1,1,2,3],"max_wait":"50ms"}` {
		t.Fatalf("%s, %v", b, err)
	}
	var back Policy
	if err := json.Unmarshal(b, &back); err != nil || !slices.Equal(back.B, p.B) || back.MaxWait != p.MaxWait {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, bad := range []string{`{"b":[]}`, `{"b":[0]}`, `{"b":[1],"max_wait":"-1s"}`, `{"b":[1],"max_wait":"soon"}`, `{"b":[1],"lookahead":true}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestLaunchPolicy(t *testing.T) {
	l := Launch{Tables: []Table{Static(1), {1, 2, 3}}, MaxWait: time.Millisecond}
	if p := l.Policy(1); !slices.Equal(p.B, Table{1, 2, 3}) || p.MaxWait != time.Millisecond {
		t.Fatalf("static: %+v", p)
	}
	l.Auto = true
	if p := l.Policy(1); !slices.Equal(p.B, Static(1)) || p.MaxWait != time.Millisecond {
		t.Fatalf("auto starts at B = 1: %+v", p)
	}
	if p := (Launch{}).Policy(3); !slices.Equal(p.B, Static(1)) || p.MaxWait != 0 {
		t.Fatalf("zero value: %+v", p)
	}
}
