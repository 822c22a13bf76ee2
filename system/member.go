package system

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/constrain"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// MemberSpec is the part of a Spec that one model's sub-server needs when
// it runs on its own, away from the front end and the other models (in a
// child process, or on another machine): plain data, so that it can
// travel. Spec.Member derives it; MemberSpec.Spec turns it back into the
// Spec a member builds from (OpenMember).
type MemberSpec struct {
	// Index is this model's index in Models.
	Index int `json:"index"`
	// Models are every model's name, in the algorithm's order.
	Models []string `json:"models"`
	// Model describes this model (Models[Index]); its file paths are
	// absolute.
	Model config.Model `json:"model"`
	// Algorithm and Params name the routing algorithm.
	Algorithm string            `json:"algorithm"`
	Params    map[string]string `json:"params"`
	// Policy is this model's launch policy (Spec.Launch.Policy(Index);
	// automatic thresholds are the front end's, and cannot travel).
	Policy sched.Policy `json:"policy"`
	// MaxBatch bounds each step's batch (0: the sub-server default).
	MaxBatch int `json:"max_batch"`
	// Speculate configures speculative continuation.
	Speculate subserver.Speculation `json:"speculate"`
	// StallTimeout is the deployment's stall timeout (Spec.StallTimeout):
	// the front end applies it to the member's heartbeats.
	StallTimeout time.Duration `json:"stall_timeout"`
	// Replica is this member's replica of its model (DESIGN §9), and
	// Replicas how many replicas each model runs (nil: one each).
	Replica  int   `json:"replica,omitempty"`
	Replicas []int `json:"replicas,omitempty"`
}

// Member derives the MemberSpec of replica rep of model i from s: the one
// place that says what of a Spec a sub-server elsewhere receives. Relative
// file paths in the model's description are made absolute (the member may
// run in another working directory); automatic thresholds are refused
// (compute the tables first: a member cannot tune).
func (s Spec) Member(i, rep int) (MemberSpec, error) {
	if i < 0 || i >= len(s.Models) {
		return MemberSpec{}, fmt.Errorf("system: member %d of %d models", i, len(s.Models))
	}
	if s.Launch.Auto {
		return MemberSpec{}, errors.New("system: launch: automatic thresholds are tuned by the front end; a member needs explicit tables")
	}
	m, err := absPaths(s.Models[i])
	if err != nil {
		return MemberSpec{}, err
	}
	ms := MemberSpec{Index: i, Models: s.Names(), Model: m, Algorithm: s.Algorithm, Params: maps.Clone(s.Params),
		Policy: s.Launch.Policy(i), MaxBatch: s.MaxBatch, Speculate: s.Speculate, StallTimeout: s.StallTimeout,
		Replica: rep, Replicas: s.replicaCounts()}
	if err := ms.Validate(); err != nil {
		return MemberSpec{}, err
	}
	return ms, nil
}

// replicaCounts returns how many replicas each model of s runs, or nil
// when every model runs one.
func (s Spec) replicaCounts() []int {
	if s.replicated() == "" {
		return nil
	}
	out := make([]int, len(s.Models))
	for i, m := range s.Models {
		out[i] = max(m.Replicas, 1)
	}
	return out
}

// absPaths returns m with its file paths made absolute (an embedded file
// stays as it is: every process of the binary has it).
func absPaths(m config.Model) (config.Model, error) {
	m.CPUs = slices.Clone(m.CPUs)
	paths := []*string{&m.Path, &m.Tokenizer}
	if config.IsTemplateFile(m.ChatTemplate) {
		paths = append(paths, &m.ChatTemplate)
	}
	for _, p := range paths {
		if _, embedded := config.Embedded(*p); *p == "" || embedded {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return m, fmt.Errorf("system: model %s: %w", m.Name, err)
		}
		*p = abs
	}
	return m, nil
}

// Validate checks m, naming the field at fault.
func (m MemberSpec) Validate() error {
	if len(m.Models) == 0 {
		return errors.New("system: member: models: no model names")
	}
	for i, name := range m.Models {
		if name == "" {
			return fmt.Errorf("system: member: models[%d]: empty name", i)
		}
		if slices.Index(m.Models, name) != i {
			return fmt.Errorf("system: member: models: %q named twice", name)
		}
	}
	switch {
	case m.Index < 0 || m.Index >= len(m.Models):
		return fmt.Errorf("system: member: index %d: models has %d names", m.Index, len(m.Models))
	case m.Model.Name != m.Models[m.Index]:
		return fmt.Errorf("system: member: model.name %q: model %d of %v is %q", m.Model.Name, m.Index, m.Models, m.Models[m.Index])
	case m.Algorithm == "":
		return errors.New("system: member: algorithm: empty")
	case len(m.Policy.B) == 0:
		return errors.New("system: member: policy.b: no threshold table")
	case slices.Min(m.Policy.B) < 1:
		return fmt.Errorf("system: member: policy.b %v: every threshold must be at least 1", m.Policy.B)
	case m.Policy.MaxWait < 0:
		return fmt.Errorf("system: member: policy.max_wait %v: negative", m.Policy.MaxWait)
	case m.MaxBatch < 0:
		return fmt.Errorf("system: member: max_batch %d: negative", m.MaxBatch)
	case m.Speculate.Mode > subserver.SpeculateOn:
		return fmt.Errorf("system: member: speculate.mode %d: want 0 (auto), 1 (off) or 2 (on)", m.Speculate.Mode)
	case m.Speculate.Depth < 0 || m.Speculate.Depth > subserver.MaxDepth:
		return fmt.Errorf("system: member: speculate.depth %d: want 0 to %d", m.Speculate.Depth, subserver.MaxDepth)
	}
	return m.validateReplicas()
}

// validateReplicas checks m's replica counts and its replica index.
func (m MemberSpec) validateReplicas() error {
	if m.Replicas != nil && len(m.Replicas) != len(m.Models) {
		return fmt.Errorf("system: member: replicas: %d counts for %d models", len(m.Replicas), len(m.Models))
	}
	for i, n := range m.Replicas {
		if n < 1 || n > bus.MaxReplicas {
			return fmt.Errorf("system: member: replicas[%d] = %d: want 1 to %d", i, n, bus.MaxReplicas)
		}
	}
	if n := m.count(m.Index); m.Replica < 0 || m.Replica >= n {
		return fmt.Errorf("system: member: replica %d: model %s runs %d", m.Replica, m.Model.Name, n)
	}
	return nil
}

// count returns how many replicas model i runs.
func (m MemberSpec) count(i int) int {
	if m.Replicas == nil {
		return 1
	}
	return m.Replicas[i]
}

// Spec is the Spec a member of the deployment m describes builds from: m's
// data (its model at its index, the others by name only; its policy as
// the launch of its index), with the hooks of base (Kinds, Registry,
// Vocab, Observer, OnPanic, OnEvent, Faults), which are not data and stay
// in the member's process.
func (m MemberSpec) Spec(base Spec) Spec {
	s := base
	s.Models = make([]config.Model, len(m.Models))
	for i, name := range m.Models {
		s.Models[i].Name = name
	}
	s.Models[m.Index] = m.Model
	for i, n := range m.Replicas {
		s.Models[i].Replicas = n
	}
	tables := make([]sched.Table, len(m.Models))
	tables[m.Index] = m.Policy.B
	s.Algorithm, s.Params, s.MaxBatch, s.Speculate = m.Algorithm, maps.Clone(m.Params), m.MaxBatch, m.Speculate
	s.Launch, s.Tuning = sched.Launch{Tables: tables, MaxWait: m.Policy.MaxWait}, nil
	s.StallTimeout, s.TimeShared, s.BusDelay = m.StallTimeout, false, 0
	return s
}

// Member is one model of a Spec opened on its own, for a sub-server whose
// front end and peers run elsewhere: the cluster's members build their
// sub-servers here, as Open builds a deployment's.
type Member struct {
	spec    Spec
	index   int
	replica int
	eng     engine.Engine
	vocab   func() *constrain.Vocab
}

// OpenMember opens replica rep of model i of s (with s's faults
// injected). The caller owns the engine (Engine) and closes it, or the one
// that replaced it after a panic.
func OpenMember(ctx context.Context, s Spec, i, rep int) (*Member, error) {
	if i < 0 || i >= len(s.Models) {
		return nil, fmt.Errorf("system: member %d of %d models", i, len(s.Models))
	}
	if n := max(s.Models[i].Replicas, 1); rep < 0 || rep >= n {
		return nil, fmt.Errorf("system: member: replica %d of model %s, which runs %d", rep, s.Models[i].Name, n)
	}
	if s.Registry == nil {
		return nil, errors.New("system: member needs an algorithm registry")
	}
	o, err := s.kinds().Open(ctx, s.Models[i])
	if err != nil {
		return nil, fmt.Errorf("system: %w", err)
	}
	m := &Member{spec: s, index: i, replica: rep, eng: s.Faults.Engine(o.Engine)}
	if s.Vocab != nil {
		m.vocab = s.Vocab(o.Text, o.Engine.Info().VocabSize)
	}
	return m, nil
}

// Engine returns the engine OpenMember opened.
func (m *Member) Engine() engine.Engine { return m.eng }

// Index returns the member's model index.
func (m *Member) Index() int { return m.index }

// Replica returns the member's replica of its model.
func (m *Member) Replica() int { return m.replica }

// Replicas returns how many replicas each model of the deployment runs.
func (m *Member) Replicas() []int {
	out := make([]int, len(m.spec.Models))
	for i, mm := range m.spec.Models {
		out[i] = max(mm.Replicas, 1)
	}
	return out
}

// Spec returns the member's Spec.
func (m *Member) Spec() Spec { return m.spec }

// SubServer builds a sub-server for the member over engine e (the opened
// one, or the one that replaced it) on bus b, with a fresh instance of the
// algorithm; pl places its hand-offs among replicas (nil: every model runs
// one).
func (m *Member) SubServer(e engine.Engine, b bus.Bus, pl subserver.Placer) (*subserver.Server, error) {
	s, i := m.spec, m.index
	cfg := s.config()
	infos := make([]engine.Info, len(s.Models)) // the others run elsewhere
	infos[i] = e.Info()
	alg, err := cfg.Registry.New(s.Algorithm, route.Spec{Model: i, Models: s.Names(), Infos: infos, Params: s.Params})
	if err != nil {
		return nil, fmt.Errorf("system: model %d: %w", i, err)
	}
	sub, err := subserver.New(subserver.Config{Index: i, Models: len(s.Models), Name: s.Models[i].Name, Engine: e,
		Algorithm: alg, Policy: s.Launch.Policy(i), Bus: b, MaxBatch: s.MaxBatch, Observer: s.Observer, Vocab: m.vocab,
		Speculate: s.Speculate, Reopen: s.reopener(s.Models[i]), OnPanic: s.OnPanic, Replica: m.replica, Placer: pl})
	if err != nil {
		return nil, fmt.Errorf("system: model %d: %w", i, err)
	}
	return sub, nil
}
