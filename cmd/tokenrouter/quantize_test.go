package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// TestGenModelThenQuantize generates a tiny F32 model, quantises it with
// a preset and a pure type, and opens the results.
func TestGenModelThenQuantize(t *testing.T) {
	dir := t.TempDir()
	f32 := filepath.Join(dir, "f32.gguf")
	if out, err := runCmd(t, "gen-model", "--shape", "tiny-llama", "--type", "F32", "--out", f32, "--seed", "5"); err != nil || !strings.Contains(out, "tiny-llama F32") {
		t.Fatalf("gen-model: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		ft   uint64
		want map[string]gguf.TensorType
	}{
		{[]string{"--type", "q4_k_m"}, 15, map[string]gguf.TensorType{"blk.0.attn_q.weight": gguf.Q4_K, "blk.1.ffn_down.weight": gguf.Q6_K, "output.weight": gguf.Q6_K, "blk.0.attn_norm.weight": gguf.F32}},
		{[]string{"--type", "Q3_K", "--pure", "--threads", "1"}, 12, map[string]gguf.TensorType{"blk.0.attn_q.weight": gguf.Q3_K, "output.weight": gguf.Q3_K}},
	} {
		out := filepath.Join(dir, "q.gguf")
		msg, err := runCmd(t, append([]string{"quantize", f32, out}, c.args...)...)
		if err != nil {
			t.Fatalf("quantize %v: %v\n%s", c.args, err, msg)
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		if ft, _ := f.Uint("general.file_type"); ft != c.ft {
			t.Errorf("%v: file type %d, want %d", c.args, ft, c.ft)
		}
		for name, typ := range c.want {
			if ti, ok := f.Tensor(name); !ok || ti.Type != typ {
				t.Errorf("%v: %s is %v, want %s", c.args, name, ti, typ)
			}
		}
		f.Close()
	}
	for _, bad := range [][]string{
		{"quantize", f32, filepath.Join(dir, "x.gguf"), "--type", "Q9"},
		{"quantize", f32, filepath.Join(dir, "x.gguf"), "--type", "Q4_K_M", "--pure"},
		{"quantize", filepath.Join(dir, "missing.gguf"), filepath.Join(dir, "x.gguf")},
		{"gen-model", "--shape", "nope", "--out", filepath.Join(dir, "x.gguf")},
	} {
		if _, err := runCmd(t, bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if _, err := gguf.OpenMeta(filepath.Join(dir, "x.gguf")); err == nil {
		t.Error("a failed command left its output behind")
	}
}
