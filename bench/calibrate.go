package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
)

// Measurement is one calibration point: a step over Batch sequences that
// appended Tokens tokens in total took Latency (median of repeats).
type Measurement struct {
	// Batch is the number of sequences in the step.
	Batch int `json:"batch"`
	// Tokens is the number of tokens appended in total.
	Tokens int `json:"tokens"`
	// Latency is the median step time.
	Latency time.Duration `json:"latency_ns"`
}

// CalibrateOptions choose the calibration grid.
type CalibrateOptions struct {
	// Batches are the decode batch sizes measured (default 1,2,4,8,16).
	Batches []int
	// Extends are the single-sequence extend lengths measured (default
	// 8,32,64,128).
	Extends []int
	// Repeats per point (default 7; the median counts).
	Repeats int
	// Context is the number of tokens each decoding sequence already holds
	// (default 32).
	Context int
}

// Calibrate measures e's step latency against batch size (decodes) and
// extend length, and fits the sim engine's profile
// Base + PerSeq·b + PerToken·(t − b) by least squares, so the real model's
// timing can be studied at any concurrency with the simulated engine.
func Calibrate(ctx context.Context, e engine.Engine, o CalibrateOptions) (sim.Profile, []Measurement, error) {
	if len(o.Batches) == 0 {
		o.Batches = []int{1, 2, 4, 8, 16}
	}
	if len(o.Extends) == 0 {
		o.Extends = []int{8, 32, 64, 128}
	}
	if o.Repeats <= 0 {
		o.Repeats = 7
	}
	if o.Context <= 0 {
		o.Context = 32
	}
	vocab := max(e.Info().VocabSize, 4)
	tok := func(i int) int32 { return int32(3 + i%(vocab-3)) }
	var ms []Measurement
	var next engine.SeqID = 1 << 40
	var in []engine.Input
	out := make([]engine.Output, 0)
	measure := func(prep func() ([]engine.Input, int)) (time.Duration, int, error) {
		var ds []time.Duration
		tokens := 0
		for range o.Repeats {
			batch, t := prep()
			out = append(out[:0], make([]engine.Output, len(batch))...)
			t0 := time.Now()
			if err := e.Step(ctx, batch, out); err != nil {
				return 0, 0, fmt.Errorf("bench: calibrate: %w", err)
			}
			ds = append(ds, time.Since(t0))
			tokens = t
			for _, x := range batch {
				e.Release(x.Seq)
			}
		}
		return Samples(ds).Quantile(0.5), tokens, nil
	}
	for _, b := range o.Batches {
		d, t, err := measure(func() ([]engine.Input, int) {
			in = in[:0]
			for i := range b {
				next++
				prompt := make([]int32, o.Context)
				for j := range prompt {
					prompt[j] = tok(i*7 + j)
				}
				if err := e.Step(ctx, []engine.Input{{Seq: next, Tokens: prompt}}, make([]engine.Output, 1)); err != nil {
					return nil, 0
				}
				in = append(in, engine.Input{Seq: next, Tokens: []int32{tok(i)}})
			}
			return in, b
		})
		if err != nil {
			return sim.Profile{}, nil, err
		}
		ms = append(ms, Measurement{Batch: b, Tokens: t, Latency: d})
	}
	for _, n := range o.Extends {
		d, t, err := measure(func() ([]engine.Input, int) {
			next++
			toks := make([]int32, n)
			for j := range toks {
				toks[j] = tok(j)
			}
			return []engine.Input{{Seq: next, Tokens: toks}}, n
		})
		if err != nil {
			return sim.Profile{}, nil, err
		}
		ms = append(ms, Measurement{Batch: 1, Tokens: t, Latency: d})
	}
	p, err := FitProfile(ms)
	return p, ms, err
}

// FitProfile fits Base + PerSeq·b + PerToken·(t − b) to measurements by
// least squares; negative coefficients are clamped to zero.
func FitProfile(ms []Measurement) (sim.Profile, error) {
	if len(ms) < 3 {
		return sim.Profile{}, errors.New("bench: need at least 3 measurements to fit a profile")
	}
	a := mat.NewDense(len(ms), 3, nil)
	y := mat.NewVecDense(len(ms), nil)
	for i, m := range ms {
		a.Set(i, 0, 1)
		a.Set(i, 1, float64(m.Batch))
		a.Set(i, 2, float64(max(m.Tokens-m.Batch, 0)))
		y.SetVec(i, float64(m.Latency))
	}
	var x mat.VecDense
	if err := x.SolveVec(a, y); err != nil {
		return sim.Profile{}, fmt.Errorf("bench: fit profile: %w", err)
	}
	c := func(i int) time.Duration { return time.Duration(max(x.AtVec(i), 0)) }
	return sim.Profile{Base: c(0), PerSeq: c(1), PerToken: c(2)}, nil
}
