package console

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// hist is a cumulative histogram over bounds 1, 2, 4, ... of the given
// per-bucket counts.
func hist(per ...uint64) Histogram {
	h := Histogram{}
	for i, c := range per {
		h.Bounds = append(h.Bounds, math.Pow(2, float64(i)))
		h.Count += c
		h.Counts = append(h.Counts, h.Count)
	}
	return h
}

func TestQuantile(t *testing.T) {
	h := hist(0, 10, 0, 10) // 10 in (1,2], 10 in (4,8]
	for _, c := range []struct{ f, want float64 }{{0.25, 1.5}, {0.5, 2}, {0.75, 6}, {1, 8}} {
		if got := quantile(h.Bounds, h.Counts, h.Count, c.f); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("quantile %v = %v, want %v", c.f, got, c.want)
		}
	}
	// Over a window: only what was added since before counts.
	p := percentiles(hist(0, 10, 0, 10), hist(0, 10, 0, 0))
	if p.N != 10 || p.P50 != 6000 {
		t.Fatalf("windowed percentiles %+v, want 10 observations, p50 6 s", p)
	}
	if p := percentiles(Histogram{}, Histogram{}); p.N != 0 || p.P99 != 0 {
		t.Fatalf("empty %+v", p)
	}
}

// state is a deployment of two models after k seconds of steady work: 10
// steps a second of 4 requests each on model 0, one in four handed off.
func state(k uint64) State {
	m := func(name string, i uint64) Model {
		return Model{Name: name, Up: true, Policy: &sched.Policy{B: sched.Table{1, 1, 2}, MaxWait: 50 * time.Millisecond},
			Stats: subserver.Stats{Steps: 10 * k, Stepped: 40 * k, HandedOff: 10 * k * (1 - i), Tokens: 30 * k,
				BusyTime: time.Duration(k) * 100 * time.Millisecond, Runnable: 3, LastBatch: 4}}
	}
	return State{InFlight: 5, Presets: []Preset{{Name: "p", Active: 5, TTFT: hist(k, k), TPOT: hist(k, 0, k),
		Models: []Model{m("slm", 0), m("llm", 1)}}}}
}

func TestFrameRates(t *testing.T) {
	var s sampler
	t0 := time.Unix(1000, 0)
	f := s.frame(state(1), t0)
	if m := f.Presets[0].Models[0]; m.TokS != 0 || m.Runnable != 3 || m.BNow != 2 || m.MaxWaitMS != 50 {
		t.Fatalf("first frame %+v", m)
	}
	f = s.frame(state(3), t0.Add(2*time.Second))
	m := f.Presets[0].Models[0]
	if m.TokS != 30 || m.StepsS != 10 || m.Batch != 4 || m.StepMS != 10 || m.Routed != 0.25 {
		t.Fatalf("rates %+v, want 30 tok/s, 10 steps/s, batch 4, 10 ms, a quarter routed", m)
	}
	if r := f.Presets[0].Models[1].Routed; r != 0 {
		t.Fatalf("llm routed %v", r)
	}
	if p := f.Presets[0].TTFT; p.N != 6 || p.WindowS != 0 {
		t.Fatalf("TTFT before a full window: %+v, want all 6 since the start", p)
	}
	f = s.frame(state(70), t0.Add(70*time.Second))
	if p := f.Presets[0].TTFT; p.N != 140-6 || p.WindowS != 68 {
		t.Fatalf("TTFT over the window: %+v, want the 134 since the frame 68 s ago", p)
	}
	// A restarted sub-server's counters start again: no negative rates.
	f = s.frame(state(1), t0.Add(71*time.Second))
	if m := f.Presets[0].Models[0]; m.TokS != 0 || m.Batch != 0 {
		t.Fatalf("after a restart %+v", m)
	}
}

// BenchmarkFrame is the console's share of one dashboard frame: rates,
// windowed percentiles and the JSON.
func BenchmarkFrame(b *testing.B) {
	var s sampler
	now := time.Now()
	b.ReportAllocs()
	k := uint64(1)
	for b.Loop() {
		k++
		f := s.frame(state(k), now.Add(time.Duration(k)*time.Second))
		if _, err := json.Marshal(f); err != nil {
			b.Fatal(err)
		}
	}
}
