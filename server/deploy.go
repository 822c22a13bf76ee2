package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/tokenrouter/tokenrouter/autotune"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/r2rrandom"
	"github.com/tokenrouter/tokenrouter/router"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/server/chat"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// modelInfo describes one model of a deployment for /v1/models and
// responses.
type modelInfo struct {
	name      string
	engine    string
	path      string
	simulated bool
	info      engine.Info
}

// deployment is one preset: a router over its own engines, the text layer
// (tokenizer, chat template) and its metrics.
type deployment struct {
	name      string
	algorithm string
	params    map[string]string
	r         *router.Router
	models    []modelInfo
	text      *textModel
	family    chat.Family
	stopIDs   []int32 // end-of-turn special tokens of the chat template
	ctxLen    int     // the smallest context length of the models
	created   int64
	obs       *observer
	closer    io.Closer // what a Deployer returned to close after r, or nil
}

// stats returns every model's counters in index order: the in-process
// sub-servers' own, or what remote ones last reported when the Deployer's
// closer is a RemoteStatser; nil when neither is available.
func (d *deployment) stats() []RemoteStat {
	if subs := d.r.SubServers(); len(subs) == len(d.models) {
		out := make([]RemoteStat, len(subs))
		for i, s := range subs {
			out[i] = RemoteStat{Up: true, Stats: s.Stats()}
		}
		return out
	}
	if rs, ok := d.closer.(RemoteStatser); ok {
		if out := rs.RemoteStats(); len(out) == len(d.models) {
			return out
		}
	}
	return nil
}

// names returns the model names in index order.
func (d *deployment) names() []string {
	out := make([]string, len(d.models))
	for i, m := range d.models {
		out[i] = m.name
	}
	return out
}

// simulated reports whether every model of d is simulated.
func (d *deployment) simulated() bool {
	for _, m := range d.models {
		if !m.simulated {
			return false
		}
	}
	return true
}

// opened is one model's engine (nil for a remote model) with its text
// facts.
type opened struct {
	eng      engine.Engine
	text     *textModel
	template string
	profile  *sim.Profile
}

// openModel opens one model definition: its engine, or, when remote, only
// what the front end needs (tokenizer, chat template, sim profile).
func openModel(m config.Model, remote bool, vocab int) (opened, error) {
	switch m.Engine {
	case config.EngineSim:
		prof, err := m.SimProfile()
		if err != nil {
			return opened{}, fmt.Errorf("model %s: %w", m.Name, err)
		}
		o := opened{text: simText(), profile: &prof}
		if !remote {
			o.eng = sim.New(sim.Config{Name: m.Name, Profile: prof, Seed: m.Seed, VocabSize: m.VocabSize, ContextLength: m.ContextLength})
		}
		return o, nil
	case config.EngineCPU:
		if remote {
			return openCPUText(m, vocab)
		}
		return openCPU(m)
	}
	return opened{}, fmt.Errorf("model %s: engine %q: want sim or cpu", m.Name, m.Engine)
}

// openCPUText opens a remote cpu model's tokenizer and chat template
// without its weights (a GGUF file is parsed for its metadata only; its
// tensors are not loaded). vocab is the vocabulary size the remote model
// announced.
func openCPUText(m config.Model, vocab int) (opened, error) {
	var (
		o   opened
		tok *tokenizer.Tokenizer
		err error
	)
	switch {
	case m.Tokenizer != "":
		if tok, err = tokenizer.Open(m.Tokenizer, vocab); err != nil {
			return opened{}, fmt.Errorf("model %s: %w", m.Name, err)
		}
		if gguf.IsFile(m.Path) {
			if f, err := gguf.OpenMeta(m.Path); err == nil {
				o.template, _ = f.String("tokenizer.chat_template")
			}
		}
	case gguf.IsFile(m.Path):
		f, err := gguf.OpenMeta(m.Path)
		if err != nil {
			return opened{}, fmt.Errorf("model %s: %w", m.Name, err)
		}
		o.template, _ = f.String("tokenizer.chat_template")
		if tok, err = tokenizer.FromGGUF(f); err != nil {
			return opened{}, fmt.Errorf("model %s: %w", m.Name, err)
		}
	default:
		return opened{}, fmt.Errorf("model %s: the front end of a remote model needs its tokenizer: give tokenizer, or a path to its GGUF file", m.Name)
	}
	if tok.VocabSize() != vocab {
		return opened{}, fmt.Errorf("model %s: tokenizer has %d tokens but the model has %d", m.Name, tok.VocabSize(), vocab)
	}
	o.text = realText(tok)
	return o, nil
}

// openCPU loads real weights with their tokenizer and chat template.
func openCPU(m config.Model) (opened, error) {
	opts := cpu.Options{Threads: m.Threads, KVBudgetBytes: int64(m.KVBudgetMB) << 20, ContextLength: m.ContextLength}
	var (
		o   opened
		tok *tokenizer.Tokenizer
		err error
	)
	if gguf.IsFile(m.Path) {
		f, err := gguf.Open(m.Path)
		if err != nil {
			return opened{}, fmt.Errorf("model %s: %w", m.Name, err)
		}
		eng, err := cpu.NewFromGGUF(f, opts)
		if err != nil {
			return opened{}, fmt.Errorf("model %s: %w", m.Name, err)
		}
		o.eng = eng
		o.template, _ = f.String("tokenizer.chat_template")
		if m.Tokenizer == "" {
			if tok, err = tokenizer.FromGGUF(f); err != nil {
				eng.Close()
				return opened{}, fmt.Errorf("model %s: %w", m.Name, err)
			}
		}
	} else {
		if m.Tokenizer == "" {
			return opened{}, fmt.Errorf("model %s: %s is not a GGUF file; a llama2.c checkpoint needs tokenizer", m.Name, m.Path)
		}
		eng, err := cpu.Open(m.Path, opts)
		if err != nil {
			return opened{}, fmt.Errorf("model %s: %w", m.Name, err)
		}
		o.eng = eng
	}
	if tok == nil {
		if tok, err = tokenizer.Open(m.Tokenizer, o.eng.Info().VocabSize); err != nil {
			o.eng.Close()
			return opened{}, fmt.Errorf("model %s: %w", m.Name, err)
		}
	}
	if tok.VocabSize() != o.eng.Info().VocabSize {
		o.eng.Close()
		return opened{}, fmt.Errorf("model %s: tokenizer has %d tokens but the model has %d", m.Name, tok.VocabSize(), o.eng.Info().VocabSize)
	}
	o.text = realText(tok)
	return o, nil
}

// buildDeployment opens a preset's engines and starts its router, or,
// with deploy set, has deploy run the preset's models elsewhere and opens
// only their text side here.
func buildDeployment(ctx context.Context, cfg *config.Config, p config.Preset, reg *route.Registry, m *metrics, deploy Deployer) (*deployment, error) {
	tables, auto, err := p.ParseThresholds()
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	d := &deployment{name: p.Name, algorithm: p.Algorithm, params: p.Params, created: time.Now().Unix()}
	remote := deploy != nil
	mcs := make([]config.Model, len(p.Models))
	for i, name := range p.Models {
		mc, ok := cfg.Model(name)
		if !ok {
			return nil, fmt.Errorf("preset %s: unknown model %q", p.Name, name)
		}
		mcs[i] = mc
		d.models = append(d.models, modelInfo{name: name, engine: mc.Engine, path: mc.Path})
	}
	var (
		opens   []opened
		engines []engine.Engine
	)
	closeAll := func() {
		for _, e := range engines {
			e.Close()
		}
	}
	if !remote {
		for _, mc := range mcs {
			o, err := openModel(mc, false, 0)
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("preset %s: %w", p.Name, err)
			}
			opens = append(opens, o)
			engines = append(engines, o.eng)
		}
	}
	if auto && !remote {
		// The runtime estimates the routing process and step latencies
		// from what it observes and pushes B*(n) (autotune); every model
		// starts at B = 1.
		tables = make([]sched.Table, len(mcs))
		for i := range tables {
			tables[i] = sched.Static(1)
		}
	} else if auto {
		// Sub-servers elsewhere get their tables up front.
		profiles := make([]*sim.Profile, len(mcs))
		for i, mc := range mcs {
			if mc.Engine == config.EngineSim {
				if prof, err := mc.SimProfile(); err == nil {
					profiles[i] = &prof
				}
			}
		}
		if tables, err = autoTables(ctx, p, profiles); err != nil {
			closeAll()
			return nil, fmt.Errorf("preset %s: %w", p.Name, err)
		}
	}
	maxWait := p.MaxWait
	if maxWait < 0 {
		maxWait = 0
	}
	ms := make([]router.Model, len(mcs))
	for i := range mcs {
		ms[i] = router.Model{Name: p.Models[i], Policy: sched.Policy{B: tables[i], MaxWait: maxWait}}
		if !remote {
			ms[i].Engine = engines[i]
		}
	}
	d.obs = m.observer(d)
	rc := router.Config{Models: ms, Algorithm: p.Algorithm, Params: p.Params, Registry: reg, MaxBatch: p.MaxBatch, Observer: d.obs}
	if auto && !remote {
		rc.Auto = &autotune.Options{}
	}
	if remote {
		r, closer, err := deploy(ctx, p.Name, rc, mcs)
		if err != nil {
			return nil, fmt.Errorf("preset %s: %w", p.Name, err)
		}
		d.r, d.closer = r, closer
	} else {
		r, err := router.New(rc)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("preset %s: %w", p.Name, err)
		}
		d.r = r
	}
	infos := d.r.Models()
	var template string
	for i, mc := range mcs {
		info := infos[i]
		if remote {
			o, err := openModel(mc, true, info.VocabSize)
			if err != nil {
				return nil, errors.Join(fmt.Errorf("preset %s: %w", p.Name, err), d.close())
			}
			opens = append(opens, o)
		}
		o := opens[i]
		d.models[i].simulated, d.models[i].info = info.Simulated, info
		// The first real model's tokenizer and template serve the preset.
		if d.text == nil || (d.text.sim && !o.text.sim) {
			d.text, template = o.text, o.template
		}
		if i == 0 || info.ContextLength < d.ctxLen {
			d.ctxLen = info.ContextLength
		}
	}
	for _, mi := range d.models {
		if mi.info.VocabSize != d.models[0].info.VocabSize {
			return nil, errors.Join(fmt.Errorf("preset %s: models %s and %s have different vocabularies (%d and %d tokens)",
				p.Name, d.models[0].name, mi.name, d.models[0].info.VocabSize, mi.info.VocabSize), d.close())
		}
	}
	d.family = chat.Detect(template)
	for _, s := range d.family.StopTokens() {
		if id, ok := d.text.special(s); ok {
			d.stopIDs = append(d.stopIDs, id)
		}
	}
	return d, nil
}

// close stops d's router (closing its engines) and then what its Deployer
// returned to close.
func (d *deployment) close() error {
	var err error
	if d.r != nil {
		err = d.r.Close()
	}
	if d.closer != nil {
		err = errors.Join(err, d.closer.Close())
	}
	return err
}

// autoTables asks the throughput model for the threshold tables. It needs
// the routing matrix and the step latencies up front, which are known for
// r2r-random over simulated engines; other setups need explicit B.
func autoTables(ctx context.Context, p config.Preset, profiles []*sim.Profile) ([]sched.Table, error) {
	if p.Algorithm != r2rrandom.Name || len(profiles) != 2 || profiles[0] == nil || profiles[1] == nil {
		return nil, errors.New(`thresholds "auto" needs the throughput model's inputs up front: ` +
			`available for r2r-random over two simulated models; give explicit thresholds (e.g. "1,3") otherwise`)
	}
	prob := 0.35
	if v, ok := p.Params["p"]; ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("param p=%q: %w", v, err)
		}
		prob = f
	}
	ms := func(pr *sim.Profile) float64 { return float64(pr.Latency(1, 1)) / float64(time.Millisecond) }
	t, err := perfmodel.Table(ctx, perfmodel.R2R(prob, ms(profiles[0]), ms(profiles[1])), p.AutoConcurrency, nil)
	if err != nil {
		return nil, fmt.Errorf("auto thresholds: %w", err)
	}
	return t, nil
}
