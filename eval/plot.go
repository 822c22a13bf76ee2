package eval

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// PlotCurves draws the quality–share curves as one PNG of two panels side
// by side: agreement with the large model's greedy token, and the large
// model's mean log-likelihood per token, each against the share of tokens
// the large model wrote. Each algorithm is one colour: its Pareto front as
// a line through filled markers, its dominated points as hollow markers.
// shares, if any, are marked by dotted vertical lines.
func PlotCurves(path, title string, series []Series, shares []float64) error {
	if filepath.Ext(path) != ".png" {
		return fmt.Errorf("eval: plot %s: only .png is written", path)
	}
	panels := []struct {
		label string
		m     Metric
	}{
		{"agreement with the large model's greedy token (share of positions)", AgreementOf},
		{"large model's mean log-likelihood per token (nats)", LogLikOf},
	}
	row := make([]*plot.Plot, len(panels))
	for i, pn := range panels {
		p, err := curvePanel(series, pn.m, pn.label, shares)
		if err != nil {
			return err
		}
		row[i] = p
	}
	row[0].Title.Text = title
	const w, h = 13 * vg.Inch, 5.5 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Points(24), PadTop: vg.Points(8), PadBottom: vg.Points(8),
		PadLeft: vg.Points(8), PadRight: vg.Points(12)}
	cv := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for i, p := range row {
		p.Draw(cv[0][i])
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("eval: plot: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("eval: plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("eval: plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("eval: plot %s: %w", path, err)
	}
	return nil
}

// curvePanel draws one measure against the large-model share.
func curvePanel(series []Series, m Metric, yLabel string, shares []float64) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text = "large-model share (output tokens the large model wrote)"
	p.Y.Label.Text = yLabel
	p.X.Min, p.X.Max = 0, 1
	p.X.Tick.Marker = shareTicks()
	p.Legend.Top, p.Legend.Left = false, false
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, s := range series {
		var all, front plotter.XYs
		for _, q := range s.Points {
			if q.Responses > 0 {
				all = append(all, plotter.XY{X: q.LargeShare, Y: m(q)})
				lo, hi = min(lo, m(q)), max(hi, m(q))
			}
		}
		for _, q := range Front(s.Points, m) {
			front = append(front, plotter.XY{X: q.LargeShare, Y: m(q)})
		}
		if len(all) == 0 {
			continue
		}
		c := plotutil.Color(i)
		dots, err := plotter.NewScatter(all)
		if err != nil {
			return nil, fmt.Errorf("eval: plot: %w", err)
		}
		dots.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(3.5), Shape: glyph(i, false)}
		line, pts, err := plotter.NewLinePoints(front)
		if err != nil {
			return nil, fmt.Errorf("eval: plot: %w", err)
		}
		line.Color, line.Width = c, vg.Points(1.5)
		line.Dashes = plotutil.Dashes(i)
		pts.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(3.5), Shape: glyph(i, true)}
		p.Add(dots, line, pts)
		p.Legend.Add(s.Label, line, pts)
	}
	if lo > hi {
		return nil, fmt.Errorf("eval: plot: no scored points")
	}
	pad := max((hi-lo)*0.08, 0.01)
	p.Y.Min, p.Y.Max = lo-pad, hi+pad
	for _, s := range shares {
		l, err := plotter.NewLine(plotter.XYs{{X: s, Y: p.Y.Min}, {X: s, Y: p.Y.Max}})
		if err != nil {
			return nil, fmt.Errorf("eval: plot: %w", err)
		}
		l.Color, l.Dashes = color.Gray{Y: 170}, []vg.Length{vg.Points(1), vg.Points(3)}
		p.Add(l)
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

// glyph returns series i's marker shape, filled (on the front) or hollow
// (dominated).
func glyph(i int, filled bool) draw.GlyphDrawer {
	if filled {
		return []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}[i%3]
	}
	return []draw.GlyphDrawer{draw.RingGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}}[i%3]
}

// shareTicks marks the share axis every 10%.
func shareTicks() plot.ConstantTicks {
	var t plot.ConstantTicks
	for i := 0; i <= 10; i++ {
		t = append(t, plot.Tick{Value: float64(i) / 10, Label: fmt.Sprintf("%d%%", 10*i)})
	}
	return t
}
