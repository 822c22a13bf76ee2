package termchat

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// settings are what /set changes: the sampling parameters of every
// request and the system message.
type settings struct {
	temperature, topP *float64
	maxTokens         *int
	seed              *uint64
	system            string
}

func settingsOf(o Options) settings {
	return settings{temperature: o.Temperature, topP: o.TopP, maxTokens: o.MaxTokens, seed: o.Seed, system: o.System}
}

// request is the body that sends msgs to preset with these settings.
func (st settings) request(preset string, msgs []message) chatRequest {
	return chatRequest{Model: preset, Messages: msgs, Temperature: st.temperature, TopP: st.topP, MaxTokens: st.maxTokens, Seed: st.seed}
}

// setters parse /set NAME VALUE into the settings; "default" (or
// nothing) gives the server's default back.
func setters() map[string]func(*settings, string) error {
	return map[string]func(*settings, string) error{
		"temperature": func(st *settings, v string) error { return setFloat(&st.temperature, v, 0, 2) },
		"top_p":       func(st *settings, v string) error { return setFloat(&st.topP, v, 0, 1) },
		"max_tokens": func(st *settings, v string) error {
			if v == "" || v == "default" {
				st.maxTokens = nil
				return nil
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("max_tokens %q: want a positive integer", v)
			}
			st.maxTokens = &n
			return nil
		},
		"seed": func(st *settings, v string) error {
			if v == "" || v == "default" {
				st.seed = nil
				return nil
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("seed %q: want a non-negative integer", v)
			}
			st.seed = &n
			return nil
		},
		"system": func(st *settings, v string) error { st.system = v; return nil },
	}
}

// setFloat sets *p from v, within [lo, hi].
func setFloat(p **float64, v string, lo, hi float64) error {
	if v == "" || v == "default" {
		*p = nil
		return nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < lo || f > hi {
		return fmt.Errorf("%q: want a number from %g to %g", v, lo, hi)
	}
	*p = &f
	return nil
}

// show lists the settings.
func (st settings) show() string {
	f := func(p *float64) string {
		if p == nil {
			return "default"
		}
		return strconv.FormatFloat(*p, 'g', -1, 64)
	}
	maxTok, seed := "default", "default"
	if st.maxTokens != nil {
		maxTok = strconv.Itoa(*st.maxTokens)
	}
	if st.seed != nil {
		seed = strconv.FormatUint(*st.seed, 10)
	}
	return fmt.Sprintf("temperature %s, top_p %s, max_tokens %s, seed %s, system %q", f(st.temperature), f(st.topP), maxTok, seed, st.system)
}

const helpText = `Commands:
  /set                   show the settings
  /set temperature 0.7   also top_p, max_tokens, seed; "default" gives the server's back
  /set system TEXT       the system message (/set system alone removes it)
  /model                 list the models (presets) of the server
  /model NAME            chat with another one (the conversation goes on)
  /clear                 forget the conversation
  /stats                 tokens, speed and each model's share over the session
  /help                  this list
  /exit                  leave (also Ctrl-D, or Ctrl-C at an empty prompt)
A line ending in \ continues on the next; """ opens a block that """ closes.`

// command runs a slash command and reports whether the session ends.
func (s *session) command(ctx context.Context, line string) (exit bool) {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch name {
	case "/exit", "/quit", "/bye":
		return true
	case "/help", "/?":
		for l := range strings.Lines(helpText) {
			s.paint.info("%s", strings.TrimSuffix(l, "\n"))
		}
	case "/clear":
		s.history, s.used = nil, 0
		s.paint.info("Conversation cleared.")
	case "/set":
		s.set(arg)
	case "/model":
		s.model(ctx, arg)
	case "/stats":
		s.stats()
	default:
		s.paint.errorf("unknown command %s (/help lists them)", name)
	}
	return false
}

// set shows or changes a setting.
func (s *session) set(arg string) {
	if arg == "" {
		s.paint.info("%s", clean(s.settings.show()))
		return
	}
	key, val, _ := strings.Cut(arg, " ")
	val = strings.TrimSpace(val)
	set, ok := setters()[key]
	if !ok {
		s.paint.errorf("/set %s: want one of %s", key, strings.Join(slices.Sorted(maps.Keys(setters())), ", "))
		return
	}
	if err := set(&s.settings, val); err != nil {
		s.paint.errorf("/set %s: %v", key, err)
		return
	}
	if val == "" {
		val = "default"
	}
	s.paint.info("Set %s to %s.", key, clean(val))
}

// model lists the server's presets or switches to one.
func (s *session) model(ctx context.Context, name string) {
	if name == "" {
		list, err := s.client.presets(ctx)
		if err != nil {
			s.paint.errorf("%v", err)
			return
		}
		for _, p := range list {
			mark := "  "
			if p.ID == s.preset.ID {
				mark = "* "
			}
			s.paint.info("%s%s: %s", mark, clean(p.ID), clean(p.Description))
		}
		return
	}
	if err := s.choose(ctx, name); err != nil {
		s.paint.errorf("%v", err)
		return
	}
	s.paint.models = s.preset.modelNames()
	s.paint.info("Chatting with %s: %s routing over %s.", clean(s.preset.ID), clean(s.preset.Algorithm), s.paint.legend())
}

// choose makes the preset name (the first listed when empty) the one the
// session talks to.
func (s *session) choose(ctx context.Context, name string) error {
	list, err := s.client.presets(ctx)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return fmt.Errorf("the server at %s lists no models", s.client.base)
	}
	if name == "" {
		s.preset = list[0]
		return nil
	}
	ids := make([]string, len(list))
	for i, p := range list {
		if p.ID == name {
			s.preset = p
			return nil
		}
		ids[i] = p.ID
	}
	return fmt.Errorf("no model %q (the server has %s)", name, strings.Join(ids, ", "))
}

// stats reports the session so far.
func (s *session) stats() {
	s.paint.info("%s, %s in the conversation.", count(s.answers, "answer"), count(len(s.history), "message"))
	if s.used > 0 && s.preset.Context > 0 {
		s.paint.info("Context at the last complete answer: %d of %d tokens.", s.used, s.preset.Context)
	}
	s.paint.stats("session", s.total)
}

// count is "n thing", or "n things" but for one.
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return strconv.Itoa(n) + " " + thing + "s"
}
