// Package plot draws TokenRouter's benchmark figures as PNG files with
// gonum/plot: throughput against concurrency per serving system, the
// throughput model's prediction against the measurement per threshold,
// and the quality/throughput Pareto front of a threshold sweep.
package plot

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Point is one (x, y) measurement of a named series.
type Point struct {
	// Series names the line the point belongs to.
	Series string
	// X and Y are the coordinates.
	X, Y float64
	// Label, if set, is drawn next to the point.
	Label string
}

// Lines draws one line per series (points sorted by X) and saves a PNG.
func Lines(path, title, xLabel, yLabel string, pts []Point, logX bool) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	lo, hi := math.Inf(1), 0.0
	for _, q := range pts {
		lo, hi = min(lo, q.Y), max(hi, q.Y)
	}
	if lo > 0 && hi/lo > 30 {
		// Series an order of magnitude apart (a small model alone against
		// routed systems) stay readable on a log scale.
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Label.Text += " (log scale)"
	} else {
		p.Y.Min = 0
	}
	if logX {
		p.X.Scale = plot.LogScale{}
		// Tick exactly the measured x values (concurrency levels).
		seen := map[float64]bool{}
		var ticks []plot.Tick
		for _, q := range pts {
			if !seen[q.X] {
				seen[q.X] = true
				ticks = append(ticks, plot.Tick{Value: q.X, Label: strconv.FormatFloat(q.X, 'g', -1, 64)})
			}
		}
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	series, order := group(pts)
	var args []any
	for _, name := range order {
		xy := series[name]
		sort.Slice(xy, func(i, j int) bool { return xy[i].X < xy[j].X })
		args = append(args, name, xy)
	}
	if err := plotutil.AddLinePoints(p, args...); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	p.Add(plotter.NewGrid())
	return save(p, path)
}

// Scatter draws labelled points per series plus, when diagonal is set, the
// line y = x (predicted = measured), and saves a PNG.
func Scatter(path, title, xLabel, yLabel string, pts []Point, diagonal bool) error {
	if len(pts) == 0 {
		return fmt.Errorf("plot: %s: no points", path)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Legend.Left = diagonal // above the diagonal's top-left is empty
	series, order := group(pts)
	x0, x1, y0, y1 := pts[0].X, pts[0].X, pts[0].Y, pts[0].Y
	for _, q := range pts {
		x0, x1, y0, y1 = min(x0, q.X), max(x1, q.X), min(y0, q.Y), max(y1, q.Y)
	}
	if diagonal {
		x0, y0 = min(x0, y0), min(x0, y0)
		x1, y1 = max(x1, y1), max(x1, y1)
	}
	// Pad the ranges so points and their labels stay inside the frame.
	px, py := max((x1-x0)*0.15, 1e-9), max((y1-y0)*0.12, 1e-9)
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = x0-px, x1+px, y0-py, y1+py
	for i, name := range order {
		s, err := plotter.NewScatter(series[name])
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		s.GlyphStyle.Color = plotutil.Color(i)
		s.GlyphStyle.Shape = plotutil.Shape(i)
		s.GlyphStyle.Radius = vg.Points(4)
		p.Add(s)
		p.Legend.Add(name, s)
	}
	var labels plotter.XYLabels
	for _, q := range pts {
		if q.Label != "" {
			labels.XYs = append(labels.XYs, plotter.XY{X: q.X, Y: q.Y})
			labels.Labels = append(labels.Labels, q.Label)
		}
	}
	if len(labels.Labels) > 0 {
		l, err := plotter.NewLabels(labels)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		for i := range l.TextStyle {
			l.TextStyle[i].XAlign = -0.5
			l.TextStyle[i].YAlign = -1.2
		}
		p.Add(l)
	}
	if diagonal {
		d, err := plotter.NewLine(plotter.XYs{{X: x0, Y: x0}, {X: x1, Y: x1}})
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		d.Color = color.Gray{Y: 140}
		d.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(d)
		p.Legend.Add("predicted = measured", d)
	}
	p.Add(plotter.NewGrid())
	return save(p, path)
}

func group(pts []Point) (map[string]plotter.XYs, []string) {
	series := map[string]plotter.XYs{}
	var order []string
	for _, q := range pts {
		if _, ok := series[q.Series]; !ok {
			order = append(order, q.Series)
		}
		series[q.Series] = append(series[q.Series], plotter.XY{X: q.X, Y: q.Y})
	}
	return series, order
}

func save(p *plot.Plot, path string) error {
	if filepath.Ext(path) != ".png" {
		return fmt.Errorf("plot: %s: only .png is written", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot: save %s: %w", path, err)
	}
	return nil
}
