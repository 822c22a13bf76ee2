package routertrain

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/eval"
	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/citer"
	"github.com/tokenrouter/tokenrouter/route/colm"
	"github.com/tokenrouter/tokenrouter/route/nn"
	"github.com/tokenrouter/tokenrouter/route/r2r"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// tinyData is a dataset from the tiny pair: the small model writes 48
// tokens from each of the first 16 prompts of
// testdata/eval/train-prompts.jsonl. The engines stay open for the tests
// that feed their outputs to the served routers.
type tinyData struct {
	ds       *Dataset
	slm, llm *cpu.Engine
}

// TestTinyData collects the dataset once and runs the training tests on
// it.
func TestTinyData(t *testing.T) {
	slm, llm := tinyPair(t)
	dir := testmodels.Dir(t)
	f, err := gguf.OpenMeta(filepath.Join(dir, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := eval.Load(filepath.Join(testmodels.EvalDir(t), "train-prompts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var prompts [][]int32
	for _, e := range ex[:16] {
		prompts = append(prompts, tok.Encode(e.Prompt, true))
	}
	ds, err := Collect(context.Background(), slm, llm, prompts, CollectOptions{MaxTokens: 48, TopK: 16, Batch: 8})
	if err != nil {
		t.Fatal(err)
	}
	d := &tinyData{ds: ds, slm: slm, llm: llm}
	t.Logf("%d positions, %d differ", ds.Len(), ds.Positives())
	t.Run("BeatsRandom", func(t *testing.T) { testFitBeatsRandom(t, d) })
	t.Run("Deterministic", func(t *testing.T) { testFitDeterministic(t, d) })
	t.Run("FilesServe", func(t *testing.T) { testTrainedFilesServe(t, d) })
	t.Run("GapWeight", func(t *testing.T) { testGapWeight(t, d) })
}

// testGapWeight: a router trained with Weight gap sends to the large model,
// among the held-out positions, the 20% it scores highest; the gap they
// hold (what the large model's tokens gain there) is well above a random
// fifth's, and is reported beside the label-weighted router's.
func testGapWeight(t *testing.T, d *tinyData) {
	captured := func(weight string) (float64, float64) {
		o := smallFit(R2R, 7)
		o.Weight = weight
		res, err := Fit(context.Background(), d.ds, o)
		if err != nil {
			t.Fatal(err)
		}
		_, held, _ := split(d.ds.Y, res.Opts.Heldout, rand.New(rand.NewPCG(res.Opts.Seed, 1)))
		tr := &trainer{ds: d.ds, net: res.net, o: res.Opts, pw: res.PosWeight}
		p := make([]float64, len(held))
		tr.loss(held, p)
		order := make([]int, len(held))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(p[b], p[a]) })
		var top, all float64
		for r, i := range order {
			g := float64(d.ds.Gap[held[i]])
			all += g
			if r < len(held)/5 {
				top += g
			}
		}
		return top, all
	}
	gapTop, all := captured(WeightGap)
	labelTop, _ := captured(WeightLabel)
	t.Logf("held-out gap in the top 20%%: gap-weighted %.1f, label-weighted %.1f, of %.1f (a random fifth: %.1f)", gapTop, labelTop, all, all/5)
	if !(gapTop > 2*all/5) {
		t.Errorf("the gap-weighted router's top fifth holds %.1f of %.1f nats of gap: not above twice a random fifth's", gapTop, all)
	}
	if _, err := Fit(context.Background(), &Dataset{H: d.ds.H, E: d.ds.E, K: d.ds.K, X: d.ds.X, Y: d.ds.Y}, FitOptions{Algorithm: R2R, Weight: WeightGap}); err == nil {
		t.Error("weight gap on a dataset without gaps trained")
	}
}

// smallFit is a small r2r network that trains in a second.
func smallFit(alg string, seed uint64) FitOptions {
	o := FitOptions{Algorithm: alg, Epochs: 40, Patience: 8, BatchSize: 32, LR: 2e-3, Seed: seed, Target: Target{Share: 0.2, Recall: -1}}
	switch alg {
	case R2R:
		o.HiddenDims, o.Expansion, o.Dropout = []int{32, 64, 32}, 2, 0.1
	case CITER:
		o.HiddenDims = []int{32, 16}
	}
	return o
}

// testFitBeatsRandom: on held-out positions the trained router has a
// lower loss and a higher AUC than the same network untrained (a random
// router), and an AUC well above chance.
func testFitBeatsRandom(t *testing.T, d *tinyData) {
	for _, alg := range []string{R2R, CITER, CoLLM} {
		o := smallFit(alg, 7)
		res, err := Fit(context.Background(), d.ds, o)
		if err != nil {
			t.Fatal(err)
		}
		// The untrained network, with the same seed, split and loss weight.
		o = res.Opts
		_, held, _ := split(d.ds.Y, o.Heldout, rand.New(rand.NewPCG(o.Seed, 1)))
		net, _ := o.newNetwork(d.ds, rand.New(rand.NewPCG(o.Seed, 2)))
		tr := &trainer{ds: d.ds, net: net, o: o, pw: res.PosWeight}
		p := make([]float64, len(held))
		loss := tr.loss(held, p)
		y := make([]uint8, len(held))
		for i, k := range held {
			y[i] = d.ds.Y[k]
		}
		auc := AUC(Curve(p, y))
		t.Logf("%s: held-out loss %.4f (untrained %.4f), AUC %.3f (untrained %.3f), %d epochs, threshold %.3f: share %.3f recall %.3f",
			alg, res.HeldoutLoss, loss, res.AUC, auc, len(res.Losses), res.Threshold, res.At.Share, res.At.Recall)
		if !(res.HeldoutLoss < loss) || !(res.AUC > auc) || res.AUC < 0.7 {
			t.Errorf("%s: trained held-out loss %.4f AUC %.3f against untrained %.4f and %.3f", alg, res.HeldoutLoss, res.AUC, loss, auc)
		}
		if math.Abs(res.At.Share-0.2) > 0.05 {
			t.Errorf("%s: held-out share %.3f at the threshold, target 0.2", alg, res.At.Share)
		}
	}
}

// testFitDeterministic: the same seed gives the same file, byte for byte;
// another seed another file.
func testFitDeterministic(t *testing.T, d *tinyData) {
	file := func(seed uint64) []byte {
		o := smallFit(R2R, seed)
		o.Epochs = 6
		res, err := Fit(context.Background(), d.ds, o)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := res.Write(&b, nn.RouterMeta{SLM: "s", LLM: "l"}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a, b, c := file(3), file(3), file(4)
	if !bytes.Equal(a, b) {
		t.Fatal("two runs with seed 3 wrote different files")
	}
	if bytes.Equal(a, c) {
		t.Fatal("seeds 3 and 4 wrote the same file")
	}
}

// servedStep rebuilds the small model's step outputs of dataset rows:
// the hidden state, the token, and logits whose top K are the row's.
func servedStep(d *tinyData, rows []int) *route.Step {
	ds := d.ds
	W, V := ds.H+ds.E+ds.K, d.slm.Info().VocabSize
	s := &route.Step{Model: 0, Embed: d.slm}
	for _, i := range rows {
		row := ds.X[i*W : (i+1)*W]
		logits := slices.Repeat([]float32{float32(math.Inf(-1))}, V)
		copy(logits, row[ds.H+ds.E:])
		s.Requests = append(s.Requests, &route.Request{})
		s.Outputs = append(s.Outputs, engine.Output{Token: ds.Tok[i], Hidden: row[:ds.H], Logits: logits})
	}
	return s
}

// testTrainedFilesServe writes each algorithm's router, loads it through
// the algorithm's own New (with the tiny pair's model facts, so that the
// metadata is checked) and routes dataset positions: the decisions are
// those of the trained network's probabilities against the threshold, and
// r2r's served probabilities equal the network's.
func testTrainedFilesServe(t *testing.T, d *tinyData) {
	infos := []engine.Info{d.slm.Info(), d.llm.Info()}
	rows := make([]int, 0, 200)
	for i := 0; i < d.ds.Len(); i += max(1, d.ds.Len()/200) {
		rows = append(rows, i)
	}
	for _, c := range []struct {
		alg string
		new func(route.Spec) (route.Algorithm, error)
	}{{R2R, r2r.New}, {CITER, citer.New}, {CoLLM, colm.New}} {
		o := smallFit(c.alg, 5)
		o.Epochs = 5
		res, err := Fit(context.Background(), d.ds, o)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), c.alg+".safetensors")
		if err := res.Save(path, nn.RouterMeta{SLM: "stories260K", LLM: "llama2xs", VocabSize: infos[0].VocabSize, VocabHash: infos[0].VocabHash, HiddenSize: infos[0].HiddenSize}); err != nil {
			t.Fatal(err)
		}
		params := map[string]string{"weights": path}
		switch c.alg { // r2r takes its threshold from the file's common_args
		case CITER:
			params["tau"] = ftoa(res.RouteThreshold())
		case CoLLM:
			params["eta"] = ftoa(res.RouteThreshold())
		}
		alg, err := c.new(route.Spec{Model: 0, Models: []string{"s", "l"}, Infos: infos, Params: params})
		if err != nil {
			t.Fatalf("%s: %v", c.alg, err)
		}
		if a, ok := alg.(*r2r.Algorithm); ok && a.Threshold != res.Threshold {
			t.Fatalf("r2r serves threshold %v, trained %v", a.Threshold, res.Threshold)
		}
		tr := &trainer{ds: d.ds, net: res.net, o: res.Opts, pw: 1}
		p := make([]float64, len(rows))
		tr.loss(rows, p)
		s := servedStep(d, rows)
		if a, ok := alg.(*r2r.Algorithm); ok {
			for i, q := range a.Probabilities(s) {
				if math.Abs(q-p[i]) > 1e-4 {
					t.Fatalf("r2r row %d: served probability %v, trained network %v", rows[i], q, p[i])
				}
			}
		}
		dec := make([]route.Decision, len(rows))
		alg.Route(s, dec)
		checked, sent := 0, 0
		for i := range rows {
			if math.Abs(p[i]-res.Threshold) < 1e-4 {
				continue // float32 serving may round either way
			}
			checked++
			if want := p[i] >= res.Threshold; (dec[i].Next == 1) != want {
				t.Fatalf("%s row %d: probability %v, threshold %v, routed %v", c.alg, rows[i], p[i], res.Threshold, dec[i].Next == 1)
			}
			sent += dec[i].Next
		}
		if sent == 0 || sent == checked {
			t.Fatalf("%s: %d of %d positions routed: the comparison saw one outcome", c.alg, sent, checked)
		}
		w, err := nn.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		m, ok, err := nn.ReadMeta(w)
		if err != nil || !ok || m.Algorithm != c.alg || m.Threshold != res.RouteThreshold() || m.Metrics["examples"] != float64(d.ds.Len()) {
			t.Fatalf("%s: metadata %+v, %v, %v", c.alg, m, ok, err)
		}
	}
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
