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
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/route/r2rrandom"
	"github.com/tokenrouter/tokenrouter/router"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/server/chat"
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

// buildDeployment opens a preset's engines and starts its router, or,
// with deploy set, has deploy run the preset's models elsewhere and opens
// only their text side here.
func buildDeployment(ctx context.Context, cfg *config.Config, p config.Preset, opts Options, m *metrics) (*deployment, error) {
	reg, deploy, kinds := opts.Registry, opts.Deploy, opts.Kinds
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
	var opens []loader.Model
	closeAll := func() {
		for _, o := range opens {
			o.Engine.Close()
		}
	}
	if !remote {
		if opens, err = kinds.OpenAll(ctx, mcs); err != nil {
			return nil, fmt.Errorf("preset %s: %w", p.Name, err)
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
		if tables, err = autoTables(ctx, p, kinds, mcs); err != nil {
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
			ms[i].Engine = opens[i].Engine
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
			t, err := kinds.OpenText(mc, info.VocabSize)
			if err != nil {
				return nil, errors.Join(fmt.Errorf("preset %s: %w", p.Name, err), d.close())
			}
			opens = append(opens, loader.Model{Text: t})
		}
		o := opens[i]
		d.models[i].simulated, d.models[i].info = info.Simulated, info
		// The first real model's tokenizer and template serve the preset.
		if text := textOf(o.Text); d.text == nil || (d.text.sim && !text.sim) {
			d.text, template = text, o.Template
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
func autoTables(ctx context.Context, p config.Preset, kinds loader.Kinds, mcs []config.Model) ([]sched.Table, error) {
	lat := make([]time.Duration, len(mcs))
	for i, mc := range mcs {
		lat[i] = kinds.StepLatency(mc)
	}
	if p.Algorithm != r2rrandom.Name || len(lat) != 2 || lat[0] <= 0 || lat[1] <= 0 {
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
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	t, err := perfmodel.Table(ctx, perfmodel.R2R(prob, ms(lat[0]), ms(lat[1])), p.AutoConcurrency, nil)
	if err != nil {
		return nil, fmt.Errorf("auto thresholds: %w", err)
	}
	return t, nil
}
