// Package loader is TokenRouter's composition root for models: it turns a
// model description (config.Model: a configuration file's model entry, or
// the same fields taken from command-line flags) into a running
// engine.Engine and the model's text side (its tokenizer and chat
// template). Every command and the server open models through it, and it
// is the one place that knows engine kinds.
//
// An engine kind is a Kind value; Builtin is the static table of the
// built-in kinds. Adding an engine kind is its package plus one line in
// that table (or, for a kind of its own, one line appending its Kind to
// the table a caller passes on, as the server's tests do with a fake
// engine).
package loader

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/chat"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// Kind is one engine kind: how a description of it is checked and opened.
type Kind struct {
	// Name is what a description's Engine field says ("sim", "cpu").
	Name string
	// Check validates a description of this kind without opening
	// anything.
	Check func(m config.Model) error
	// Engine opens the model's engine.
	Engine func(ctx context.Context, m config.Model) (engine.Engine, error)
	// Text opens the model's text side. vocab is the vocabulary size of
	// its engine, which may run in another process.
	Text func(m config.Model, vocab int) (Text, error)
	// StepLatency, if set, returns the time of a one-sequence decode step
	// when it is known before the model runs (a simulated latency
	// profile), 0 when unknown.
	StepLatency func(m config.Model) time.Duration
	// Cores is true when the kind's engines compute on this machine's
	// cores, so that a deployment's placement (Place) gives them threads; a
	// simulated engine only waits.
	Cores bool
}

// Text is a model's text side.
type Text struct {
	// Tokenizer encodes prompts and decodes output; nil for a simulated
	// model, whose tokens are not text (the server renders them with its
	// simulated vocabulary).
	Tokenizer *tokenizer.Tokenizer
	// Template is the model's chat template: the configured one, the one
	// its files ship, or the plain layout.
	Template *chat.Template
	// TemplateErr, when not nil, says why the template the model's file
	// ships was replaced by a built-in layout (it did not compile).
	TemplateErr error
}

// Model is an opened model: its engine and its text side.
type Model struct {
	// Engine runs the model; the caller owns it and closes it.
	Engine engine.Engine
	// Text is the model's text side.
	Text
}

// Kinds is a table of engine kinds.
type Kinds []Kind

// Builtin returns the table of built-in engine kinds, one line per kind.
func Builtin() Kinds {
	return Kinds{
		simKind(),
		cpuKind(nil),
	}
}

// Names lists the kinds' names.
func (ks Kinds) Names() []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.Name
	}
	return out
}

// Kind returns the kind named name.
func (ks Kinds) Kind(name string) (Kind, error) {
	for _, k := range ks {
		if k.Name == name {
			return k, nil
		}
	}
	return Kind{}, fmt.Errorf("engine %q: want %s", name, strings.Join(ks.Names(), " or "))
}

// Check validates m against its kind without opening anything.
func (ks Kinds) Check(m config.Model) error {
	k, err := ks.Kind(m.Engine)
	if err != nil {
		return fmt.Errorf("model %s: %w", m.Name, err)
	}
	if err := k.Check(m); err != nil {
		return fmt.Errorf("model %s: %w", m.Name, err)
	}
	if err := checkChatTemplate(m); err != nil {
		return fmt.Errorf("model %s: %w", m.Name, err)
	}
	return nil
}

// CheckAll validates every model of cfg and joins the errors.
func (ks Kinds) CheckAll(cfg *config.Config) error {
	var errs []error
	for _, m := range cfg.Models {
		if err := ks.Check(m); err != nil {
			errs = append(errs, fmt.Errorf("config: %w", err))
		}
	}
	return errors.Join(errs...)
}

// StepLatency returns m's one-sequence decode step time when its kind
// knows it before the model runs, 0 otherwise.
func (ks Kinds) StepLatency(m config.Model) time.Duration {
	k, err := ks.Kind(m.Engine)
	if err != nil || k.StepLatency == nil || k.Check(m) != nil {
		return 0
	}
	return k.StepLatency(m)
}

// OpenEngine checks m and opens its engine alone (no text side).
func (ks Kinds) OpenEngine(ctx context.Context, m config.Model) (engine.Engine, error) {
	if err := ks.Check(m); err != nil {
		return nil, err
	}
	k, _ := ks.Kind(m.Engine)
	e, err := k.Engine(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name, err)
	}
	return e, nil
}

// OpenText checks m and opens its text side alone, for a model whose
// engine runs elsewhere and announced a vocabulary of vocab tokens.
func (ks Kinds) OpenText(m config.Model, vocab int) (Text, error) {
	if err := ks.Check(m); err != nil {
		return Text{}, err
	}
	k, _ := ks.Kind(m.Engine)
	t, err := k.Text(m, vocab)
	if err != nil {
		return Text{}, fmt.Errorf("model %s: %w", m.Name, err)
	}
	if t.Tokenizer != nil && t.Tokenizer.VocabSize() != vocab {
		return Text{}, fmt.Errorf("model %s: tokenizer has %d tokens but the model has %d", m.Name, t.Tokenizer.VocabSize(), vocab)
	}
	return t, nil
}

// Open checks m and opens its engine and its text side.
func (ks Kinds) Open(ctx context.Context, m config.Model) (Model, error) {
	e, err := ks.OpenEngine(ctx, m)
	if err != nil {
		return Model{}, err
	}
	t, err := ks.OpenText(m, e.Info().VocabSize)
	if err != nil {
		return Model{}, errors.Join(err, e.Close())
	}
	return Model{Engine: e, Text: t}, nil
}

// OpenAll opens every description in order; on an error it closes what
// it opened.
func (ks Kinds) OpenAll(ctx context.Context, ms []config.Model) ([]Model, error) {
	out := make([]Model, 0, len(ms))
	for _, m := range ms {
		o, err := ks.Open(ctx, m)
		if err != nil {
			for _, p := range out {
				err = errors.Join(err, p.Engine.Close())
			}
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}
