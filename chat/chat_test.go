package chat

import (
	"strings"
	"testing"
)

// flat renders segments with specials in brackets for comparison.
func flat(segs []Segment) string {
	var b strings.Builder
	for _, s := range segs {
		if s.Special {
			b.WriteString("{" + s.Text + "}")
		} else {
			b.WriteString(s.Text)
		}
	}
	return b.String()
}

func TestDetect(t *testing.T) {
	for _, c := range []struct {
		tmpl string
		want Family
	}{
		{"", Plain},
		{"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}", ChatML},
		{"{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}{% endfor %}", Llama3},
		{"{% if messages[0]['role'] == 'system' %}{{ bos_token + '[INST] <<SYS>>\\n' }}{% endif %}", Llama2},
		{"{{ messages }} ### Response:", Plain},
	} {
		if got := Detect(c.tmpl); got != c.want {
			t.Errorf("Detect(%.40q) = %v, want %v", c.tmpl, got, c.want)
		}
	}
}

func TestRender(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello."}, {Role: "user", Content: "Why?"}}
	for _, c := range []struct {
		f    Family
		want string
	}{
		{Plain, "system: Be brief.\nuser: Hi\nassistant: Hello.\nuser: Why?\nassistant:"},
		{ChatML, "{<|im_start|>}system\nBe brief.{<|im_end|>}\n{<|im_start|>}user\nHi{<|im_end|>}\n" +
			"{<|im_start|>}assistant\nHello.{<|im_end|>}\n{<|im_start|>}user\nWhy?{<|im_end|>}\n{<|im_start|>}assistant\n"},
		{Llama3, "{<|begin_of_text|>}{<|start_header_id|>}system{<|end_header_id|>}\n\nBe brief.{<|eot_id|>}" +
			"{<|start_header_id|>}user{<|end_header_id|>}\n\nHi{<|eot_id|>}" +
			"{<|start_header_id|>}assistant{<|end_header_id|>}\n\nHello.{<|eot_id|>}" +
			"{<|start_header_id|>}user{<|end_header_id|>}\n\nWhy?{<|eot_id|>}" +
			"{<|start_header_id|>}assistant{<|end_header_id|>}\n\n"},
		{Llama2, "{<s>}[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. {</s>}{<s>}[INST] Why? [/INST]"},
	} {
		if got := flat(c.f.Render(msgs)); got != c.want {
			t.Errorf("%v:\n got %q\nwant %q", c.f, got, c.want)
		}
	}
}

func TestStopTokens(t *testing.T) {
	if s := ChatML.StopTokens(); len(s) != 1 || s[0] != "<|im_end|>" {
		t.Fatalf("ChatML stops %v", s)
	}
	if s := Llama3.StopTokens(); len(s) != 1 || s[0] != "<|eot_id|>" {
		t.Fatalf("Llama3 stops %v", s)
	}
	if Plain.StopTokens() != nil || Llama2.StopTokens() != nil {
		t.Fatal("plain and llama2 end with the model's EOS")
	}
}
