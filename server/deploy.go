package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/tokenrouter/tokenrouter/chat"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/constrain"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
	"github.com/tokenrouter/tokenrouter/system"
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

// deployment is one preset: a deployment over its own engines, the text layer
// (tokenizer, chat template) and its metrics.
type deployment struct {
	name      string
	algorithm string
	params    map[string]string
	r         *deploy.Deployment
	models    []modelInfo
	text      *textModel
	template  *chat.Template
	stopIDs   []int32 // end-of-generation tokens: the vocabulary's and the chat template's
	ctxLen    int     // the smallest context length of the models
	created   int64
	obs       *observer
	closer    io.Closer // what a Deployer returned to close after r, or nil
}

// stats returns every model's counters in index order: the in-process
// sub-servers' own (a model's replicas merged), or what remote ones last
// reported when the Deployer's closer is a RemoteStatser; nil when neither
// is available.
func (d *deployment) stats() []RemoteStat {
	if out := d.localStats(); out != nil {
		return out
	}
	if rs, ok := d.closer.(RemoteStatser); ok {
		if out := rs.RemoteStats(); len(out) == len(d.models) {
			return out
		}
	}
	return nil
}

// localStats returns every model's counters when every model runs in this
// process, else nil.
func (d *deployment) localStats() []RemoteStat {
	out := make([]RemoteStat, len(d.models))
	for i := range out {
		st, ok := d.r.ModelStats(i)
		if !ok {
			return nil
		}
		_, restarts := d.r.Stalls(i)
		out[i] = RemoteStat{Up: d.r.Unavailable(i) == nil, Restarts: int(restarts), Stats: st}
	}
	return out
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

// buildDeployment opens a preset's engines and starts its deployment, or,
// with opts.Deploy set, has it run the preset's models elsewhere and opens
// only their text side here.
func buildDeployment(ctx context.Context, cfg *config.Config, p config.Preset, opts Options, m *metrics) (*deployment, error) {
	d := &deployment{name: p.Name, algorithm: p.Algorithm, params: p.Params, created: time.Now().Unix()}
	mcs := make([]config.Model, len(p.Models))
	for i, name := range p.Models {
		mc, ok := cfg.Model(name)
		if !ok {
			return nil, fmt.Errorf("preset %s: unknown model %q", p.Name, name)
		}
		mc.Replicas = p.ReplicasOf(mc)
		mcs[i] = mc
		d.models = append(d.models, modelInfo{name: name, engine: mc.Engine, path: mc.Path})
	}
	d.obs = m.observer(d)
	texts, err := d.start(ctx, cfg.StallTimeout, p, mcs, opts)
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	if err := d.setText(texts); err != nil {
		return nil, errors.Join(fmt.Errorf("preset %s: %w", p.Name, err), d.close())
	}
	for i, t := range texts {
		if t.TemplateErr != nil {
			opts.Logger.Warn("chat template replaced by a built-in layout", "model", mcs[i].Name, "layout", t.Template.Name(), "err", t.TemplateErr)
		}
	}
	return d, nil
}

// start opens the models' engines and starts d's deployment over them, or has
// opts.Deploy run them elsewhere, and returns the models' text sides.
func (d *deployment) start(ctx context.Context, stall time.Duration, p config.Preset, mcs []config.Model, opts Options) ([]loader.Text, error) {
	spec, err := d.spec(stall, p, mcs, opts)
	if err != nil {
		return nil, err
	}
	if opts.Deploy == nil {
		placed, err := opts.Kinds.Place(ctx, mcs, p.Placement, loader.PlaceOptions{})
		if err != nil {
			return nil, err
		}
		if placed.Reason != "" {
			opts.Logger.Info("placement", "preset", p.Name, "chose", placed.Placement, "because", placed.Reason)
		}
		spec.Models, spec.TimeShared = placed.Models, placed.TimeShared()
		var texts []loader.Text
		d.r, texts, err = system.Open(ctx, spec)
		return texts, err
	}
	if spec.Launch.Auto {
		// Sub-servers elsewhere get their tables up front.
		if spec.Launch, err = autoLaunch(ctx, p, spec.Launch, opts, mcs); err != nil {
			return nil, err
		}
	}
	if d.r, d.closer, err = opts.Deploy(ctx, p.Name, spec); err != nil {
		return nil, err
	}
	texts := make([]loader.Text, len(mcs))
	for i, info := range d.r.Models() {
		if texts[i], err = opts.Kinds.OpenText(mcs[i], info.VocabSize); err != nil {
			return nil, errors.Join(err, d.close())
		}
	}
	return texts, nil
}

// spec is the system specification of preset p over models mcs.
func (d *deployment) spec(stall time.Duration, p config.Preset, mcs []config.Model, opts Options) (system.Spec, error) {
	launch, err := p.Launch()
	if err != nil {
		return system.Spec{}, err
	}
	sp, err := p.Speculation()
	if err != nil {
		return system.Spec{}, err
	}
	return system.Spec{Models: mcs, Kinds: opts.Kinds, Algorithm: p.Algorithm, Params: p.Params, Registry: opts.Registry,
		Launch: launch, MaxBatch: p.MaxBatch, Speculate: sp, BusDelay: opts.BusDelay, StallTimeout: stall, Observer: d.obs,
		OnPanic: func(x *subserver.Panic) {
			opts.Logger.Error("panic recovered", "preset", p.Name, "model", x.Model, "where", x.Where, "request", x.Request,
				"panic", fmt.Sprint(x.Value), "stack", string(x.Stack))
		},
		OnEvent: func(msg string, args ...any) { opts.Logger.Warn(msg, append([]any{"preset", p.Name}, args...)...) },
		Vocab:   func(t loader.Text, size int) func() *constrain.Vocab { return textOf(t).vocab(size) },
		Faults:  opts.Faults}, nil
}

// setText sets up d's text side from its models' facts and text sides: the
// first real model's tokenizer and chat template serve the preset.
func (d *deployment) setText(texts []loader.Text) error {
	var template *chat.Template
	for i, info := range d.r.Models() {
		d.models[i].simulated, d.models[i].info = info.Simulated, info
		if t := textOf(texts[i]); d.text == nil || (d.text.sim && !t.sim) {
			d.text, template = t, texts[i].Template
		}
		if i == 0 || info.ContextLength < d.ctxLen {
			d.ctxLen = info.ContextLength
		}
	}
	for _, mi := range d.models {
		if mi.info.VocabSize != d.models[0].info.VocabSize {
			return fmt.Errorf("models %s and %s have different vocabularies (%d and %d tokens)",
				d.models[0].name, mi.name, d.models[0].info.VocabSize, mi.info.VocabSize)
		}
	}
	if template == nil {
		template, _ = chat.Builtin("plain")
	}
	d.template, d.stopIDs = template, d.text.eog
	for _, s := range template.StopTokens() {
		if id, ok := d.text.special(s); ok && !slices.Contains(d.stopIDs, id) {
			d.stopIDs = append(d.stopIDs, id)
		}
	}
	return nil
}

// close stops d's deployment (closing its engines) and then what its Deployer
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

// autoLaunch computes automatic thresholds up front, for sub-servers
// elsewhere: it needs the algorithm's routing process (route.Predictable)
// and every model's step latency (a simulated profile) before anything
// runs; other setups need explicit thresholds.
func autoLaunch(ctx context.Context, p config.Preset, l sched.Launch, opts Options, mcs []config.Model) (sched.Launch, error) {
	const need = `thresholds "auto" for sub-servers elsewhere needs the throughput model's inputs up front ` +
		`(an algorithm that states its routing process over models whose step times are known, such as r2r-random over simulated models); ` +
		`give explicit thresholds (e.g. "1,3" or @plan.json) otherwise`
	md := perfmodel.Model{L: make([]float64, len(mcs))}
	for i, mc := range mcs {
		lat := opts.Kinds.StepLatency(mc)
		if lat <= 0 {
			return l, errors.New(need)
		}
		md.L[i] = float64(lat) / float64(time.Millisecond)
	}
	a, err := opts.Registry.New(p.Algorithm, route.Spec{Model: -1, Models: p.Models, Params: p.Params})
	if err != nil {
		return l, err
	}
	pr, ok := a.(route.Predictable)
	if ok {
		md.P, md.C, ok = pr.Process()
	}
	if !ok {
		return l, errors.New(need)
	}
	t, err := perfmodel.Table(ctx, md, p.AutoConcurrency, nil)
	if err != nil {
		return l, fmt.Errorf("auto thresholds: %w", err)
	}
	return sched.Launch{Tables: t, MaxWait: l.MaxWait}, nil
}
