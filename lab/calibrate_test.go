package lab

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/steptime"
)

// TestCalibrateSimulatedPair calibrates two simulated models whose curves
// are known, under both placements: every grid point is measured, none
// faster than its curve allows (a loaded machine only makes steps longer,
// and the engine makes up for it by at most a tenth of a step),
// the reported fit error is the fit's on those points, and the
// partitioned preset carries an interference factor per model.
func TestCalibrateSimulatedPair(t *testing.T) {
	curves := []steptime.Curve{
		{Knots: []steptime.Knot{{Rows: 1, MS: 1}, {Rows: 8, MS: 2.5}}, PerSeqMS: 0.05, PerRowContextMS: 0.002},
		{Knots: []steptime.Knot{{Rows: 1, MS: 3}, {Rows: 8, MS: 6}}, PerSeqMS: 0.1},
	}
	var ms []config.Model
	for i, c := range curves {
		ms = append(ms, config.Model{Name: []string{"slm", "llm"}[i], Engine: loader.KindSim, Latency: &config.Latency{Curve: &c}})
	}
	o := CalibrateOptions{Batches: []int{1, 2, 4}, Tokens: []int{1, 2}, Contexts: []int{4, 20}, MaxContextBatch: 2, Repeats: 3,
		InterferenceBatches: []int{1, 2}, PromptBatches: []int{1, 4}, PromptTokens: 6}
	presets, err := Calibrate(context.Background(), loader.Builtin(), ms, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(presets) != 2 || presets[0].Placement != sim.Partitioned || presets[1].Placement != sim.TimeShared {
		t.Fatalf("presets %+v", presets)
	}
	for _, p := range presets {
		for i, cal := range p.Calibration {
			// 3 batches × 2 token counts at context 4, decodes of 1 and 2 at
			// 20, prompt-sized steps of 1 and 4 sequences at 4.
			if len(cal.Points) != 10 {
				t.Fatalf("%s model %d: %d points", p.Placement, i, len(cal.Points))
			}
			if last := cal.Points[9]; last.Batch != 4 || last.Extend != 4*5 || last.Context != 4 {
				t.Fatalf("%s model %d: last point %+v, want the prompt-sized step of 4 sequences", p.Placement, i, last)
			}
			if !(cal.MeanOverMedian > 0) {
				t.Fatalf("%s model %d: mean over median %v", p.Placement, i, cal.MeanOverMedian)
			}
			for _, pt := range cal.Points {
				// The simulated engine pays back an earlier late wake-up by
				// shortening a step by up to a tenth, and each point is its
				// median times the grid's mean over median.
				if floor := 0.9 * cal.MeanOverMedian * curves[i].At(pt.Batch, pt.Extend, pt.Context); pt.MS < floor*(1-1e-9) {
					t.Fatalf("%s model %d: point %+v faster than its curve allows (%.3f ms)", p.Placement, i, pt, floor)
				}
			}
			if got := p.Profiles[i].Curve.MaxRelError(cal.Points); math.Abs(got-cal.MaxRelError) > 1e-12 {
				t.Fatalf("reported fit error %v, the fit's %v", cal.MaxRelError, got)
			}
			if err := p.Profiles[i].Curve.Validate(); err != nil {
				t.Fatal(err)
			}
			if p.Placement == sim.Partitioned && (len(cal.Slowdowns) != 2 || !(p.Profiles[i].Interference > 0)) {
				t.Fatalf("partitioned model %d: slowdowns %v, interference %v", i, cal.Slowdowns, p.Profiles[i].Interference)
			}
		}
	}
}

func TestCalibrateRejects(t *testing.T) {
	ms := []config.Model{{Name: "a", Engine: loader.KindSim, Profile: "paper-r2r/slm"}}
	if _, err := Calibrate(context.Background(), nil, nil, CalibrateOptions{}); err == nil {
		t.Error("no models accepted")
	}
	if _, err := Calibrate(context.Background(), nil, ms, CalibrateOptions{Placements: []string{"sideways"}}); err == nil {
		t.Error("unknown placement accepted")
	}
	if _, err := Calibrate(context.Background(), nil, ms, CalibrateOptions{Contexts: []int{1 << 30}, Placements: []string{sim.TimeShared}}); err == nil {
		t.Error("a context beyond the model's accepted")
	}
}

// TestMeanOverMedian pools every repeat's time over its point's median,
// capping each ratio, and scales each point's median by it.
func TestMeanOverMedian(t *testing.T) {
	ms := func(xs ...float64) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x*float64(time.Millisecond)))
		}
		return ds
	}
	// Ratios 1, 1, 1.5 and 0.5, 1, 3 (10 capped at 3): mean 8/6.
	times := [][]time.Duration{ms(10, 10, 15), ms(2, 4, 40)}
	want := 8.0 / 6
	if got := meanOverMedian(times); math.Abs(got-want) > 1e-9 {
		t.Fatalf("mean over median %v, want %v", got, want)
	}
	if got := meanOverMedian(nil); got != 1 {
		t.Fatalf("no repeats: %v, want 1", got)
	}
	pts, spread := gridPoints([]gridPoint{{ctx: 16, batch: 1, tokens: 1}, {ctx: 16, batch: 2, tokens: 3}}, times)
	if spread != meanOverMedian(times) || math.Abs(pts[0].MS-10*want) > 1e-9 || math.Abs(pts[1].MS-4*want) > 1e-9 || pts[1].Extend != 4 {
		t.Fatalf("points %+v, spread %v", pts, spread)
	}
}

func TestMedian(t *testing.T) {
	if median([]float64{3, 1, 2}) != 2 || median([]float64{4, 1, 3, 2}) != 2.5 || median(nil) != 0 {
		t.Fatal("median")
	}
}

// TestMergeCalibrations merges calibrations of the same grid: every point
// is the median of theirs (of two, their mean), the curve is fitted to those,
// and the interference is the median over the batches of the median
// slowdowns. Calibrations of different grids are refused.
func TestMergeCalibrations(t *testing.T) {
	o := CalibrateOptions{Tokens: []int{1}, Contexts: []int{16}}
	cal := func(scale float64, slow []float64) sim.Preset {
		var pts []steptime.Point
		for _, b := range []int{1, 2, 4, 8} {
			pts = append(pts, steptime.Point{Batch: b, Context: 16, MS: scale * (10 + float64(b))})
		}
		return sim.Preset{Models: []string{"m"}, Placement: sim.Partitioned, Profiles: []sim.Profile{{Interference: median(slow)}},
			Calibration: []sim.Calibration{{Threads: 1, Points: pts, Slowdowns: slow, MeanOverMedian: scale}}}
	}
	a, b := cal(1, []float64{1.1, 1.3, 1.2}), cal(1.5, []float64{1.3, 1.1, 1.4})
	m, err := MergeCalibrations(o, a, b)
	if err != nil {
		t.Fatal(err)
	}
	for k, pt := range m.Calibration[0].Points {
		want := 1.25 * (10 + float64(pt.Batch))
		if math.Abs(pt.MS-want) > 1e-12 || math.Abs(m.Profiles[0].Curve.At(pt.Batch, 0, 16)-want) > 1e-6*want {
			t.Fatalf("point %d: %+v, curve %v, want %v ms", k, pt, m.Profiles[0].Curve.At(pt.Batch, 0, 16), want)
		}
	}
	if math.Abs(m.Calibration[0].MeanOverMedian-1.25) > 1e-12 {
		t.Fatalf("mean over median %v, want the mean of 1 and 1.5", m.Calibration[0].MeanOverMedian)
	}
	if a.Calibration[0].Points[0].MS != 11 || math.Abs(m.Profiles[0].Interference-1.2) > 1e-12 {
		t.Fatalf("inputs changed or interference %v (want the median of 1.2, 1.2, 1.3)", m.Profiles[0].Interference)
	}
	// With three, a calibration caught in a stall does not move the points.
	m, err = MergeCalibrations(o, a, cal(3, []float64{2, 2, 2}), cal(1.2, []float64{1.2, 1.2, 1.2}))
	if err != nil {
		t.Fatal(err)
	}
	for k, pt := range m.Calibration[0].Points {
		if want := 1.2 * (10 + float64(pt.Batch)); math.Abs(pt.MS-want) > 1e-12 {
			t.Fatalf("point %d of three: %+v, want the median %v ms", k, pt, want)
		}
	}
	if math.Abs(m.Profiles[0].Interference-1.2) > 1e-12 {
		t.Fatalf("interference of three %v, want 1.2", m.Profiles[0].Interference)
	}
	short := cal(1, []float64{1.1, 1.3, 1.2})
	short.Calibration[0].Points = short.Calibration[0].Points[:3]
	moved := cal(1, []float64{1.1, 1.3, 1.2})
	moved.Calibration[0].Points[2].Batch = 3
	for _, bad := range []sim.Preset{short, moved} {
		if _, err := MergeCalibrations(o, a, bad); err == nil {
			t.Fatal("merged calibrations of different grids")
		}
	}
}
