// Package system builds deployments: the one place that turns a
// specification of models and an algorithm into running sub-servers,
// their router and bus (Open, Remote), and the serving systems the
// benchmarks compare (Build: TokenRouter with or without delayed batching,
// lockstep, std-serving, query-level routing, one model alone). The server,
// bench, eval, generate --route and the cluster front end all build
// through it, so a new option is threaded through one place.
package system

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tokenrouter/tokenrouter/autotune"
	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/constrain"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/internal/faults"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/stream"
	"github.com/tokenrouter/tokenrouter/subserver"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// System is a serving system requests are submitted to: a deployment, a
// baseline, or a server elsewhere.
type System interface {
	// Submit admits a request.
	Submit(ctx context.Context, prompt []int32, p route.Params) (*stream.Stream, error)
	// Close stops the system.
	Close() error
}

// Spec describes one deployment: its models and how they run.
type Spec struct {
	// Models describe the models, in the algorithm's order (small first).
	Models []config.Model
	// Kinds opens them (nil: loader.Builtin()).
	Kinds loader.Kinds
	// Algorithm, Params and Registry name the routing algorithm.
	Algorithm string
	Params    map[string]string
	Registry  *route.Registry
	// Launch is the launch policy; Tuning tunes automatic thresholds.
	Launch sched.Launch
	Tuning *autotune.Options
	// MaxBatch bounds each step's batch (0: the sub-server default).
	MaxBatch int
	// Speculate configures speculative continuation.
	Speculate subserver.Speculation
	// TimeShared makes the engines take turns to step (deploy.Config).
	TimeShared bool
	// BusDelay, when positive, delays every event between the sub-servers
	// (bus.Delayed): a split deployment's network, as an experiment.
	BusDelay time.Duration
	// StallTimeout is the stall watchdog's (deploy.Config).
	StallTimeout time.Duration
	// Observer watches every step; OnPanic and OnEvent are told about
	// panics and models going down (deploy.Config).
	Observer subserver.Observer
	OnPanic  func(*subserver.Panic)
	OnEvent  func(msg string, args ...any)
	// Vocab, if set, gives a model's vocabulary for structured output and
	// stop strings from its text side and vocabulary size.
	Vocab func(t loader.Text, size int) func() *constrain.Vocab
	// SameVocabulary requires the models' tokenizers to agree (routing
	// real models): models without one are refused.
	SameVocabulary bool
	// Faults, if set, injects failures (tests of the failure boundaries).
	Faults *faults.Faults
}

func (s Spec) kinds() loader.Kinds {
	if s.Kinds == nil {
		return loader.Builtin()
	}
	return s.Kinds
}

// Names returns the model names in order.
func (s Spec) Names() []string {
	out := make([]string, len(s.Models))
	for i, m := range s.Models {
		out[i] = m.Name
	}
	return out
}

// config is the deployment configuration of s, without models.
func (s Spec) config() deploy.Config {
	reg := s.Registry
	if s.Faults.Active() {
		reg = s.Faults.Registry(reg)
	}
	return deploy.Config{Algorithm: s.Algorithm, Params: s.Params, Registry: reg, MaxBatch: s.MaxBatch,
		Observer: s.Observer, Launch: s.Launch, Tuning: s.Tuning, TimeShared: s.TimeShared, Speculate: s.Speculate,
		StallTimeout: s.StallTimeout, OnPanic: s.OnPanic, OnEvent: s.OnEvent}
}

// Open opens the models' engines and starts a deployment over them; it
// returns the models' text sides, in order. Each engine can be reopened
// (after a panic or a stall) from its description.
func Open(ctx context.Context, s Spec) (*deploy.Deployment, []loader.Text, error) {
	opened, err := s.kinds().OpenAll(ctx, s.Models)
	if err != nil {
		return nil, nil, fmt.Errorf("system: %w", err)
	}
	texts := make([]loader.Text, len(opened))
	for i, o := range opened {
		texts[i] = o.Text
	}
	r, err := s.start(ctx, opened)
	if err != nil {
		for _, o := range opened {
			err = errors.Join(err, o.Engine.Close())
		}
		return nil, nil, err
	}
	return r, texts, nil
}

// start builds the deployment over opened engines, opening the engines of
// the models' further replicas (DESIGN §9). On an error it closes those;
// the caller closes the opened ones.
func (s Spec) start(ctx context.Context, opened []loader.Model) (*deploy.Deployment, error) {
	if err := s.sameVocabulary(opened); err != nil {
		return nil, err
	}
	cfg := s.config()
	cfg.Models = make([]deploy.Model, len(opened))
	closeReplicas := func(err error) error {
		for _, m := range cfg.Models {
			for _, e := range m.Replicas {
				err = errors.Join(err, e.Close())
			}
		}
		return err
	}
	for i, o := range opened {
		m := deploy.Model{Name: s.Models[i].Name, Engine: s.Faults.Engine(o.Engine), Reopen: s.reopener(s.Models[i])}
		if s.Vocab != nil {
			m.Vocab = s.Vocab(o.Text, o.Engine.Info().VocabSize)
		}
		var err error
		m.Replicas, err = s.replicaEngines(ctx, s.Models[i])
		cfg.Models[i] = m
		if err != nil {
			return nil, closeReplicas(err)
		}
	}
	if s.BusDelay > 0 {
		cfg.Bus, cfg.CloseBus = bus.NewDelayed(bus.NewMemory(), s.BusDelay), true
	}
	r, err := deploy.New(cfg)
	if err != nil {
		if cfg.Bus != nil {
			err = errors.Join(err, cfg.Bus.Close())
		}
		return nil, closeReplicas(fmt.Errorf("system: %w", err))
	}
	return r, nil
}

// replicaEngines opens the engines of m's further replicas (replica 1 on),
// with s's faults injected; on an error it closes those it opened.
func (s Spec) replicaEngines(ctx context.Context, m config.Model) ([]engine.Engine, error) {
	if m.Replicas > bus.MaxReplicas {
		return nil, fmt.Errorf("system: model %s: %d replicas: at most %d", m.Name, m.Replicas, bus.MaxReplicas)
	}
	var out []engine.Engine
	for k := 1; k < m.Replicas; k++ {
		e, err := s.kinds().OpenEngine(ctx, m)
		if err != nil {
			for _, o := range out {
				err = errors.Join(err, o.Close())
			}
			return nil, fmt.Errorf("system: model %s, replica %d: %w", m.Name, k, err)
		}
		out = append(out, s.Faults.Engine(e))
	}
	return out, nil
}

// sameVocabulary checks, when the spec asks, that the models share their
// tokenizer's vocabulary.
func (s Spec) sameVocabulary(opened []loader.Model) error {
	if !s.SameVocabulary {
		return nil
	}
	var errs []error
	for i, o := range opened {
		switch {
		case o.Tokenizer == nil:
			errs = append(errs, fmt.Errorf("system: model %s has no text (a simulated model)", s.Models[i].Name))
		case i > 0 && opened[0].Tokenizer != nil:
			if err := tokenizer.SameVocabulary(opened[0].Tokenizer, o.Tokenizer); err != nil {
				errs = append(errs, fmt.Errorf("system: models %s and %s cannot share steps: %w", s.Models[0].Name, s.Models[i].Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// reopener opens model m's engine anew.
func (s Spec) reopener(m config.Model) func(context.Context) (engine.Engine, error) {
	kinds := s.kinds()
	return func(ctx context.Context) (engine.Engine, error) {
		e, err := kinds.OpenEngine(ctx, m)
		if err != nil {
			return nil, fmt.Errorf("system: reopen model %s: %w", m.Name, err)
		}
		return s.Faults.Engine(e), nil
	}
}

// Remote builds the deployment of a front end whose models run elsewhere
// (other processes or machines) on bus b: infos are the facts each
// model's sub-server announced. Only the algorithm and the front end's
// options of s apply.
func Remote(s Spec, infos []engine.Info, b bus.Bus) (*deploy.Deployment, error) {
	if len(infos) != len(s.Models) {
		return nil, fmt.Errorf("system: %d model facts for %d models", len(infos), len(s.Models))
	}
	cfg := s.config()
	cfg.Bus, cfg.Launch, cfg.Tuning = b, sched.Launch{}, nil
	cfg.Models = make([]deploy.Model, len(infos))
	for i := range infos {
		cfg.Models[i] = deploy.Model{Name: s.Models[i].Name, Remote: &infos[i], RemoteReplicas: s.Models[i].Replicas}
	}
	r, err := deploy.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("system: %w", err)
	}
	return r, nil
}
