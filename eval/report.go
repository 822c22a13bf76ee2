package eval

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// Report is a curve's result: every arm's points and each arm's curve read
// at chosen large-model shares.
type Report struct {
	// Shares are the shares the curves are read at.
	Shares []float64 `json:"shares"`
	// Series are the arms' points.
	Series []Series `json:"series"`
	// AtShare is each arm's curve at Shares, in Series order.
	AtShare []AtShare `json:"at_share"`
	// Bootstrap, if set, gives intervals over resampled prompts.
	Bootstrap *Bootstrap `json:"bootstrap,omitempty"`
}

// AtShare is one arm's curve at the report's shares (At); null where the
// arm measured no share that low.
type AtShare struct {
	Label     string     `json:"label"`
	Agreement []*float64 `json:"agreement"`
	LogLik    []*float64 `json:"llm_loglik"`
}

// NewReport reads every series' curves at shares.
func NewReport(series []Series, shares []float64) Report {
	r := Report{Shares: shares, Series: series}
	for _, s := range series {
		a := AtShare{Label: s.Label}
		for _, sh := range shares {
			a.Agreement = append(a.Agreement, finite(At(s.Points, AgreementOf, sh)))
			a.LogLik = append(a.LogLik, finite(At(s.Points, LogLikOf, sh)))
		}
		r.AtShare = append(r.AtShare, a)
	}
	return r
}

// finite returns &v, or nil for NaN.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Markdown writes the report as Markdown tables: each measure at the
// shares, then every point.
func (r Report) Markdown(w io.Writer) error {
	b := bufio.NewWriter(w)
	for _, m := range []struct {
		title string
		get   func(AtShare) []*float64
		boot  func(BootSeries) BootMeasure
	}{
		{"Agreement with the large model's greedy token (teacher-forced), on each algorithm's Pareto front",
			func(a AtShare) []*float64 { return a.Agreement }, func(s BootSeries) BootMeasure { return s.Agreement }},
		{"Large model's mean log-likelihood per token (nats), on each algorithm's Pareto front",
			func(a AtShare) []*float64 { return a.LogLik }, func(s BootSeries) BootMeasure { return s.LogLik }},
	} {
		fmt.Fprintf(b, "%s, at large-model share:\n\n| algorithm |", m.title)
		for _, s := range r.Shares {
			fmt.Fprintf(b, " %s |", pct(s))
		}
		if r.Bootstrap != nil {
			fmt.Fprintf(b, " %s ≥ it at every share |", r.Bootstrap.Reference)
		}
		fmt.Fprintf(b, "\n|---|%s%s\n", strings.Repeat("---|", len(r.Shares)), strings.Repeat("---|", r.bootCols()))
		for i, a := range r.AtShare {
			fmt.Fprintf(b, "| %s |", a.Label)
			var bm *BootMeasure
			if r.Bootstrap != nil {
				v := m.boot(r.Bootstrap.Series[i])
				bm = &v
			}
			for k, v := range m.get(a) {
				b.WriteString(" " + cell(v, bm, k) + " |")
			}
			if bm != nil {
				fmt.Fprintf(b, " %.0f%% |", 100*bm.AtLeast)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	if bs := r.Bootstrap; bs != nil {
		fmt.Fprintf(b, "In brackets: the central 95%% of the curve over %d resamples of the prompts (with replacement, seed %d); "+
			"the last column is the share of resamples in which %s's curve is at least the algorithm's at every share above.\n\n",
			bs.Resamples, bs.Seed, bs.Reference)
	}
	r.points(b)
	return b.Flush()
}

// bootCols is the number of bootstrap columns of the share tables.
func (r Report) bootCols() int {
	if r.Bootstrap != nil {
		return 1
	}
	return 0
}

// cell formats a curve's value at share k, with its bootstrap interval
// when bm is set.
func cell(v *float64, bm *BootMeasure, k int) string {
	if v == nil {
		return "—"
	}
	s := fmt.Sprintf("%.3f", *v)
	if bm != nil && k < len(bm.Low) && bm.Low[k] != nil && bm.High[k] != nil {
		s += fmt.Sprintf(" [%.3f, %.3f]", *bm.Low[k], *bm.High[k])
	}
	return s
}

// points writes the table of every point.
func (r Report) points(b *bufio.Writer) {
	b.WriteString("Every point (front: on the agreement (A) or log-likelihood (L) Pareto front of its algorithm):\n\n")
	b.WriteString("| algorithm | parameter | large-model share | agreement | LLM log-lik | tok/s | tokens | front |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, s := range r.Series {
		fa, fl := onFront(s.Points, AgreementOf), onFront(s.Points, LogLikOf)
		for i, p := range s.Points {
			mark := ""
			if fa[i] {
				mark += "A"
			}
			if fl[i] {
				mark += "L"
			}
			fmt.Fprintf(b, "| %s | %s=%s | %.3f | %.3f | %.3f | %.0f | %d | %s |\n", s.Label, s.Param, p.Value,
				p.LargeShare, p.Agreement, p.LogLik, p.TokensPerSecond, p.Tokens, mark)
		}
	}
}

// onFront marks which of pts lie on their Pareto front for m.
func onFront(pts []Point, m Metric) []bool {
	f := Front(pts, m)
	out := make([]bool, len(pts))
	for i, p := range pts {
		for _, q := range f {
			if p.Value == q.Value && p.LargeShare == q.LargeShare && m(p) == m(q) {
				out[i] = true
			}
		}
	}
	return out
}

// pct writes a share as a percentage.
func pct(s float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", 100*s), "0"), ".") + "%"
}

// maxReport bounds a saved report read back.
const maxReport = 64 << 20

// ReadReport reads the series of a report saved as JSON (Report's
// encoding), to read its curves again at other shares or draw them. The
// file is bounded and every point checked.
func ReadReport(path string) ([]Series, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReport+1))
	if err != nil {
		return nil, fmt.Errorf("eval: %s: %w", path, err)
	}
	if len(b) > maxReport {
		return nil, fmt.Errorf("eval: %s: larger than %d bytes", path, maxReport)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("eval: %s: %w", path, err)
	}
	if len(r.Series) == 0 {
		return nil, fmt.Errorf("eval: %s: no series", path)
	}
	for _, s := range r.Series {
		if !armName.MatchString(s.Label) {
			return nil, fmt.Errorf("eval: %s: bad series label %q", path, s.Label)
		}
		for _, p := range s.Points {
			if !validPoint(p) {
				return nil, fmt.Errorf("eval: %s: series %s: point %s out of range", path, s.Label, p.Value)
			}
		}
	}
	return r.Series, nil
}

// validPoint reports whether a point read back is within the ranges its
// measures can take.
func validPoint(p Point) bool {
	if !(p.LargeShare >= 0 && p.LargeShare <= 1) || !(p.Agreement >= 0 && p.Agreement <= 1) ||
		p.LogLik > 0 || p.Responses < 0 || p.Tokens < 0 {
		return false
	}
	for _, q := range p.PerPrompt {
		if q.Large < 0 || q.Large > q.Tokens || q.Agree < 0 || q.Agree > q.Positions || q.Positions > q.Tokens || q.LogLik > 0 {
			return false
		}
	}
	return true
}
