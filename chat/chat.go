// Package chat turns a list of chat messages into a prompt. A model file
// ships its chat template as Jinja source (GGUF key
// tokenizer.chat_template, or a file named by --chat-template); Template
// runs it with a Jinja engine the way Hugging Face's apply_chat_template
// does. For models without one, three built-in layouts remain, found by
// Detect from a template's markers or named explicitly:
//
//   - ChatML (Qwen, many others): "<|im_start|>role\ncontent<|im_end|>\n"
//     per message, then "<|im_start|>assistant\n".
//   - Llama 3: "<|begin_of_text|>", then "<|start_header_id|>role<|end_header_id|>\n\n
//     content<|eot_id|>" per message, then the assistant header.
//   - Llama 2: "<s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] answer </s>"
//     per turn, the system prompt folded into the first user message.
//   - Plain, the fallback for models without a template (simulated
//     models): one "role: content" line per message, then "assistant:"
//     for the model to continue.
//
// Rendering returns segments so that control tokens the template writes
// (such as <|im_start|>) are encoded as their special token ids, while
// message content is always text, even where a user spells a control
// token.
package chat

import "strings"

// Family is a chat template family.
type Family int

// Template families.
const (
	// Plain is the documented fallback: "role: content" lines.
	Plain Family = iota
	// ChatML uses <|im_start|> and <|im_end|>.
	ChatML
	// Llama2 uses [INST] and <<SYS>>.
	Llama2
	// Llama3 uses <|start_header_id|> and <|eot_id|>.
	Llama3
)

// String names the family.
func (f Family) String() string {
	switch f {
	case ChatML:
		return "chatml"
	case Llama2:
		return "llama2"
	case Llama3:
		return "llama3"
	}
	return "plain"
}

// Detect recognises a template's family by its markers; anything else
// (including an empty template) is Plain.
func Detect(template string) Family {
	switch {
	case strings.Contains(template, "<|start_header_id|>") && strings.Contains(template, "<|eot_id|>"):
		return Llama3
	case strings.Contains(template, "<|im_start|>"):
		return ChatML
	case strings.Contains(template, "[INST]"):
		return Llama2
	}
	return Plain
}

// Message is one chat message.
type Message struct {
	// Role is "system", "user", "assistant" (or any other role name).
	Role string
	// Content is the message text.
	Content string
	// ToolCalls are an assistant's calls (tools.go).
	ToolCalls []ToolCall
	// ToolCallID is the call a tool result answers.
	ToolCallID string
}

// Segment is a piece of a rendered prompt: text to tokenize, or the name
// of a special token.
type Segment struct {
	// Text is the segment's text or the special token's name.
	Text string
	// Special marks a special token.
	Special bool
}

// StopTokens are the special tokens that end the assistant's turn, beyond
// the model's own end-of-sequence token.
func (f Family) StopTokens() []string {
	switch f {
	case ChatML:
		return []string{"<|im_end|>"}
	case Llama3:
		return []string{"<|eot_id|>"}
	}
	return nil
}

// Render lays out msgs in the family's format and opens the assistant's
// turn.
func (f Family) Render(msgs []Message) []Segment { return f.render(msgs, true) }

// render lays out msgs; open adds the assistant's opening.
func (f Family) render(msgs []Message, open bool) []Segment {
	var r renderer
	switch f {
	case ChatML:
		for _, m := range msgs {
			r.special("<|im_start|>")
			r.text(m.Role + "\n" + m.Content)
			r.special("<|im_end|>")
			r.text("\n")
		}
		if open {
			r.special("<|im_start|>")
			r.text("assistant\n")
		}
	case Llama3:
		r.special("<|begin_of_text|>")
		for _, m := range msgs {
			r.header(m.Role)
			r.text(strings.TrimSpace(m.Content))
			r.special("<|eot_id|>")
		}
		if open {
			r.header("assistant")
		}
	case Llama2:
		r.llama2(msgs, open)
	default:
		var b strings.Builder
		for _, m := range msgs {
			b.WriteString(m.Role)
			b.WriteString(": ")
			b.WriteString(m.Content)
			b.WriteString("\n")
		}
		if open {
			b.WriteString("assistant:")
		}
		r.text(b.String())
	}
	return r.segs
}

type renderer struct{ segs []Segment }

func (r *renderer) special(name string) { r.segs = append(r.segs, Segment{Text: name, Special: true}) }

func (r *renderer) text(s string) {
	if s == "" {
		return
	}
	if n := len(r.segs); n > 0 && !r.segs[n-1].Special {
		r.segs[n-1].Text += s
		return
	}
	r.segs = append(r.segs, Segment{Text: s})
}

func (r *renderer) header(role string) {
	r.special("<|start_header_id|>")
	r.text(role)
	r.special("<|end_header_id|>")
	r.text("\n\n")
}

// llama2 writes the Llama 2 chat layout: the system prompt goes inside the
// first [INST] block; each user message opens a turn with BOS and each
// assistant answer closes it with EOS. With open, a conversation that
// ends with an answer gets an empty next turn.
func (r *renderer) llama2(msgs []Message, open bool) {
	system := ""
	if len(msgs) > 0 && msgs[0].Role == "system" {
		system, msgs = strings.TrimSpace(msgs[0].Content), msgs[1:]
	}
	pending := false
	for _, m := range msgs {
		switch m.Role {
		case "assistant":
			if !pending {
				r.special("<s>")
				r.text("[INST]  [/INST]")
			}
			r.text(" " + strings.TrimSpace(m.Content) + " ")
			r.special("</s>")
			pending = false
		default:
			if pending { // two user messages in a row: close the empty answer
				r.text(" ")
				r.special("</s>")
			}
			r.special("<s>")
			content := strings.TrimSpace(m.Content)
			if system != "" {
				content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + content
				system = ""
			}
			r.text("[INST] " + content + " [/INST]")
			pending = true
		}
	}
	if !pending && open {
		r.special("<s>")
		content := ""
		if system != "" {
			content = "<<SYS>>\n" + system + "\n<</SYS>>\n\n"
		}
		r.text("[INST] " + content + " [/INST]")
	}
}
