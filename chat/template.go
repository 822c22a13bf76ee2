package chat

import (
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// Template is a model's chat template: the Jinja source the model ships
// (GGUF tokenizer.chat_template, a template file) executed as Hugging
// Face's apply_chat_template does (trim_blocks and lstrip_blocks on), or
// one of the built-in layouts (Builtin) for models without one. It is
// immutable and safe for concurrent use.
type Template struct {
	name   string
	jinja  *jinja.Template
	family Family // the built-in layout, or the family the Jinja source resembles
	calls  CallFormat
}

// Parse compiles Jinja template source.
func Parse(src string) (*Template, error) {
	j, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	return &Template{name: "jinja", jinja: j, family: Detect(src), calls: DetectCalls(src)}, nil
}

// Builtin returns the built-in layout named name: plain, chatml, llama2 or
// llama3.
func Builtin(name string) (*Template, bool) {
	for _, f := range []Family{Plain, ChatML, Llama2, Llama3} {
		if f.String() == name {
			return &Template{name: name, family: f}, true
		}
	}
	return nil, false
}

// BuiltinNames lists the built-in layouts' names.
func BuiltinNames() []string {
	return []string{Plain.String(), ChatML.String(), Llama2.String(), Llama3.String()}
}

// FromModel is the template of a model whose file carries src (GGUF
// tokenizer.chat_template, "" when it has none): the Jinja source when
// there is one, the Plain layout otherwise. A file's template that does
// not compile is replaced by the built-in layout whose markers it uses
// (Detect), and the compile error is returned beside it for the caller
// to report.
func FromModel(src string) (*Template, error) {
	if src == "" {
		t, _ := Builtin(Plain.String())
		return t, nil
	}
	t, err := Parse(src)
	if err != nil {
		fb, _ := Builtin(Detect(src).String())
		return fb, err
	}
	return t, nil
}

// Name is "jinja" for a template from source, else the built-in
// layout's name.
func (t *Template) Name() string { return t.name }

// StopTokens are special tokens that end the assistant's turn in this
// layout, beyond those the model's vocabulary declares (see
// tokenizer.Tokenizer.EOG).
func (t *Template) StopTokens() []string { return t.family.StopTokens() }

// Options are a rendering's inputs besides the messages.
type Options struct {
	// AddGenerationPrompt opens the assistant's turn after the messages.
	AddGenerationPrompt bool
	// BOS and EOS are the texts of the vocabulary's beginning- and
	// end-of-sequence tokens (bos_token, eos_token; "" leaves them
	// undefined).
	BOS, EOS string
	// Specials are the texts of the vocabulary's control tokens. Where the
	// template's own text holds one, it becomes a Special segment; inside
	// message content it stays text.
	Specials []string
	// Vars are further template variables (e.g. enable_thinking,
	// date_string); messages, add_generation_prompt, bos_token and
	// eos_token take precedence.
	Vars map[string]any
	// Now is strftime_now's clock (time.Now when nil).
	Now func() time.Time
	// Tools are the functions the model may call: the template's tools
	// variable, or, for a template without tool support, a description
	// at the end of the system message (see CallFormat).
	Tools []Tool
}

// Render lays out msgs. The result's text is what the template renders;
// control-token texts the template writes become Special segments, while
// message content is always Text, even where it spells a control token.
func (t *Template) Render(msgs []Message, o Options) ([]Segment, error) {
	msgs, o = t.toolsFallback(msgs, o)
	if t.jinja == nil {
		return t.family.render(msgs, o.AddGenerationPrompt), nil
	}
	esc := newEscaper(o.Specials)
	data := make(map[string]any, len(o.Vars)+5)
	for k, v := range o.Vars {
		data[k] = v
	}
	data["add_generation_prompt"] = o.AddGenerationPrompt
	if o.BOS != "" {
		data["bos_token"] = o.BOS
	}
	if o.EOS != "" {
		data["eos_token"] = o.EOS
	}
	vals := make(map[string]jinja.Value, len(data)+3)
	for k, v := range data {
		vals[k] = jinja.FromGoValue(v)
	}
	vals["messages"] = messageValues(msgs, esc)
	if len(o.Tools) > 0 {
		vals["tools"] = toolValues(o.Tools, esc)
	}
	if o.Now != nil {
		vals["strftime_now"] = strftimeNow(o.Now)
	}
	out, err := t.jinja.RenderValues(vals)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	return esc.segments(out), nil
}

// strftimeNow is the strftime_now global on the given clock.
func strftimeNow(now func() time.Time) jinja.Value {
	return jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), fmt.Errorf("strftime_now: want one format string")
		}
		return jinja.NewString(strftime(now(), args[0].AsString())), nil
	})
}

// strftime formats t with the C strftime directives templates use.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch format[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
