package routertrain

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// trainer runs the optimisation of one network on one dataset.
type trainer struct {
	ds  *Dataset
	net network
	o   FitOptions
	pw  float64
	opt *adam

	// gapScale, when positive, weighs each positive row by its gap times
	// gapScale (FitOptions.Weight "gap"); wt holds the batch's weights.
	gapScale  float64
	x, dz, wt []float64
	y         []uint8
}

// batch loads the rows idx into the trainer's batch buffers.
func (t *trainer) batch(idx []int) {
	w, W := t.net.width(), t.ds.H+t.ds.E+t.ds.K
	t.x = grow(t.x, len(idx)*w)
	t.dz = grow(t.dz, len(idx))
	t.y = slices.Grow(t.y[:0], len(idx))[:len(idx)]
	for r, i := range idx {
		for k, v := range t.ds.X[i*W : i*W+w] {
			t.x[r*w+k] = float64(v)
		}
		t.y[r] = t.ds.Y[i]
	}
	if t.gapScale > 0 {
		t.wt = grow(t.wt, len(idx))
		for r, i := range idx {
			t.wt[r] = float64(t.ds.Gap[i]) * t.gapScale
		}
	}
}

// run trains for up to Epochs epochs with early stopping and leaves the
// best epoch's parameters in the network.
func (t *trainer) run(ctx context.Context, train, held []int, res *Result) error {
	ps := t.net.params()
	best := make([][]float64, len(ps))
	for i, p := range ps {
		best[i] = slices.Clone(p.w)
	}
	order := slices.Clone(train)
	shuffle, drop := rand.New(rand.NewPCG(t.o.Seed, 3)), rand.New(rand.NewPCG(t.o.Seed, 4))
	bs := t.o.BatchSize
	batches := (len(order) + bs - 1) / bs
	bestLoss, stale := math.Inf(1), 0
	for e := 1; e <= t.o.Epochs && stale < t.o.Patience; e++ {
		shuffle.Shuffle(len(order), func(a, b int) { order[a], order[b] = order[b], order[a] })
		var sum float64
		for b := range batches {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("routertrain: %w", err)
			}
			idx := order[b*bs : min((b+1)*bs, len(order))]
			t.batch(idx)
			z := t.net.forward(t.x, len(idx), drop)
			sum += bce(z, t.y, t.pw, t.wt, t.dz) * float64(len(idx))
			t.net.backward(t.dz, len(idx))
			t.opt.step(ps)
			t.report(Progress{Epoch: e, Epochs: t.o.Epochs, Batch: b + 1, Batches: batches, Loss: sum / float64(min((b+1)*bs, len(order)))})
		}
		l := EpochLoss{Train: sum / float64(len(order)), Heldout: t.loss(held, nil)}
		if math.IsNaN(l.Train) || math.IsNaN(l.Heldout) {
			return fmt.Errorf("routertrain: epoch %d: the loss is not a number (try a lower learning rate)", e)
		}
		res.Losses = append(res.Losses, l)
		improved := l.Heldout < bestLoss
		if improved {
			bestLoss, stale, res.Best = l.Heldout, 0, e-1
			for i, p := range ps {
				copy(best[i], p.w)
			}
		} else {
			stale++
		}
		t.report(Progress{Epoch: e, Epochs: t.o.Epochs, Batch: batches, Batches: batches, Loss: l.Train,
			EpochDone: true, HeldoutLoss: l.Heldout, Best: improved})
	}
	for i, p := range ps {
		copy(p.w, best[i])
	}
	return nil
}

func (t *trainer) report(p Progress) {
	if t.o.Progress != nil {
		t.o.Progress(p)
	}
}

// loss evaluates the network (no dropout) on the rows idx and returns the
// mean weighted loss; probs, when not nil, receives each row's
// probability.
func (t *trainer) loss(idx []int, probs []float64) float64 {
	var sum float64
	bs := max(t.o.BatchSize, 256)
	for from := 0; from < len(idx); from += bs {
		part := idx[from:min(from+bs, len(idx))]
		t.batch(part)
		z := t.net.forward(t.x, len(part), nil)
		sum += bce(z, t.y, t.pw, t.wt, nil) * float64(len(part))
		if probs != nil {
			for i, v := range z {
				probs[from+i] = sigmoid(v)
			}
		}
	}
	return sum / float64(len(idx))
}
