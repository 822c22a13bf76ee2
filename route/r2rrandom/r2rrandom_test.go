package r2rrandom

import (
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
)

func spec(kv ...string) route.Spec {
	s := route.Spec{Models: []string{"s", "l"}, Params: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.Params[kv[i]] = kv[i+1]
	}
	return s
}

func TestSchedule(t *testing.T) {
	a, err := New(spec("p", "0.35", "p-after", "0.1", "switch-at", "20s"))
	if err != nil {
		t.Fatal(err)
	}
	alg := a.(*Algorithm)
	if got := alg.Prob(alg.Start.Add(19 * time.Second)); got != 0.35 {
		t.Fatalf("before the switch: p = %v", got)
	}
	if got := alg.Prob(alg.Start.Add(20 * time.Second)); got != 0.1 {
		t.Fatalf("after the switch: p = %v", got)
	}
	b, err := New(spec("p", "0.2"))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.(*Algorithm).Prob(time.Now().Add(time.Hour)); got != 0.2 {
		t.Fatalf("no schedule: p = %v", got)
	}
}

func TestScheduleRoutes(t *testing.T) {
	a, err := New(spec("p", "1", "p-after", "0", "switch-at", "1ns"))
	if err != nil {
		t.Fatal(err)
	}
	alg := a.(*Algorithm)
	testkit.Eventually(t, 5*time.Second, func() bool { return alg.Prob(time.Now()) == 0 }, "p = %v, not switched to 0", alg.P)
	reqs := []*route.Request{{ID: 1, Tokens: []int32{1, 2}}, {ID: 2, Tokens: []int32{1}}}
	d := make([]route.Decision, 2)
	a.Route(&route.Step{Model: 0, Requests: reqs}, d)
	for i, x := range d {
		if x.Next != 0 {
			t.Fatalf("request %d routed to %d after switching to p=0", i, x.Next)
		}
	}
}

func TestBadParams(t *testing.T) {
	for _, s := range []route.Spec{
		spec("p", "1.5"),
		spec("p-after", "0.1"),
		spec("switch-at", "1s"),
		spec("p-after", "2", "switch-at", "1s"),
		spec("p-after", "0.1", "switch-at", "soon"),
		spec("p-after", "0.1", "switch-at", "-1s"),
		{Models: []string{"only"}},
	} {
		if _, err := New(s); err == nil {
			t.Fatalf("%+v: no error", s.Params)
		}
	}
}

func TestProcess(t *testing.T) {
	a, err := New(spec("p", "0.25"))
	if err != nil {
		t.Fatal(err)
	}
	p, c, ok := a.(route.Predictable).Process()
	if !ok || p[0][1] != 0.25 || p[0][0] != 0.75 || p[1][0] != 1 || c[0][0] != 1 || c[1][0] != 1 || c[0][1] != 0 {
		t.Fatalf("P %v C %v ok %v", p, c, ok)
	}
	s, err := New(spec("p", "0.35", "p-after", "0.1", "switch-at", "20s"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.(route.Predictable).Process(); ok {
		t.Fatal("a scheduled change of p is not a stationary process")
	}
}
