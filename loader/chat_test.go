package loader

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenrouter/tokenrouter/chat"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/internal/testmodels"
)

const chatML = "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// byteTokens is a byte-level vocabulary of n tokens: the 256 byte runes,
// fillers, and ChatML's control tokens last.
func byteTokens(n int) []string {
	var out []string
	for b := range 256 {
		out = append(out, fmt.Sprintf("%c", 0x100+b)) // distinct texts; the mapping does not matter here
	}
	for len(out) < n-2 {
		out = append(out, fmt.Sprintf("filler%d", len(out)))
	}
	return append(out, "<|im_start|>", "<|im_end|>")
}

// metaGGUF writes a GGUF file holding a byte-level tokenizer and, unless
// empty, a chat template (no tensors: the text side reads metadata only).
func metaGGUF(t *testing.T, template string) string {
	t.Helper()
	tokens := byteTokens(300)
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = 1
	}
	types[len(types)-2], types[len(types)-1] = 3, 3
	w := gguf.NewWriter()
	kv := map[string]any{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types,
		"tokenizer.ggml.merges": []string{"a b"}, "tokenizer.ggml.eos_token_id": uint32(len(tokens) - 1)}
	if template != "" {
		kv["tokenizer.chat_template"] = template
	}
	for k, v := range kv {
		if err := w.AddKV(k, v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// renderOne renders one user message with tx and returns the text and
// the control tokens it wrote.
func renderOne(t *testing.T, tx Text) (string, []string) {
	t.Helper()
	segs, err := tx.Template.Render([]chat.Message{{Role: "user", Content: "hi"}},
		chat.Options{AddGenerationPrompt: true, Specials: tx.Tokenizer.ControlTexts()})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var specials []string
	for _, s := range segs {
		text.WriteString(s.Text)
		if s.Special {
			specials = append(specials, s.Text)
		}
	}
	return text.String(), specials
}

// TestChatTemplateSources: the GGUF file's template, --chat-template as a
// file or a built-in name, the fallbacks, and the errors.
func TestChatTemplateSources(t *testing.T) {
	ks := Builtin()
	open := func(m config.Model) (Text, error) {
		m.Name, m.Engine = "m", KindCPU
		return ks.OpenText(m, 300)
	}
	shipped, err := open(config.Model{Path: metaGGUF(t, chatML)})
	if err != nil || shipped.Template.Name() != "jinja" || shipped.TemplateErr != nil {
		t.Fatalf("shipped: %v %v", shipped.Template, err)
	}
	if got, sp := renderOne(t, shipped); got != "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" || len(sp) != 3 {
		t.Fatalf("shipped renders %q with control tokens %q", got, sp)
	}
	none, err := open(config.Model{Path: metaGGUF(t, "")})
	if err != nil || none.Template.Name() != "plain" {
		t.Fatalf("no template: %v %v", none.Template, err)
	}
	broken, err := open(config.Model{Path: metaGGUF(t, "<|im_start|>{% for %}")})
	if err != nil || broken.Template.Name() != "chatml" || broken.TemplateErr == nil {
		t.Fatalf("broken shipped template: %v %v %v", broken.Template, broken.TemplateErr, err)
	}
	named, err := open(config.Model{Path: metaGGUF(t, chatML), ChatTemplate: "llama3"})
	if err != nil || named.Template.Name() != "llama3" {
		t.Fatalf("built-in name: %v %v", named.Template, err)
	}
	file, err := open(config.Model{Path: metaGGUF(t, ""), ChatTemplate: writeFile(t, "t.jinja", "{{ messages[0].content }}!")})
	if err != nil {
		t.Fatalf("template file: %v", err)
	}
	if got, _ := renderOne(t, file); got != "hi!" {
		t.Fatalf("template file renders %q", got)
	}
	for _, c := range []struct{ tmpl, want string }{
		{"nope", `chat_template "nope": want a template file or one of plain, chatml, llama2, llama3`},
		{writeFile(t, "bad.jinja", "{% if %}"), "chat template"},
		{filepath.Join(t.TempDir(), "missing.jinja"), "no such file"},
	} {
		if _, err := open(config.Model{Path: metaGGUF(t, ""), ChatTemplate: c.tmpl}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.tmpl, err, c.want)
		}
	}
	if err := ks.Check(config.Model{Name: "s", Engine: KindSim, Profile: "paper-r2r/slm", ChatTemplate: "nope"}); err == nil {
		t.Fatal("an unknown built-in name passed Check")
	}
	sim, err := ks.OpenText(config.Model{Name: "s", Engine: KindSim, Profile: "paper-r2r/slm", ChatTemplate: "chatml"}, 0)
	if err != nil || sim.Template.Name() != "chatml" {
		t.Fatalf("sim: %v %v", sim.Template, err)
	}
}

// TestHFTokenizerTemplate: a llama2.c checkpoint with a Hugging Face
// tokenizer folder takes the tokenizer and the folder's chat template.
func TestHFTokenizerTemplate(t *testing.T) {
	dir := t.TempDir()
	tokens := byteTokens(512)
	vocab := map[string]int{}
	for i, s := range tokens[:len(tokens)-2] {
		vocab[s] = i
	}
	tj := map[string]any{
		"added_tokens": []any{
			map[string]any{"id": 510, "content": "<|im_start|>", "special": true},
			map[string]any{"id": 511, "content": "<|im_end|>", "special": true}},
		"pre_tokenizer": map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}},
	}
	for name, v := range map[string]any{"tokenizer.json": tj, "tokenizer_config.json": map[string]any{"eos_token": "<|im_end|>", "chat_template": chatML}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := config.Model{Name: "b", Engine: KindCPU, Path: filepath.Join(testmodels.Dir(t), "stories260K.bin"), Tokenizer: dir}
	tx, err := Builtin().OpenText(m, 512)
	if err != nil {
		t.Fatal(err)
	}
	if tx.Template.Name() != "jinja" || tx.Tokenizer.EOS != 511 || !tx.Tokenizer.IsEOG(511) {
		t.Fatalf("template %v, EOS %d", tx.Template.Name(), tx.Tokenizer.EOS)
	}
	if got, sp := renderOne(t, tx); !strings.HasPrefix(got, "<|im_start|>user\nhi<|im_end|>") || len(sp) != 3 {
		t.Fatalf("renders %q with control tokens %q", got, sp)
	}
}
