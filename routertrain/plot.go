package routertrain

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// PlotPaths are the figure files written for a router file: prefix (the
// router's path without its extension) plus -loss.png, -roc.png and
// -pr.png.
func PlotPaths(prefix string) (loss, roc, pr string) {
	return prefix + "-loss.png", prefix + "-roc.png", prefix + "-pr.png"
}

// Plot writes the loss curve (training and held-out loss per epoch), the
// held-out ROC curve and the held-out precision–recall curve of r, each
// with the chosen threshold marked, to the PlotPaths of prefix.
func (r *Result) Plot(prefix string) error {
	lossPath, rocPath, prPath := PlotPaths(prefix)
	for _, f := range []struct {
		path string
		draw func() (*plot.Plot, error)
	}{{lossPath, r.lossPlot}, {rocPath, r.rocPlot}, {prPath, r.prPlot}} {
		p, err := f.draw()
		if err != nil {
			return fmt.Errorf("routertrain: %s: %w", f.path, err)
		}
		p.Add(plotter.NewGrid())
		if err := p.Save(8*vg.Inch, 5*vg.Inch, f.path); err != nil {
			return fmt.Errorf("routertrain: %w", err)
		}
	}
	return nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Legend.Top = true
	return p
}

// line adds a solid line of style i with its legend entry.
func line(p *plot.Plot, name string, xy plotter.XYs, i int, points bool) error {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color, l.Width = plotutil.Color(i), vg.Points(1.5)
	p.Add(l)
	if !points {
		p.Legend.Add(name, l)
		return nil
	}
	s, err := plotter.NewScatter(xy)
	if err != nil {
		return err
	}
	s.GlyphStyle.Color, s.GlyphStyle.Shape, s.GlyphStyle.Radius = plotutil.Color(i), plotutil.Shape(i), vg.Points(2.5)
	p.Add(s)
	p.Legend.Add(name, l, s)
	return nil
}

// dashed adds a grey dashed reference line.
func dashed(p *plot.Plot, name string, xy plotter.XYs) error {
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color, l.Dashes = color.Gray{Y: 140}, []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// mark adds the operating point at the threshold.
func (r *Result) mark(p *plot.Plot, x, y float64) error {
	s, err := plotter.NewScatter(plotter.XYs{{X: x, Y: y}})
	if err != nil {
		return err
	}
	s.GlyphStyle.Color, s.GlyphStyle.Shape, s.GlyphStyle.Radius = color.Black, draw.CrossGlyph{}, vg.Points(5)
	p.Add(s)
	p.Legend.Add(fmt.Sprintf("threshold %.3f (%s)", r.Threshold, r.targetText()), s)
	return nil
}

func (r *Result) targetText() string {
	if r.Opts.Target.Share >= 0 {
		return fmt.Sprintf("share %.2f", r.Opts.Target.Share)
	}
	return fmt.Sprintf("recall %.2f", r.Opts.Target.Recall)
}

func (r *Result) lossPlot() (*plot.Plot, error) {
	p := newPlot(fmt.Sprintf("%s router: loss per epoch (kept: epoch %d)", r.Opts.Algorithm, r.Best+1),
		"epoch", "loss (weighted binary cross-entropy, nats per position)")
	p.Legend.Left = false
	var tr, ho plotter.XYs
	for i, l := range r.Losses {
		tr = append(tr, plotter.XY{X: float64(i + 1), Y: l.Train})
		ho = append(ho, plotter.XY{X: float64(i + 1), Y: l.Heldout})
	}
	if err := line(p, "training (with dropout)", tr, 0, true); err != nil {
		return nil, err
	}
	if err := line(p, "held-out", ho, 1, true); err != nil {
		return nil, err
	}
	p.X.Min, p.Y.Min = 0.5, 0
	return p, nil
}

func (r *Result) rocPlot() (*plot.Plot, error) {
	p := newPlot(fmt.Sprintf("%s router: held-out ROC (AUC %.3f, %d positions)", r.Opts.Algorithm, r.AUC, r.Held),
		"false positive rate (agreeing positions sent to the large model)", "true positive rate (differing positions sent)")
	p.Legend.Left, p.Legend.Top = false, false
	var xy plotter.XYs
	for _, c := range r.Curve {
		xy = append(xy, plotter.XY{X: c.FPR, Y: c.Recall})
	}
	if err := line(p, "router", xy, 0, false); err != nil {
		return nil, err
	}
	if err := dashed(p, "chance", plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}}); err != nil {
		return nil, err
	}
	if err := r.mark(p, r.At.FPR, r.At.Recall); err != nil {
		return nil, err
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	return p, nil
}

func (r *Result) prPlot() (*plot.Plot, error) {
	p := newPlot(fmt.Sprintf("%s router: held-out precision-recall (AP %.3f)", r.Opts.Algorithm, r.PRAUC),
		"recall (differing positions sent to the large model)", "precision (sent positions that differ)")
	p.Legend.Left = false
	var xy plotter.XYs
	for _, c := range r.Curve[1:] {
		xy = append(xy, plotter.XY{X: c.Recall, Y: c.Precision})
	}
	if err := line(p, "router", xy, 0, false); err != nil {
		return nil, err
	}
	last := r.Curve[len(r.Curve)-1] // everything sent: precision is the share of differing positions
	base := fmt.Sprintf("chance (%.1f%% of positions differ)", 100*last.Precision)
	if err := dashed(p, base, plotter.XYs{{X: 0, Y: last.Precision}, {X: 1, Y: last.Precision}}); err != nil {
		return nil, err
	}
	if err := r.mark(p, r.At.Recall, r.At.Precision); err != nil {
		return nil, err
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1.02
	return p, nil
}
