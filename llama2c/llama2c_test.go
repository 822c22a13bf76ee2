package llama2c

import (
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/tokenrouter/tokenrouter/internal/testmodels"
)

func modelsDir(t testing.TB) string { return testmodels.Dir(t) }

func TestRealFiles(t *testing.T) {
	dir := modelsDir(t)
	for _, tc := range []struct {
		file   string
		hidden int
		seq    int
	}{{"stories260K.bin", 172, 512}, {"llama2xs-model.bin", 192, 256}} {
		ck, err := OpenCheckpoint(filepath.Join(dir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		want := Config{Dim: 64, HiddenDim: tc.hidden, NLayers: 5, NHeads: 8, NKVHeads: 4, VocabSize: 512, SeqLen: tc.seq, Shared: true}
		if ck.Config != want {
			t.Fatalf("%s: config %+v, want %+v", tc.file, ck.Config, want)
		}
		if &ck.WCls[0] != &ck.TokenEmbedding[0] || len(ck.W2) != 5*64*tc.hidden || len(ck.RMSFinal) != 64 {
			t.Fatalf("%s: weights not laid out as expected", tc.file)
		}
	}
	v, err := OpenTokenizer(filepath.Join(dir, "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	if v.MaxTokenLength != 7 || len(v.Tokens) != 512 || v.Tokens[1] != "\n<s>\n" || v.Tokens[2] != "\n</s>\n" || v.Tokens[3] != "<0x00>" || v.Scores[511] != -252 {
		t.Fatalf("tokenizer: max %d, %d tokens, %q %q %q %v", v.MaxTokenLength, len(v.Tokens), v.Tokens[1], v.Tokens[2], v.Tokens[3], v.Scores[511])
	}
	all, err := OpenTokenizer(filepath.Join(dir, "tok512.bin"), 0)
	if err != nil || len(all.Tokens) != 512 {
		t.Fatalf("reading to the end: %d tokens, %v", len(all.Tokens), err)
	}
}

// checkpoint builds a tiny checkpoint; vocab < 0 makes the classifier untied.
func checkpoint(dim, hidden, layers, heads, kvHeads, vocab, seq int) []byte {
	var b []byte
	for _, v := range []int{dim, hidden, layers, heads, kvHeads, vocab, seq} {
		b = binary.LittleEndian.AppendUint32(b, uint32(int32(v)))
	}
	V := vocab
	if V < 0 {
		V = -V
	}
	kv := dim / heads * kvHeads
	n := V*dim + layers*(2*dim+2*dim*dim+2*kv*dim+3*hidden*dim) + dim + seq*(dim/heads)
	if vocab < 0 {
		n += V * dim
	}
	for i := range n {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(i)))
	}
	return b
}

func TestUntiedClassifier(t *testing.T) {
	ck, err := ParseCheckpoint(checkpoint(8, 16, 1, 2, 1, -10, 4))
	if err != nil {
		t.Fatal(err)
	}
	if ck.Shared || len(ck.WCls) != 80 || ck.WCls[0] == ck.TokenEmbedding[0] {
		t.Fatalf("untied classifier not read: shared=%v len=%d", ck.Shared, len(ck.WCls))
	}
	// The classifier is the last array of the file.
	want := float32(len(checkpoint(8, 16, 1, 2, 1, -10, 4))/4 - 7 - 80)
	if ck.WCls[0] != want {
		t.Fatalf("WCls[0] = %v, want %v", ck.WCls[0], want)
	}
	tied, err := ParseCheckpoint(checkpoint(8, 16, 1, 2, 1, 10, 4))
	if err != nil || !tied.Shared || &tied.WCls[0] != &tied.TokenEmbedding[0] {
		t.Fatalf("tied: %v", err)
	}
}

func brokenCheckpoints() map[string][]byte {
	good := checkpoint(8, 16, 1, 2, 1, 10, 4)
	hdr := func(v ...int) []byte {
		b := make([]byte, 0, 28)
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(int32(x)))
		}
		return append(b, good[28:]...)
	}
	return map[string][]byte{
		"empty":              {},
		"short header":       good[:20],
		"truncated weights":  good[:len(good)-4],
		"header only":        good[:28],
		"zero dim":           hdr(0, 16, 1, 2, 1, 10, 4),
		"negative layers":    hdr(8, 16, -1, 2, 1, 10, 4),
		"heads not dividing": hdr(8, 16, 1, 3, 1, 10, 4),
		"kv heads":           hdr(8, 16, 1, 2, 3, 10, 4),
		"odd head size":      hdr(6, 16, 1, 2, 1, 10, 4),
		"huge vocab":         hdr(8, 16, 1, 2, 1, 1<<30, 4),
		"huge dims":          hdr(1<<16, 1<<18, 1024, 2, 1, 10, 4),
		"huge seq":           hdr(8, 16, 1, 2, 1, 10, 1<<30),
		"min int vocab":      hdr(8, 16, 1, 2, 1, math.MinInt32, 4),
	}
}

func brokenTokenizers() map[string][]byte {
	tok := binary.LittleEndian.AppendUint32(nil, 4)
	tok = binary.LittleEndian.AppendUint32(tok, math.Float32bits(0))
	tok = binary.LittleEndian.AppendUint32(tok, 2)
	tok = append(tok, "ab"...)
	return map[string][]byte{
		"empty":          {},
		"no tokens":      tok[:4],
		"cut score":      tok[:6],
		"cut text":       tok[:len(tok)-1],
		"huge length":    append(binary.LittleEndian.AppendUint32(append([]byte(nil), tok[:8]...), 1<<31), "ab"...),
		"huge max len":   binary.LittleEndian.AppendUint32(nil, 1<<31),
		"length too big": append(binary.LittleEndian.AppendUint32(append([]byte(nil), tok[:8]...), 1000), "ab"...),
	}
}

func TestBrokenFilesGiveErrors(t *testing.T) {
	for name, b := range brokenCheckpoints() {
		if _, err := ParseCheckpoint(b); !errors.Is(err, ErrFormat) {
			t.Errorf("checkpoint %s: error %v", name, err)
		}
	}
	for name, b := range brokenTokenizers() {
		if _, err := ParseTokenizer(b, 0); !errors.Is(err, ErrFormat) {
			t.Errorf("tokenizer %s: error %v", name, err)
		}
	}
	good := brokenTokenizers()["cut text"]
	good = append(good, 'b')
	if v, err := ParseTokenizer(good, 1); err != nil || v.Tokens[0] != "ab" {
		t.Fatalf("valid tokenizer: %v", err)
	}
	if _, err := ParseTokenizer(good, 2); !errors.Is(err, ErrFormat) {
		t.Fatalf("asking for more tokens than the file holds: %v", err)
	}
	if _, err := ParseTokenizer(good, -1); !errors.Is(err, ErrFormat) {
		t.Fatalf("negative vocab size: %v", err)
	}
}

func FuzzCheckpoint(f *testing.F) {
	f.Add(checkpoint(8, 16, 1, 2, 1, 10, 4))
	f.Add(checkpoint(8, 16, 2, 2, 2, -10, 4))
	for _, b := range brokenCheckpoints() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ck, err := ParseCheckpoint(b)
		if err != nil {
			return
		}
		if len(ck.WCls) != ck.VocabSize*ck.Dim || len(ck.WQ) != ck.NLayers*ck.Dim*ck.Dim {
			t.Fatalf("inconsistent checkpoint %+v", ck.Config)
		}
	})
}

func FuzzTokenizer(f *testing.F) {
	for _, b := range brokenTokenizers() {
		f.Add(b, 0)
	}
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		v, err := ParseTokenizer(b, n%1000)
		if err != nil {
			return
		}
		if len(v.Tokens) != len(v.Scores) || len(v.Tokens) == 0 {
			t.Fatalf("%d tokens, %d scores", len(v.Tokens), len(v.Scores))
		}
	})
}
