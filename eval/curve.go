package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route"
)

// Arm is one algorithm of a curve: the parameter it sweeps and its fixed
// parameters (a trained router's weights file).
type Arm struct {
	// Label names the arm in tables and legends (default: Algorithm).
	Label string `json:"label"`
	// Algorithm is the routing algorithm's registered name.
	Algorithm string `json:"algorithm"`
	// Param is the swept parameter, Values its values.
	Param  string   `json:"param"`
	Values []string `json:"values"`
	// Fixed are the other parameters.
	Fixed map[string]string `json:"fixed,omitempty"`
}

// armLimits bound an arm specification.
const (
	maxArmSpec   = 4096
	maxArmValues = 256
)

// armName is what a label, algorithm or parameter name may be.
var armName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`)

// ParseArm reads an arm written as whitespace-separated fields:
//
//	[LABEL=]ALGORITHM PARAM=V1,V2,... [NAME=VALUE ...]
//
// for example "trained-r2r=r2r threshold=0.9,0.7,0.5 weights=r2r.safetensors".
func ParseArm(spec string) (Arm, error) {
	if len(spec) > maxArmSpec {
		return Arm{}, fmt.Errorf("eval: arm specification longer than %d bytes", maxArmSpec)
	}
	f := strings.Fields(spec)
	if len(f) < 2 {
		return Arm{}, fmt.Errorf("eval: arm %q: want [LABEL=]ALGORITHM PARAM=V1,V2,... [NAME=VALUE ...]", spec)
	}
	var a Arm
	if l, alg, ok := strings.Cut(f[0], "="); ok {
		a.Label, a.Algorithm = l, alg
	} else {
		a.Label, a.Algorithm = f[0], f[0]
	}
	p, vals, ok := strings.Cut(f[1], "=")
	if !ok {
		return Arm{}, fmt.Errorf("eval: arm %q: sweep %q: want PARAM=V1,V2,...", spec, f[1])
	}
	a.Param, a.Values = p, strings.Split(vals, ",")
	for _, s := range []string{a.Label, a.Algorithm, a.Param} {
		if !armName.MatchString(s) {
			return Arm{}, fmt.Errorf("eval: arm %q: bad name %q", spec, s)
		}
	}
	if len(a.Values) > maxArmValues || slices.Contains(a.Values, "") {
		return Arm{}, fmt.Errorf("eval: arm %q: want 1 to %d non-empty values", spec, maxArmValues)
	}
	for _, kv := range f[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !armName.MatchString(k) || k == a.Param {
			return Arm{}, fmt.Errorf("eval: arm %q: parameter %q: want NAME=VALUE, NAME not the swept one", spec, kv)
		}
		if a.Fixed == nil {
			a.Fixed = map[string]string{}
		}
		a.Fixed[k] = v
	}
	return a, nil
}

// Curve runs several algorithms' sweeps on the same models and prompts,
// for their quality–share curves.
type Curve struct {
	// Models describe the models, small first (at least two); the last is
	// the large model and the judge. They must share a vocabulary.
	Models []config.Model
	// Kinds opens the models (nil: loader.Builtin()).
	Kinds loader.Kinds
	// Registry resolves the arms' algorithms.
	Registry *route.Registry
	// Arms are the algorithms, each with its sweep.
	Arms []Arm
	// Examples are the held-out prompts.
	Examples []Example
	// Options size the requests (Options.Judge is set by RunCurve).
	Options
}

// Series is one arm's points, in its values' order; Quality is Agreement.
type Series struct {
	Arm
	Points []Point `json:"points"`
}

// RunCurve runs every arm's sweep and returns one series per arm. Progress,
// if set, is told after each arm.
func RunCurve(ctx context.Context, c Curve, progress func(Series)) ([]Series, error) {
	if len(c.Arms) == 0 {
		return nil, errors.New("eval: a curve needs at least one arm")
	}
	labels := map[string]bool{}
	for _, a := range c.Arms {
		if labels[a.Label] {
			return nil, fmt.Errorf("eval: two arms are labelled %q", a.Label)
		}
		labels[a.Label] = true
	}
	ss, err := openSession(ctx, c.Models, c.Kinds, c.Examples)
	if err != nil {
		return nil, err
	}
	defer ss.close()
	o := c.Options
	o.Judge = ss.judge.Score
	out := make([]Series, 0, len(c.Arms))
	for _, a := range c.Arms {
		pts, err := Sweep(ctx, a.Values, ss.builder(ctx, c.Registry, a.Algorithm, a.Fixed, a.Param), ss.prompts, nil, o)
		if err != nil {
			return nil, fmt.Errorf("eval: arm %s: %w", a.Label, err)
		}
		out = append(out, Series{Arm: a, Points: pts})
		if progress != nil {
			progress(out[len(out)-1])
		}
	}
	return out, nil
}

// Metric picks a quality measure from a point.
type Metric func(Point) float64

// AgreementOf is the agreement Metric.
func AgreementOf(p Point) float64 { return p.Agreement }

// LogLikOf is the large-model log-likelihood Metric.
func LogLikOf(p Point) float64 { return p.LogLik }

// Front returns the quality–share Pareto front of pts for metric m: the
// scored points (Responses > 0) that no other scored point beats, with a
// large-model share no higher and a quality no lower (one of the two
// strictly), sorted by share; along it quality rises with share.
func Front(pts []Point, m Metric) []Point {
	var c []Point
	for _, p := range pts {
		if p.Responses > 0 && !math.IsNaN(m(p)) {
			c = append(c, p)
		}
	}
	slices.SortStableFunc(c, func(a, b Point) int {
		if a.LargeShare != b.LargeShare {
			if a.LargeShare < b.LargeShare {
				return -1
			}
			return 1
		}
		qa, qb := m(a), m(b)
		switch {
		case qa > qb:
			return -1
		case qa < qb:
			return 1
		}
		return 0
	})
	var f []Point
	for _, p := range c {
		if len(f) == 0 || m(p) > m(f[len(f)-1]) {
			f = append(f, p)
		}
	}
	return f
}

// At reads the curve of pts for metric m at large-model share s: the best
// quality reached with a share of at most s along the Pareto front
// (Front), interpolated linearly between the front's neighbouring points
// (what mixing the two settings request by request reaches, on average).
// Beyond the front's largest share it is the front's best; below its
// smallest share, where nothing was measured, it is NaN.
func At(pts []Point, m Metric, s float64) float64 {
	f := Front(pts, m)
	if len(f) == 0 || s < f[0].LargeShare {
		return math.NaN()
	}
	for i := 1; i < len(f); i++ {
		a, b := f[i-1], f[i]
		if s <= b.LargeShare {
			t := (s - a.LargeShare) / (b.LargeShare - a.LargeShare)
			return m(a) + t*(m(b)-m(a))
		}
	}
	return m(f[len(f)-1])
}

// ParseShares reads a comma-separated list of shares in [0, 1]
// ("0.1,0.2"); a value may end in % ("10%").
func ParseShares(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		scale := 1.0
		if t, ok := strings.CutSuffix(f, "%"); ok {
			f, scale = t, 0.01
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || math.IsNaN(v) || v*scale < 0 || v*scale > 1 {
			return nil, fmt.Errorf("eval: share %q: want a number in [0, 1] or a percentage", f)
		}
		out = append(out, v*scale)
	}
	if len(out) > maxArmValues {
		return nil, fmt.Errorf("eval: more than %d shares", maxArmValues)
	}
	return out, nil
}
