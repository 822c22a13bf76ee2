package routertrain

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Algorithms a router is trained for.
const (
	// R2R is R2R's HiddenStatesTokenLMHeadLogitsClassifier on the hidden
	// state, the sampled token's embedding and the top logits.
	R2R = "r2r"
	// CITER is an MLP with ReLU on the hidden state.
	CITER = "citer"
	// CoLLM is one linear layer on the hidden state.
	CoLLM = "co-llm"
)

// Bounds on the network's shape, as the r2r router reads it.
const (
	maxBlocks    = 64
	maxExpansion = 64
)

// FitOptions configure training.
type FitOptions struct {
	// Algorithm is R2R, CITER or CoLLM.
	Algorithm string
	// HiddenDims are the hidden widths: R2R's backbone (default 256, 512,
	// 256) or CITER's MLP (default 256, 128); Co-LLM has none.
	HiddenDims []int
	// Expansion is the R2R blocks' MLP expansion factor (default 4).
	Expansion int
	// Dropout is the R2R blocks' dropout rate while training, in [0, 1).
	Dropout float64
	// NormalizeInput gives R2R's network LayerNorms on the hidden state and
	// the embedding and a softmax over the top logits.
	NormalizeInput bool
	// Epochs bounds the passes over the training split; training stops
	// early when the held-out loss has not improved for Patience epochs.
	Epochs, Patience int
	// BatchSize is the number of positions per optimiser step.
	BatchSize int
	// LR is Adam's learning rate.
	LR float64
	// Heldout is the fraction of positions (of each label) held out, in
	// (0, 1).
	Heldout float64
	// PosWeight weighs the positive class in the loss; 0 means the
	// training split's negatives over positives.
	PosWeight float64
	// Weight is WeightLabel (every position of a class counts the same)
	// or WeightGap (a positive counts in proportion to its Gap, scaled to
	// a mean of 1 over the training positives: the loss then ranks
	// positions by what the large model's token gains there).
	Weight string
	// Target chooses the threshold on the held-out positions.
	Target Target
	// Seed seeds the split, the initialisation, the batch order and the
	// dropout masks.
	Seed uint64
	// Progress, when set, is told about every optimiser step and epoch.
	Progress func(Progress)
}

// Progress is a training step's or epoch's report.
type Progress struct {
	// Epoch counts from 1 up to Epochs.
	Epoch, Epochs int
	// Batch of Batches is the step within the epoch.
	Batch, Batches int
	// Loss is the running training loss of the epoch.
	Loss float64
	// EpochDone marks the report at the end of an epoch, with the
	// held-out loss and whether it is the best so far.
	EpochDone   bool
	HeldoutLoss float64
	Best        bool
}

// EpochLoss is one epoch's mean training loss (while training, with
// dropout) and held-out loss.
type EpochLoss struct {
	Train, Heldout float64
}

// Result is a trained router and how it did on the held-out positions.
type Result struct {
	// Opts are the options it was trained with (defaults filled in).
	Opts FitOptions
	// H, E and K are the feature widths of the dataset.
	H, E, K int
	// Threshold is the probability ("the large model differs here") at or
	// above which a position goes to the large model.
	Threshold float64
	// Losses has one entry per epoch run; Best is the index of the epoch
	// whose parameters were kept.
	Losses []EpochLoss
	Best   int
	// TrainLoss and HeldoutLoss are the kept parameters' losses (weighted
	// binary cross-entropy, without dropout).
	TrainLoss, HeldoutLoss float64
	// Curve is the held-out threshold sweep; AUC and PRAUC its areas.
	Curve      []CurvePoint
	AUC, PRAUC float64
	// At is the held-out operating point at Threshold.
	At CurvePoint
	// Examples and Positives count the positions, Train and Held the
	// split, PosWeight the loss's positive-class weight.
	Examples, Positives, Train, Held int
	PosWeight                        float64

	net network
}

// withDefaults fills in the defaults of zero fields.
func (o FitOptions) withDefaults() FitOptions {
	if o.HiddenDims == nil {
		switch o.Algorithm {
		case R2R:
			o.HiddenDims = []int{256, 512, 256}
		case CITER:
			o.HiddenDims = []int{256, 128}
		}
	}
	if o.Expansion == 0 {
		o.Expansion = 4
	}
	if o.Epochs == 0 {
		o.Epochs = 50
	}
	if o.Patience == 0 {
		o.Patience = 5
	}
	if o.BatchSize == 0 {
		o.BatchSize = 64
	}
	if o.LR == 0 {
		o.LR = 1e-3
	}
	if o.Heldout == 0 {
		o.Heldout = 0.2
	}
	if o.Weight == "" {
		o.Weight = WeightLabel
	}
	return o
}

// Weights of FitOptions.Weight.
const (
	WeightLabel = "label"
	WeightGap   = "gap"
)

func (o FitOptions) check() error {
	switch {
	case o.Weight != "" && o.Weight != WeightLabel && o.Weight != WeightGap:
		return fmt.Errorf("weight %q: want %s or %s", o.Weight, WeightLabel, WeightGap)
	case o.Algorithm != R2R && o.Algorithm != CITER && o.Algorithm != CoLLM:
		return fmt.Errorf("algorithm %q: want %s, %s or %s", o.Algorithm, R2R, CITER, CoLLM)
	case o.Algorithm == CoLLM && len(o.HiddenDims) > 0:
		return errors.New("co-llm is one linear layer: it takes no hidden dims")
	case !(o.Dropout >= 0 && o.Dropout < 1):
		return fmt.Errorf("dropout %v out of range [0, 1)", o.Dropout)
	case o.Epochs < 0 || o.Patience < 0 || o.BatchSize < 0 || o.Expansion < 0:
		return errors.New("epochs, patience, batch size and expansion must not be negative")
	case !(o.LR > 0) || math.IsInf(o.LR, 0):
		return fmt.Errorf("learning rate %v must be positive", o.LR)
	case !(o.Heldout > 0 && o.Heldout < 1):
		return fmt.Errorf("held-out fraction %v out of range (0, 1)", o.Heldout)
	case !(o.PosWeight >= 0) || math.IsInf(o.PosWeight, 0):
		return fmt.Errorf("positive-class weight %v must be finite and not negative", o.PosWeight)
	case len(o.HiddenDims) > maxBlocks || o.Expansion > maxExpansion:
		return fmt.Errorf("%d hidden dims (at most %d), expansion %d (at most %d)", len(o.HiddenDims), maxBlocks, o.Expansion, maxExpansion)
	}
	for _, d := range o.HiddenDims {
		if d < 1 || d > maxTopK {
			return fmt.Errorf("hidden dims %v: widths must lie in [1, %d]", o.HiddenDims, maxTopK)
		}
	}
	return o.Target.check()
}

// newNetwork builds the untrained network for ds.
func (o FitOptions) newNetwork(ds *Dataset, r *rand.Rand) (network, error) {
	switch o.Algorithm {
	case R2R:
		return newR2RNet(ds.H, ds.E, ds.K, o.HiddenDims, o.Expansion, o.Dropout, o.NormalizeInput, r)
	case CITER:
		return newMLPNet("mlp", ds.H, o.HiddenDims, r)
	}
	return newMLPNet("defer", ds.H, nil, r)
}

// Fit trains a router on ds: Adam on the weighted binary cross-entropy
// over mini-batches of the training split, early stopping on the
// held-out loss (the best epoch's parameters are kept), then the threshold
// for the target on the held-out positions. Equal seeds and data give
// equal results.
func Fit(ctx context.Context, ds *Dataset, o FitOptions) (*Result, error) {
	o = o.withDefaults()
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("routertrain: %w", err)
	}
	if W := ds.H + ds.E + ds.K; ds.Len() == 0 || len(ds.X) != ds.Len()*W {
		return nil, fmt.Errorf("routertrain: dataset of %d labels and %d values (rows of %d)", ds.Len(), len(ds.X), W)
	}
	train, held, err := split(ds.Y, o.Heldout, rand.New(rand.NewPCG(o.Seed, 1)))
	if err != nil {
		return nil, err
	}
	net, err := o.newNetwork(ds, rand.New(rand.NewPCG(o.Seed, 2)))
	if err != nil {
		return nil, fmt.Errorf("routertrain: %w", err)
	}
	res := &Result{Opts: o, H: ds.H, E: ds.E, K: ds.K, Examples: ds.Len(), Positives: ds.Positives(),
		Train: len(train), Held: len(held), PosWeight: o.PosWeight, net: net}
	if res.PosWeight == 0 {
		pos := 0
		for _, i := range train {
			pos += int(ds.Y[i])
		}
		res.PosWeight = float64(len(train)-pos) / float64(pos)
	}
	t := &trainer{ds: ds, net: net, o: o, pw: res.PosWeight, opt: newAdam(o.LR)}
	if o.Weight == WeightGap {
		if t.gapScale, err = gapScale(ds, train); err != nil {
			return nil, err
		}
	}
	if err := t.run(ctx, train, held, res); err != nil {
		return nil, err
	}
	res.TrainLoss = t.loss(train, nil)
	hp := make([]float64, len(held))
	res.HeldoutLoss = t.loss(held, hp)
	hy := make([]uint8, len(held))
	for i, k := range held {
		hy[i] = ds.Y[k]
	}
	res.Curve = Curve(hp, hy)
	res.AUC, res.PRAUC = AUC(res.Curve), AveragePrecision(res.Curve)
	res.Threshold = Threshold(res.Curve, o.Target)
	res.At = at(res.Curve, res.Threshold)
	return res, nil
}

// gapScale returns one over the mean gap of the training positives.
func gapScale(ds *Dataset, train []int) (float64, error) {
	if len(ds.Gap) != ds.Len() {
		return 0, fmt.Errorf("routertrain: weight %s needs the gaps of the %d positions, the dataset has %d", WeightGap, ds.Len(), len(ds.Gap))
	}
	sum, n := 0.0, 0
	for _, i := range train {
		if ds.Y[i] == 1 {
			g := float64(ds.Gap[i])
			if !(g >= 0) || math.IsInf(g, 0) {
				return 0, fmt.Errorf("routertrain: position %d has gap %v", i, g)
			}
			sum, n = sum+g, n+1
		}
	}
	if !(sum > 0) {
		return 0, fmt.Errorf("routertrain: weight %s: the %d training positives have no gap", WeightGap, n)
	}
	return float64(n) / sum, nil
}

// split shuffles the positions of each label and holds out frac of each
// (at least one); both sides must keep both labels.
func split(y []uint8, frac float64, r *rand.Rand) (train, held []int, err error) {
	var byLabel [2][]int
	for i, v := range y {
		byLabel[v] = append(byLabel[v], i)
	}
	for _, idx := range byLabel {
		if len(idx) < 2 {
			return nil, nil, fmt.Errorf("routertrain: %d positions differ and %d agree: training needs at least two of each (more prompts or tokens)",
				len(byLabel[1]), len(byLabel[0]))
		}
		r.Shuffle(len(idx), func(a, b int) { idx[a], idx[b] = idx[b], idx[a] })
		n := min(max(int(math.Round(frac*float64(len(idx)))), 1), len(idx)-1)
		held = append(held, idx[:n]...)
		train = append(train, idx[n:]...)
	}
	slices.Sort(train)
	slices.Sort(held)
	return train, held, nil
}
