package nn

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/engine"
)

// contractJSON is a router file's metadata written as the router file
// contract spells it, by hand.
const contractJSON = `{"format":1,"algorithm":"r2r","slm":"stories260K","llm":"llama2xs",
 "vocab_size":512,"vocab_hash":"887bc8e5bff8ce4d","hidden_size":64,"embed_size":64,"topk":8,
 "threshold":0.4,"target":{"share":0.2},
 "metrics":{"train_loss":0.5,"heldout_loss":0.6,"heldout_auc":0.8,"heldout_pr_auc":0.3,"positives":120,"examples":1000}}`

func contractMeta() RouterMeta {
	return RouterMeta{
		Format: 1, Algorithm: "r2r", SLM: "stories260K", LLM: "llama2xs",
		VocabSize: 512, VocabHash: "887bc8e5bff8ce4d", HiddenSize: 64, EmbedSize: 64, TopK: 8,
		Threshold: 0.4, Target: map[string]float64{"share": 0.2},
		Metrics: map[string]float64{"train_loss": 0.5, "heldout_loss": 0.6, "heldout_auc": 0.8, "heldout_pr_auc": 0.3, "positives": 120, "examples": 1000},
	}
}

func TestReadMetaContractLayout(t *testing.T) {
	m, ok, err := ReadMeta(&Weights{Meta: map[string]string{MetaKey: contractJSON}})
	if err != nil || !ok {
		t.Fatalf("ReadMeta: ok %v, %v", ok, err)
	}
	if want := contractMeta(); !reflect.DeepEqual(m, want) {
		t.Fatalf("ReadMeta = %+v\nwant %+v", m, want)
	}
}

func TestEncodeUsesContractKeysAndRoundTrips(t *testing.T) {
	m := contractMeta()
	m.Format = 0 // Encode writes MetaFormat
	s, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"algorithm", "embed_size", "format", "hidden_size", "llm", "metrics", "slm", "target", "threshold", "topk", "vocab_hash", "vocab_size"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	if string(raw["format"]) != "1" {
		t.Fatalf("format %s, want 1", raw["format"])
	}
	// Through a safetensors file and back.
	var b bytes.Buffer
	ts := map[string]Tensor{"defer.weight": {Shape: []int{1, 2}, Data: []float32{1, 2}}}
	if err := Write(&b, ts, map[string]string{MetaKey: s}); err != nil {
		t.Fatal(err)
	}
	w, err := Read(&b)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := ReadMeta(w)
	if err != nil || !ok || !reflect.DeepEqual(got, contractMeta()) {
		t.Fatalf("round trip: %+v, ok %v, %v", got, ok, err)
	}
	// A citer or co-llm file leaves out the r2r fields.
	c := RouterMeta{Algorithm: "citer", HiddenSize: 64, Threshold: 0.5}
	if s, err := c.Encode(); err != nil || strings.Contains(s, "topk") || strings.Contains(s, "embed_size") {
		t.Fatalf("citer: %s, %v", s, err)
	}
	if _, err := (RouterMeta{Format: 2, Algorithm: "citer"}).Encode(); err == nil {
		t.Fatal("Encode wrote format 2")
	}
}

func TestReadMetaAbsent(t *testing.T) {
	for _, w := range []*Weights{nil, {}, {Meta: map[string]string{"other": "x"}}} {
		if m, ok, err := ReadMeta(w); ok || err != nil || !reflect.DeepEqual(m, RouterMeta{}) {
			t.Errorf("%v: %+v, ok %v, %v", w, m, ok, err)
		}
	}
}

func TestReadMetaRefuses(t *testing.T) {
	good := `"algorithm":"citer","vocab_size":512,"hidden_size":64,"threshold":0.5`
	for _, c := range []struct{ name, json, want string }{
		{"format 2", `{"format":2,` + good + `}`, "format 2 is not supported"},
		{"no format", `{` + good + `}`, "format 0 is not supported"},
		{"unknown field", `{"format":1,"extra":1,` + good + `}`, "unknown field"},
		{"trailing data", `{"format":1,` + good + `} {}`, "after the JSON"},
		{"not JSON", `format=1`, "invalid character"},
		{"not an object", `[1]`, "cannot unmarshal"},
		{"fractional size", `{"format":1,"algorithm":"citer","vocab_size":1.5}`, "cannot unmarshal"},
		{"huge number", `{"format":1,"algorithm":"citer","threshold":1e999}`, "cannot unmarshal"},
		{"algorithm", `{"format":1,"algorithm":"mystery"}`, `algorithm "mystery"`},
		{"negative size", `{"format":1,"algorithm":"citer","hidden_size":-1}`, "hidden_size -1 out of range"},
		{"huge size", `{"format":1,"algorithm":"r2r","topk":2000000000}`, "topk 2000000000 out of range"},
		{"hash case", `{"format":1,"algorithm":"citer","vocab_hash":"887BC8E5BFF8CE4D"}`, "vocab_hash"},
		{"hash length", `{"format":1,"algorithm":"citer","vocab_hash":"887bc8e5"}`, "vocab_hash"},
		{"hash digits", `{"format":1,"algorithm":"citer","vocab_hash":"887bc8e5bff8ce4z"}`, "vocab_hash"},
		{"threshold", `{"format":1,"algorithm":"citer","threshold":1.5}`, "threshold 1.5 out of range"},
		{"target key", `{"format":1,"algorithm":"citer","target":{"accuracy":0.9}}`, `target "accuracy"`},
		{"target value", `{"format":1,"algorithm":"citer","target":{"share":-0.1}}`, "target share=-0.1"},
		{"long name", `{"format":1,"algorithm":"citer","slm":"` + strings.Repeat("x", 2000) + `"}`, "slm: not a name"},
		{"too large", `{"format":1,"algorithm":"citer","slm":"` + strings.Repeat("x", 70000) + `"}`, "at most 65536"},
	} {
		_, ok, err := ReadMeta(&Weights{Meta: map[string]string{MetaKey: c.json}})
		if !ok || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: ok %v, err %v, want one saying %q", c.name, ok, err, c.want)
		}
	}
	many := map[string]float64{}
	for i := range 65 {
		many[strings.Repeat("m", i+1)] = 1
	}
	if err := (RouterMeta{Format: 1, Algorithm: "citer", Metrics: many}).Check(); err == nil {
		t.Error("65 metrics accepted")
	}
}

func TestCheckModel(t *testing.T) {
	m := RouterMeta{Format: 1, Algorithm: "r2r", SLM: "stories260K", VocabSize: 512, VocabHash: "887bc8e5bff8ce4d", HiddenSize: 64}
	same := engine.Info{VocabSize: 512, VocabHash: "887bc8e5bff8ce4d", HiddenSize: 64}
	for _, c := range []struct {
		name string
		m    RouterMeta
		info engine.Info
	}{
		{"same", m, same},
		{"model hash unknown", m, engine.Info{VocabSize: 512, HiddenSize: 64}},
		{"router hash unknown", RouterMeta{VocabSize: 512, HiddenSize: 64}, same},
		{"router sizes unknown", RouterMeta{VocabHash: "887bc8e5bff8ce4d"}, same},
		{"model knows nothing", m, engine.Info{}},
	} {
		if err := c.m.CheckModel("r.safetensors", c.info, "small"); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	for _, c := range []struct {
		name string
		info engine.Info
		want string
	}{
		{"hash", engine.Info{VocabSize: 512, VocabHash: "0123456789abcdef", HiddenSize: 64},
			`router r.safetensors was trained for vocabulary 887bc8e5bff8ce4d (512 tokens, hidden 64) of "stories260K", but model "small" has vocabulary 0123456789abcdef (512 tokens, hidden 64)`},
		{"vocabulary size", engine.Info{VocabSize: 32000, HiddenSize: 64},
			`router r.safetensors was trained for vocabulary 887bc8e5bff8ce4d (512 tokens, hidden 64) of "stories260K", but model "small" has an unknown vocabulary (32000 tokens, hidden 64)`},
		{"hidden size", engine.Info{VocabSize: 512, VocabHash: "887bc8e5bff8ce4d", HiddenSize: 288},
			`router r.safetensors was trained for vocabulary 887bc8e5bff8ce4d (512 tokens, hidden 64) of "stories260K", but model "small" has vocabulary 887bc8e5bff8ce4d (512 tokens, hidden 288)`},
	} {
		err := m.CheckModel("r.safetensors", c.info, "small")
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v\nwant %s", c.name, err, c.want)
		}
	}
	// Unknown router facts show as such; no slm leaves out "of".
	err := RouterMeta{HiddenSize: 64}.CheckModel("c.safetensors", engine.Info{HiddenSize: 288}, "m")
	if want := `router c.safetensors was trained for an unknown vocabulary (? tokens, hidden 64), but model "m" has an unknown vocabulary (? tokens, hidden 288)`; err == nil || err.Error() != want {
		t.Errorf("unknown facts: %v\nwant %s", err, want)
	}
}

func TestCheckRouter(t *testing.T) {
	meta := func(m RouterMeta) *Weights {
		s, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return &Weights{Meta: map[string]string{MetaKey: s}}
	}
	small := []engine.Info{{VocabSize: 512, VocabHash: "887bc8e5bff8ce4d", HiddenSize: 64}, {HiddenSize: 288}}
	names := []string{"small", "large"}
	good := RouterMeta{Algorithm: "citer", VocabSize: 512, VocabHash: "887bc8e5bff8ce4d", HiddenSize: 64}
	for _, c := range []struct {
		name   string
		w      *Weights
		hidden int
		infos  []engine.Info
		want   string // "" for no error
	}{
		{"matching", meta(good), 64, small, ""},
		{"no metadata", &Weights{}, 64, small, ""},
		{"no metadata, other width", &Weights{}, 32, small, `router f takes hidden states of 32 values, but model "small" has hidden 64`},
		{"models unknown", meta(good), 64, nil, ""},
		{"model facts zero", &Weights{}, 32, make([]engine.Info, 2), ""},
		{"other algorithm", meta(RouterMeta{Algorithm: "co-llm"}), 64, small, "router f was trained for algorithm co-llm, not citer"},
		{"metadata against weights", meta(RouterMeta{Algorithm: "citer", HiddenSize: 32}), 64, nil, "router f: its metadata says hidden 32 but its weights take 64 values"},
		{"other vocabulary", meta(RouterMeta{Algorithm: "citer", VocabHash: "0123456789abcdef", HiddenSize: 64}), 64, small,
			`router f was trained for vocabulary 0123456789abcdef (? tokens, hidden 64), but model "small" has vocabulary 887bc8e5bff8ce4d (512 tokens, hidden 64)`},
		{"bad metadata", &Weights{Meta: map[string]string{MetaKey: "{"}}, 64, small, "router f: nn: metadata tokenrouter.router:"},
	} {
		err := CheckRouter(c.w, "f", "citer", c.hidden, c.infos, names)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: %v\nwant %s", c.name, err, c.want)
		}
	}
}
