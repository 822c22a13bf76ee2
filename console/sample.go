package console

import (
	"time"
)

// sample is a State at a time.
type sample struct {
	at time.Time
	st State
}

// sampler turns successive States into Frames: rates over the interval
// since the previous sample and percentiles over the last Window.
type sampler struct {
	prev    *sample
	history []sample // oldest first; the first is at least Window old once there is one
}

// frame returns the Frame of st sampled at now and remembers it.
func (s *sampler) frame(st State, now time.Time) Frame {
	f := Frame{T: now.UnixMilli(), Draining: st.Draining, InFlight: st.InFlight, Presets: make([]PresetFrame, len(st.Presets))}
	s.history = append(s.history, sample{at: now, st: st})
	k := 0
	for k+1 < len(s.history) && now.Sub(s.history[k+1].at) >= Window {
		k++
	}
	s.history = s.history[k:]
	base := s.history[0].st
	var prev *State
	var dt float64
	if s.prev != nil {
		prev, dt = &s.prev.st, now.Sub(s.prev.at).Seconds()
	}
	for i, p := range st.Presets {
		pf := PresetFrame{Name: p.Name, Algorithm: p.Algorithm, Active: p.Active, Models: make([]ModelFrame, len(p.Models))}
		var was *Preset
		if i < len(base.Presets) && base.Presets[i].Name == p.Name && now.Sub(s.history[0].at) >= Window {
			was = &base.Presets[i]
		}
		pf.TTFT = percentiles(p.TTFT, histOf(was, func(p *Preset) Histogram { return p.TTFT }))
		pf.TPOT = percentiles(p.TPOT, histOf(was, func(p *Preset) Histogram { return p.TPOT }))
		if was != nil {
			pf.TTFT.WindowS, pf.TPOT.WindowS = now.Sub(s.history[0].at).Seconds(), now.Sub(s.history[0].at).Seconds()
		}
		for j, m := range p.Models {
			var before *Model
			if prev != nil && i < len(prev.Presets) && j < len(prev.Presets[i].Models) {
				before = &prev.Presets[i].Models[j]
			}
			pf.Models[j] = modelFrame(m, before, dt, p.Active)
		}
		f.Presets[i] = pf
	}
	s.prev = &s.history[len(s.history)-1]
	return f
}

// histOf returns get(p), or an empty histogram when p is nil.
func histOf(p *Preset, get func(*Preset) Histogram) Histogram {
	if p == nil {
		return Histogram{}
	}
	return get(p)
}

// modelFrame is m's frame; before is its previous state (nil in the first
// frame) dt seconds ago; active is its preset's active count.
func modelFrame(m Model, before *Model, dt float64, active int) ModelFrame {
	st := m.Stats
	mf := ModelFrame{Name: m.Name, Simulated: m.Simulated, Up: m.Up, Restarts: m.Restarts,
		Runnable: st.Runnable, Pending: st.Pending, Known: st.Records, KV: st.KVSequences,
		LastBatch: st.LastBatch, LastStepMS: ms(st.LastStep)}
	if p := m.Policy; p != nil {
		mf.B, mf.BNow, mf.MaxWaitMS = p.B, p.B.At(active), ms(p.MaxWait)
		if mf.B == nil {
			mf.B = []int{}
		}
		if !m.PolicySince.IsZero() {
			mf.BSince = m.PolicySince.UnixMilli()
		}
	}
	if before == nil || dt <= 0 {
		return mf
	}
	b := before.Stats
	steps := delta(st.Steps, b.Steps)
	stepped := delta(st.Stepped, b.Stepped)
	mf.TokS = float64(delta(st.Tokens, b.Tokens)) / dt
	mf.StepsS = float64(steps) / dt
	if steps > 0 {
		mf.Batch = float64(stepped) / float64(steps)
		mf.StepMS = ms(st.BusyTime-b.BusyTime) / float64(steps)
	}
	if stepped > 0 {
		mf.Routed = float64(delta(st.HandedOff, b.HandedOff)) / float64(stepped)
	}
	return mf
}

// delta is now - before for a counter, 0 when it went back (a restarted
// sub-server starts from zero).
func delta(now, before uint64) uint64 {
	if now < before {
		return 0
	}
	return now - before
}

// ms converts a duration to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentiles estimates the 50th, 90th and 99th percentiles (ms) of the
// observations in now and not in before (both cumulative, same buckets;
// an empty before means since the start).
func percentiles(now, before Histogram) Percentiles {
	counts := make([]uint64, len(now.Counts))
	for i, c := range now.Counts {
		counts[i] = c
		if len(before.Counts) == len(now.Counts) {
			counts[i] = delta(c, before.Counts[i])
		}
	}
	n := delta(now.Count, before.Count)
	if len(before.Counts) != len(now.Counts) {
		n = now.Count
	}
	p := Percentiles{N: n}
	if n == 0 || len(now.Bounds) != len(counts) {
		return p
	}
	q := func(f float64) float64 { return 1000 * quantile(now.Bounds, counts, n, f) }
	p.P50, p.P90, p.P99 = q(0.5), q(0.9), q(0.99)
	return p
}

// quantile is the f-quantile of n observations in cumulative buckets,
// interpolated linearly within its bucket (from 0 for the first); past the
// last bound it is the last bound.
func quantile(bounds []float64, cum []uint64, n uint64, f float64) float64 {
	rank := f * float64(n)
	lo, below := 0.0, uint64(0)
	for i, b := range bounds {
		if float64(cum[i]) >= rank {
			in := cum[i] - below
			if in == 0 {
				return b
			}
			return lo + (b-lo)*(rank-float64(below))/float64(in)
		}
		lo, below = b, cum[i]
	}
	return bounds[len(bounds)-1]
}
