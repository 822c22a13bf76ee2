package steptime

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*max(1, math.Abs(b)) }

func TestConstantIgnoresTheBatch(t *testing.T) {
	c := Constant(27.9)
	for _, b := range []int{1, 2, 7, 64} {
		if got := c.At(b, float64(3*b), 500); got != 27.9 {
			t.Fatalf("At(%d) = %v", b, got)
		}
	}
	if !c.Constant() || c.Duration(4, 0, 0) != 27900*time.Microsecond {
		t.Fatalf("constant %v, duration %v", c.Constant(), c.Duration(4, 0, 0))
	}
	if Linear(6, 0.5, 0).Constant() || Linear(6, 0, 0.1).Constant() {
		t.Fatal("a batch-dependent curve reports constant")
	}
}

// TestLinear checks the older base + perSeq·b + perToken·e form for a
// per-token cost below, equal to and above the per-sequence one.
func TestLinear(t *testing.T) {
	for _, k := range [][3]float64{{6, 0.05, 0.005}, {2, 0.3, 0.3}, {1, 0.01, 0.4}, {3, 0.2, 0}} {
		c := Linear(k[0], k[1], k[2])
		if err := c.Validate(); err != nil {
			t.Fatalf("%v: %v", k, err)
		}
		for _, b := range []int{1, 3, 16} {
			for _, e := range []float64{0, 5, 40} {
				if got, want := c.At(b, e, 100), k[0]+k[1]*float64(b)+k[2]*e; !near(got, want, 1e-12) {
					t.Fatalf("%v: At(%d, %v) = %v, want %v", k, b, e, got, want)
				}
			}
		}
	}
}

func TestRowsInterpolatesAndExtrapolates(t *testing.T) {
	c := Curve{Knots: []Knot{{2, 10}, {4, 14}, {8, 30}}}
	for rows, want := range map[float64]float64{1: 8, 2: 10, 3: 12, 4: 14, 6: 22, 8: 30, 10: 38} {
		if got := c.Rows(rows); !near(got, want, 1e-12) {
			t.Errorf("R(%v) = %v, want %v", rows, got, want)
		}
	}
	c.PerSeqMS, c.PerRowContextMS = 0.5, 0.01
	// 3 sequences, 3 extra tokens: 6 rows, each over 100 tokens of context.
	if got := c.At(3, 3, 100); !near(got, 22+1.5+6, 1e-12) {
		t.Errorf("At = %v", got)
	}
}

func TestValidate(t *testing.T) {
	bad := []Curve{
		{},
		{Knots: []Knot{{0, 1}}},
		{Knots: []Knot{{2, 1}, {2, 3}}},
		{Knots: []Knot{{1, -1}}},
		{Knots: []Knot{{1, math.NaN()}}},
		{Knots: []Knot{{1, 5}, {4, 6}}, PerSeqMS: -1},
		{Knots: []Knot{{1, 0.5}}, PerSeqMS: -1},
		{Knots: []Knot{{1, 5}}, PerRowContextMS: -0.1},
	}
	for i, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("curve %d %v: %v, want ErrInvalid", i, c, err)
		}
	}
}

func TestWithInterferenceFoldsAboveFivePercent(t *testing.T) {
	c := Linear(10, 1, 0.5)
	if got := c.WithInterference(1.04).At(4, 2, 0); got != c.At(4, 2, 0) {
		t.Errorf("4%% interference changed the curve: %v", got)
	}
	if got, want := c.WithInterference(1.2).At(4, 2, 0), 1.2*c.At(4, 2, 0); !near(got, want, 1e-12) {
		t.Errorf("20%% interference: %v, want %v", got, want)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	c := Curve{Knots: []Knot{{1, 12.5}, {4, 20}, {16, 61}}, PerSeqMS: 0.4, PerRowContextMS: 2e-5}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var d Curve
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.String() != c.String() {
		t.Fatalf("%s -> %s", c, d)
	}
}

// grid returns decode and extend points of c at two contexts.
func grid(c Curve) []Point {
	var pts []Point
	for _, ctx := range []float64{16, 200} {
		for _, k := range []int{1, 2, 4} {
			for _, b := range []int{1, 2, 4, 8, 16} {
				e := float64(b * (k - 1))
				pts = append(pts, Point{Batch: b, Extend: e, Context: ctx, MS: c.At(b, e, ctx)})
			}
		}
	}
	return pts
}

func TestFitRecoversAKnownCurve(t *testing.T) {
	want := Curve{Knots: []Knot{{1, 10}, {2, 11}, {4, 13.5}, {8, 18}, {16, 30}, {32, 52}, {64, 100}}, PerSeqMS: 0.6, PerRowContextMS: 0.02}
	got, err := Fit(grid(want), FitOptions{PerSeq: true, Context: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Knots) != len(want.Knots) {
		t.Fatalf("knots %v, want %v", got.Knots, want.Knots)
	}
	for i, k := range want.Knots {
		if got.Knots[i].Rows != k.Rows || !near(got.Knots[i].MS, k.MS, 1e-9) {
			t.Fatalf("fit %s, want %s", got, want)
		}
	}
	if !near(got.PerSeqMS, want.PerSeqMS, 1e-9) || !near(got.PerRowContextMS, want.PerRowContextMS, 1e-9) {
		t.Fatalf("fit %s, want %s", got, want)
	}
	if e := got.MaxRelError(grid(want)); e > 1e-9 {
		t.Fatalf("max relative error %g on exact points", e)
	}
}

// TestFitNoisy fits points with ±3% noise: the fit stays within a few
// percent of the true curve, and R never falls.
func TestFitNoisy(t *testing.T) {
	want := Curve{Knots: []Knot{{1, 10}, {2, 11}, {4, 13.5}, {8, 18}, {16, 30}, {32, 52}, {64, 100}}, PerSeqMS: 0.6, PerRowContextMS: 0.02}
	rng := rand.New(rand.NewPCG(1, 2))
	pts := grid(want)
	for i := range pts {
		pts[i].MS *= 1 + 0.06*(rng.Float64()-0.5)
	}
	got, err := Fit(pts, FitOptions{PerSeq: true, Context: true})
	if err != nil {
		t.Fatal(err)
	}
	if e := got.MaxRelError(grid(want)); e > 0.05 {
		t.Fatalf("fit %s is %.1f%% off the true curve", got, 100*e)
	}
	for i := 1; i < len(got.Knots); i++ {
		if got.Knots[i].MS < got.Knots[i-1].MS {
			t.Fatalf("R falls: %s", got)
		}
	}
}

// TestFitTiesAFall fits decode times that fall from 4 to 8 sequences (a
// noisy measurement): the fit ties those knots instead of letting the
// step get faster with the batch.
func TestFitTiesAFall(t *testing.T) {
	pts := []Point{{Batch: 1, MS: 10}, {Batch: 2, MS: 12}, {Batch: 4, MS: 20}, {Batch: 8, MS: 18}, {Batch: 16, MS: 40}}
	got, err := Fit(pts, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The tied value minimises the two points' squared relative errors.
	tied := (1.0/20 + 1.0/18) / (1.0/400 + 1.0/324)
	k := got.Knots
	if len(k) != 5 || k[2].MS != k[3].MS || !near(k[2].MS, tied, 1e-9) || !near(k[4].MS, 40, 1e-9) {
		t.Fatalf("fit %s", got)
	}
}

// TestFitConstant: one batch size gives a constant curve, as the paper's
// batch-independent step time.
func TestFitConstant(t *testing.T) {
	got, err := Fit([]Point{{Batch: 3, MS: 6}, {Batch: 3, MS: 6.2, Weight: 3}}, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Knots) != 1 || !got.Constant() || !near(got.At(1, 0, 0), 6.15, 1e-3) {
		t.Fatalf("fit %s", got)
	}
}

func TestFitRejects(t *testing.T) {
	for _, pts := range [][]Point{nil, {{Batch: 0, MS: 1}}, {{Batch: 1, MS: 0}}, {{Batch: 1, MS: 1, Extend: -1}}} {
		if _, err := Fit(pts, FitOptions{}); err == nil {
			t.Errorf("fit of %v accepted", pts)
		}
	}
	// Two points cannot determine three knots and two terms.
	if _, err := Fit([]Point{{Batch: 1, MS: 5}, {Batch: 8, MS: 9}}, FitOptions{PerSeq: true, Context: true}); err == nil {
		t.Error("underdetermined fit accepted")
	}
}

func TestStraight(t *testing.T) {
	for _, c := range []struct {
		c    Curve
		want bool
	}{
		{Constant(5), true},
		{Linear(6, 0.1, 0.2), true},
		{Curve{Knots: []Knot{{1, 2}, {4, 5}, {8, 9}}}, true},
		{Curve{Knots: []Knot{{1, 10}, {16, 10}, {17, 20}}}, false},
	} {
		if got := c.c.Straight(); got != c.want {
			t.Errorf("%v: straight %v, want %v", c.c, got, c.want)
		}
	}
}

// TestFitAnyPositivePoints fits noisy measurements (each point off its
// curve by up to a factor of four either way, as sub-millisecond steps of
// tiny models can be) on the calibration grid: every fit succeeds with a
// valid curve, however bad the noise.
func TestFitAnyPositivePoints(t *testing.T) {
	base := Curve{Knots: []Knot{{1, 0.3}, {2, 0.5}, {4, 0.9}, {8, 1.6}, {16, 3}, {32, 6}, {64, 12}}, PerSeqMS: 0.02, PerRowContextMS: 0.001}
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 3000 {
		var pts []Point
		for _, ctx := range []float64{16, 128} {
			for _, k := range []int{1, 2, 4} {
				for _, b := range []int{1, 2, 4, 5, 8, 9, 16, 17} {
					e := float64(b * (k - 1))
					pts = append(pts, Point{Batch: b, Extend: e, Context: ctx, MS: base.At(b, e, ctx) * math.Exp(math.Log(4)*(2*rng.Float64()-1))})
				}
			}
		}
		c, err := Fit(pts, FitOptions{PerSeq: true, Context: true})
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("trial %d: fit %s: %v", trial, c, err)
		}
	}
}
