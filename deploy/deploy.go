// Package deploy runs one TokenRouter deployment: one sub-server per
// local model on a bus (models whose sub-servers run in other processes
// attach to the same bus themselves), and the front end that admits
// requests and streams their committed tokens back. It is the runtime the
// HTTP server, the cluster front end and the benchmarks drive; the
// algorithms it runs are written against package route.
package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/autotune"
	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/constrain"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/timeshare"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/stream"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// Model is one model of a deployment.
type Model struct {
	// Name is the model's name.
	Name string
	// Engine runs it; the deployment owns it and closes it. Nil for a remote
	// model.
	Engine engine.Engine
	// Vocab, if set, returns the model's vocabulary for structured output
	// (subserver.Config.Vocab).
	Vocab func() *constrain.Vocab
	// Remote, set instead of Engine, declares a model whose sub-server
	// runs elsewhere (another process or machine) and attaches to Bus
	// itself; the facts are the ones that sub-server announced. Its launch
	// policy belongs to the remote sub-server.
	Remote *engine.Info
	// Reopen, if set, opens the model's engine anew: after the engine
	// panicked or stalled (DESIGN §8.1, §8.2) the sub-server restarts on
	// a new one. Without it such a model stays down.
	Reopen func(context.Context) (engine.Engine, error)
	// Replicas are the engines of the model's further replicas (replica
	// 1, 2, …; replica 0 runs Engine): each runs a sub-server of its own,
	// with its own loop, scheduler, KV cache and launch thresholds, and
	// requests are placed among them (DESIGN §9). The deployment owns and
	// closes them. Local models only.
	Replicas []engine.Engine
	// RemoteReplicas is how many replicas a remote model runs elsewhere
	// (0 or 1: one). The front end places requests among them by the loads
	// their heartbeats report (ReplicaLoad) and marks them up and down
	// (ReplicaUp, ReplicaDown); each starts down.
	RemoteReplicas int
}

// Config describes a deployment.
type Config struct {
	// Models, in the algorithm's order (the small model first).
	Models []Model
	// Algorithm names the routing algorithm in Registry.
	Algorithm string
	// Params are the algorithm's parameters.
	Params map[string]string
	// Registry resolves Algorithm.
	Registry *route.Registry
	// Bus connects the sub-servers; nil means a new in-memory bus.
	Bus bus.Bus
	// CloseBus closes Bus at Close (a bus built for this deployment); a
	// bus the deployment made itself is closed anyway.
	CloseBus bool
	// MaxBatch bounds each step's batch (0: the sub-server default).
	MaxBatch int
	// Observer, if set, watches every sub-server's steps and hand-offs.
	Observer subserver.Observer
	// Launch is the launch policy of the local models: static tables
	// (the zero value: B = 1 everywhere, no max-wait guard) or automatic
	// thresholds (DESIGN §6): each model starts at B = 1 and a tuner,
	// started and stopped with the deployment, estimates the routing process
	// from what it observes and pushes the tables B*(n), keeping the
	// max-wait guard.
	Launch sched.Launch
	// Tuning tunes the tuner of automatic thresholds (nil: its defaults;
	// with TimeShared and no Placement, the tuner plans for time-shared
	// placement).
	Tuning *autotune.Options
	// TimeShared makes the local engines take turns to step, one step at a
	// time in the order they are ready (engine/timeshare), each free to use
	// every core; the sub-servers still schedule asynchronously. Step times
	// reported to observers leave out the wait for the turn. False lets the
	// steps overlap (the engines' threads partition the cores, or the
	// engines are simulated).
	TimeShared bool
	// Speculate configures speculative continuation in the local
	// sub-servers (the zero value: where the algorithm opted in, depth
	// from measurements). SpeculateOn refuses an algorithm that did not
	// opt in (subserver.New).
	Speculate subserver.Speculation
	// StallTimeout is the stall watchdog's timeout (subserver.Stalled; 0:
	// automatic, from the models' step times; negative: no watchdog).
	StallTimeout time.Duration
	// OnPanic, if set, is told about every panic a local sub-server
	// recovered (subserver.Config.OnPanic), and OnEvent about models that
	// went down or came back (for logs).
	OnPanic func(*subserver.Panic)
	OnEvent func(msg string, args ...any)
	// PlaceSeed seeds the placement of requests among replicas
	// (place.Mix): the same seed and requests place the same way.
	PlaceSeed uint64
}

// Deployment is a running deployment.
type Deployment struct {
	cfg    Config
	bus    bus.Bus
	subs   []*subserver.Server // guarded by mu: a stalled one is replaced
	local  []*local            // every local sub-server's slot, as subs
	models [][]*local          // per model index, its replicas; nil for remote models
	placer *placer             // nil: every model has one replica
	front  route.Algorithm
	entry  route.Entrant
	stat   route.Stater
	info   []engine.Info

	nextID atomic.Uint64
	mu     sync.Mutex
	open   map[uint64]openReq
	closed bool
	down   map[int]error // unavailable models (ModelDown)

	tuner *autotune.Tuner

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   []error
}

// openReq is a request in flight, seen from the front end.
type openReq struct {
	s    *stream.Stream
	stop func() bool // unregisters the cancellation hook
	// next is the output position the stream has reached: a commit's
	// tokens before it repeat ones it has (a request sent again after a
	// replica was lost, DESIGN §9).
	next int
	// entry, with replicas, is what the front end answers for until the
	// request leaves its entry replica (nil: no replicas).
	entry *entry
}

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("deploy: closed")

// ErrBadRequest wraps every error Submit returns for invalid input.
var ErrBadRequest = errors.New("bad request")

// ErrUnavailable wraps the errors of requests ended because a model
// became unavailable, and of Submit while one is.
var ErrUnavailable = errors.New("model unavailable")

// New builds the sub-servers and starts their loops.
func New(cfg Config) (*Deployment, error) {
	names, err := modelNames(cfg)
	if err != nil {
		return nil, err
	}
	b := cfg.Bus
	if b == nil {
		b = bus.NewMemory()
	}
	r := &Deployment{cfg: cfg, bus: b, open: map[uint64]openReq{}, info: modelInfos(cfg.Models)}
	front, err := cfg.Registry.New(cfg.Algorithm, route.Spec{Model: -1, Models: names, Infos: slices.Clone(r.info), Params: cfg.Params})
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	r.front = front
	r.entry, _ = front.(route.Entrant)
	r.stat, _ = front.(route.Stater)
	if err := b.Attach(bus.Frontend, r.deliver); err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	if cfg.TimeShared {
		cfg.Models = timeShare(cfg.Models)
		r.cfg = cfg
	}
	obs, err := r.newTuner()
	if err != nil {
		r.abort()
		return nil, fmt.Errorf("deploy: %w", err)
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if err := r.startSubServers(obs); err != nil {
		r.cancel()
		r.abort()
		return nil, err
	}
	r.startBackground()
	return r, nil
}

// modelNames checks the configuration's models and registry and returns
// the models' names.
func modelNames(cfg Config) ([]string, error) {
	if len(cfg.Models) == 0 {
		return nil, errors.New("deploy: no models")
	}
	if cfg.Registry == nil {
		return nil, errors.New("deploy: no algorithm registry")
	}
	names := make([]string, len(cfg.Models))
	for i, m := range cfg.Models {
		names[i] = m.Name
		if (m.Engine == nil) == (m.Remote == nil) {
			return nil, fmt.Errorf("deploy: model %d (%s): set exactly one of Engine and Remote", i, m.Name)
		}
		if m.Remote != nil && cfg.Launch.Auto {
			return nil, fmt.Errorf("deploy: model %d (%s): automatic thresholds need local sub-servers", i, m.Name)
		}
		if m.Remote != nil && len(m.Replicas) > 0 || len(m.Replicas) >= bus.MaxReplicas || slices.Contains(m.Replicas, nil) {
			return nil, fmt.Errorf("deploy: model %d (%s): %d further replicas: want up to %d engines of a local model", i, m.Name, len(m.Replicas), bus.MaxReplicas-1)
		}
		if m.RemoteReplicas < 0 || m.RemoteReplicas > bus.MaxReplicas || m.Remote == nil && m.RemoteReplicas > 1 {
			return nil, fmt.Errorf("deploy: model %d (%s): %d remote replicas: want up to %d of a remote model", i, m.Name, m.RemoteReplicas, bus.MaxReplicas)
		}
	}
	return names, nil
}

// newTuner creates the threshold tuner when launch thresholds are automatic
// and returns the observer the sub-servers report their steps to.
func (r *Deployment) newTuner() (subserver.Observer, error) {
	cfg := r.cfg
	if !cfg.Launch.Auto {
		return cfg.Observer, nil
	}
	base := make([]sched.Policy, len(cfg.Models))
	for i := range cfg.Models {
		base[i] = cfg.Launch.Policy(i)
	}
	var opts autotune.Options
	if cfg.Tuning != nil {
		opts = *cfg.Tuning
	}
	if cfg.TimeShared && opts.Placement == "" {
		// The engines take turns: a plan for models that step at
		// once would batch the large model as if its steps cost the
		// small one nothing.
		opts.Placement = perfmodel.TimeShared
	}
	t, err := autotune.New(base, opts)
	if err != nil {
		return nil, err
	}
	r.tuner = t
	if cfg.Observer != nil {
		return observers{t, cfg.Observer}, nil
	}
	return t, nil
}

// modelInfos returns the facts of each model: its engine's, or those a
// remote sub-server announced.
func modelInfos(ms []Model) []engine.Info {
	out := make([]engine.Info, len(ms))
	for i, m := range ms {
		if m.Remote != nil {
			out[i] = *m.Remote
		} else {
			out[i] = m.Engine.Info()
		}
	}
	return out
}

// startSubServers creates and runs a sub-server for each replica of each
// local model.
func (r *Deployment) startSubServers(obs subserver.Observer) error {
	r.models = make([][]*local, len(r.cfg.Models))
	for i, m := range r.cfg.Models {
		if m.Remote != nil {
			continue
		}
		for k := range 1 + len(m.Replicas) {
			l := &local{index: i, replica: k, ep: bus.Endpoint(i, k), pos: len(r.local), observer: obs}
			r.models[i] = append(r.models[i], l)
			r.local = append(r.local, l)
		}
	}
	r.placer = newPlacer(r)
	for _, l := range r.local {
		pol := r.cfg.Launch.Policy(l.index)
		if r.tuner != nil {
			pol = r.tuner.Initial(l.index)
		}
		s, err := r.newSubServer(l, r.engineOf(l), pol)
		if err != nil {
			return err
		}
		l.sub.Store(s)
		l.up.Store(true)
		r.subs = append(r.subs, s)
	}
	for _, l := range r.local {
		r.run(l)
	}
	return nil
}

// engineOf returns the engine replica l runs at start.
func (r *Deployment) engineOf(l *local) engine.Engine {
	m := r.cfg.Models[l.index]
	if l.replica == 0 {
		return m.Engine
	}
	return m.Replicas[l.replica-1]
}

// startBackground starts the stall watchdog and the threshold tuner's loop.
func (r *Deployment) startBackground() {
	ctx := r.ctx
	if r.cfg.StallTimeout >= 0 && len(r.subs) > 0 {
		r.wg.Add(1)
		go r.watch(ctx)
	}
	if r.tuner != nil {
		targets := make([]autotune.Target, len(r.models))
		for i := range r.models {
			targets[i] = group{r, i}
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			// Run fails only on a target count mismatch, impossible here.
			_ = r.tuner.Run(ctx, targets)
		}()
	}
}

// observers fans one sub-server's observations out to several observers.
type observers []subserver.Observer

// Step forwards a step to every observer.
func (o observers) Step(model, batch, appended int, d time.Duration) {
	for _, x := range o {
		x.Step(model, batch, appended, d)
	}
}

// Routed forwards hand-offs to every observer.
func (o observers) Routed(model int, moved []int) {
	for _, x := range o {
		x.Routed(model, moved)
	}
}

// Waited forwards a wait to every observer that watches them
// (subserver.WaitObserver).
func (o observers) Waited(model int, entry bool, d time.Duration) {
	for _, x := range o {
		if w, ok := x.(subserver.WaitObserver); ok {
			w.Waited(model, entry, d)
		}
	}
}

// timeShare puts the local engines of ms, every replica's, behind one
// gate.
func timeShare(ms []Model) []Model {
	g := timeshare.New()
	out := slices.Clone(ms)
	for i := range out {
		if out[i].Engine != nil {
			out[i].Engine = timeshare.Wrap(out[i].Engine, g.Join(i))
		}
		out[i].Replicas = slices.Clone(out[i].Replicas)
		for k, e := range out[i].Replicas {
			out[i].Replicas[k] = timeshare.Wrap(e, g.Join(i))
		}
	}
	return out
}

// Tuner returns the automatic-threshold tuner, or nil when the launch
// policy is static.
func (r *Deployment) Tuner() *autotune.Tuner { return r.tuner }

// abort undoes a partial New.
func (r *Deployment) abort() {
	for i, m := range r.cfg.Models {
		if m.Engine != nil {
			for k := range 1 + len(m.Replicas) {
				r.bus.Detach(bus.Endpoint(i, k))
			}
		}
	}
	r.bus.Detach(bus.Frontend)
}

// Models reports the models' facts, in index order.
func (r *Deployment) Models() []engine.Info { return r.info }

// Names returns the model names in index order.
func (r *Deployment) Names() []string {
	out := make([]string, len(r.cfg.Models))
	for i, m := range r.cfg.Models {
		out[i] = m.Name
	}
	return out
}

// SubServers returns the sub-servers running in this process (for metrics
// and policy updates), in model order and, within a model, in replica
// order (Replicas); remote models have none. A sub-server that stalled is
// replaced: call again for the current ones.
func (r *Deployment) SubServers() []*subserver.Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.subs)
}

// Submit admits a request: prompt tokens and parameters. The stream ends
// when the request finishes or fails; cancelling ctx (or Stream.Close)
// cancels it in every sub-server, wherever it is.
func (r *Deployment) Submit(ctx context.Context, prompt []int32, p route.Params) (*stream.Stream, error) {
	if err := r.checkRequest(prompt, p); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("deploy: submit: %w", err)
	}
	id := r.nextID.Add(1)
	s := stream.New(id, func() { r.cancelReq(id, nil) })
	view := route.Request{ID: id, Params: p, Tokens: prompt, PromptLen: len(prompt), Committed: len(prompt)}
	entry, err := r.entryModel(&view)
	if err != nil {
		return nil, err
	}
	var st route.State
	if r.stat != nil {
		st = r.stat.NewState(&view)
	}
	ent, err := r.placeEntry(entry, id, prompt, p)
	if err != nil {
		return nil, err
	}
	if err := r.register(id, s, ent); err != nil {
		return nil, err
	}
	bctx := context.WithoutCancel(ctx)
	if err := r.admit(bctx, id, entry, ent.endpoint(entry), prompt, p, st); err != nil {
		return nil, err
	}
	r.cancelWith(ctx, bctx, id)
	return s, nil
}

// checkRequest rejects an empty prompt, a non-positive token budget, and a
// request that exceeds a model's context or vocabulary.
func (r *Deployment) checkRequest(prompt []int32, p route.Params) error {
	if len(prompt) == 0 {
		return fmt.Errorf("%w: empty prompt", ErrBadRequest)
	}
	if p.MaxTokens <= 0 {
		return fmt.Errorf("%w: max tokens must be positive, got %d", ErrBadRequest, p.MaxTokens)
	}
	for _, in := range r.info {
		if len(prompt)+p.MaxTokens > in.ContextLength {
			return fmt.Errorf("%w: prompt (%d tokens) plus max tokens (%d) exceeds model %s's context length %d",
				ErrBadRequest, len(prompt), p.MaxTokens, in.Name, in.ContextLength)
		}
		for _, t := range prompt {
			if t < 0 || int(t) >= in.VocabSize {
				return fmt.Errorf("%w: token id %d outside model %s's vocabulary of %d", ErrBadRequest, t, in.Name, in.VocabSize)
			}
		}
	}
	return nil
}

// entryModel returns the model a request starts on: the algorithm's choice,
// or model 0.
func (r *Deployment) entryModel(view *route.Request) (int, error) {
	if r.entry == nil {
		return 0, nil
	}
	entry := r.entry.Entry(view)
	if entry < 0 || entry >= len(r.info) {
		return 0, fmt.Errorf("deploy: algorithm chose entry model %d of %d", entry, len(r.info))
	}
	return entry, nil
}

// register records the request's stream as open, unless the deployment
// is closed or a model is down.
func (r *Deployment) register(id uint64, s *stream.Stream, ent *entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	for i, cause := range r.down {
		return fmt.Errorf("deploy: model %s: %w: %w", r.cfg.Models[i].Name, ErrUnavailable, cause)
	}
	r.open[id] = openReq{s: s, entry: ent}
	return nil
}

// admit announces the request to every sub-server and sends its prompt to
// the entry model, at endpoint ep (its replica).
func (r *Deployment) admit(bctx context.Context, id uint64, entry, ep int, prompt []int32, p route.Params, st route.State) error {
	a := r.bus.Get()
	a.Kind, a.ID, a.From = bus.Admit, id, bus.Frontend
	if err := r.bus.Broadcast(bctx, a); err != nil {
		r.forget(id)
		return fmt.Errorf("deploy: admit: %w", err)
	}
	err := r.bus.Send(bctx, ep, r.entryMessage(id, entry, ep, prompt, p, st))
	if err != nil && errors.Is(err, bus.ErrNoEndpoint) && r.placer != nil {
		r.reenter(bctx, id, ep) // the replica went away meanwhile: another one
		return nil
	}
	if err != nil {
		r.cancelReq(id, err)
		return fmt.Errorf("deploy: admit: %w", err)
	}
	return nil
}

// entryMessage is the peer message that brings a request's prompt to
// endpoint ep of its entry model.
func (r *Deployment) entryMessage(id uint64, entry, ep int, prompt []int32, p route.Params, st route.State) *bus.Event {
	e := r.bus.Get()
	e.Kind, e.ID, e.From = bus.Peer, id, bus.Frontend
	m := &e.Msg
	m.ID, m.From, m.To, m.Anchor = id, bus.Frontend, entry, 0
	m.Tokens = append(m.Tokens[:0], prompt...)
	m.By = m.By[:0]
	for range prompt {
		m.By = append(m.By, -1)
	}
	m.PromptLen, m.Committed, m.Params, m.State = len(prompt), len(prompt), p, st
	m.Seen = append(m.Seen[:0], make([]int, len(r.info))...)
	m.Placed = m.Placed[:0]
	if r.placer != nil {
		for range r.info {
			m.Placed = append(m.Placed, -1)
		}
		m.Placed[entry] = bus.ReplicaOf(ep)
	}
	return e
}

// cancelWith ties the admitted request to ctx: its end cancels the request.
// If the request already ended, it cancels again on every sub-server.
func (r *Deployment) cancelWith(ctx, bctx context.Context, id uint64) {
	stop := context.AfterFunc(ctx, func() { r.cancelReq(id, ctx.Err()) })
	r.mu.Lock()
	if o, ok := r.open[id]; ok {
		o.stop = stop
		r.open[id] = o
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	// Already ended: finished, or failed by ModelDown while the admit was
	// on its way. Cancelling again frees what a sub-server may have
	// admitted after the first cancel (a no-op for a finished request).
	stop()
	c := r.bus.Get()
	c.Kind, c.ID, c.From = bus.Cancel, id, bus.Frontend
	_ = r.bus.Broadcast(bctx, c)
}

// cancelReq cancels request id everywhere and ends its stream.
func (r *Deployment) cancelReq(id uint64, cause error) {
	s := r.forget(id)
	if s == nil {
		return
	}
	e := r.bus.Get()
	e.Kind, e.ID, e.From = bus.Cancel, id, bus.Frontend
	_ = r.bus.Broadcast(context.Background(), e) // a closed bus has nothing left to cancel
	s.Finish(stream.Cancelled, cause)
}

func (r *Deployment) forget(id uint64) *stream.Stream {
	r.mu.Lock()
	o, ok := r.open[id]
	delete(r.open, id)
	r.mu.Unlock()
	if !ok {
		return nil
	}
	if o.stop != nil {
		o.stop()
	}
	return o.s
}

// deliver is the front end's bus handler.
func (r *Deployment) deliver(e *bus.Event) {
	defer r.bus.Put(e)
	switch e.Kind {
	case bus.Commit:
		r.commit(e)
	case bus.Released:
		r.mu.Lock()
		if o, ok := r.open[e.ID]; ok && o.entry != nil && o.entry.ep == e.From {
			o.entry.left = true
		}
		r.mu.Unlock()
	case bus.Lost:
		if r.placer != nil {
			r.frontLost(context.Background(), e.Endpoint)
		}
	case bus.Peer:
		if r.placer != nil {
			r.checkpointed(e)
		}
	case bus.Done:
		s := r.forget(e.ID)
		if s == nil {
			return
		}
		var err error
		reason := e.Reason
		switch reason {
		case stream.Error:
			err = errors.New(e.Err)
		case bus.ReasonUnavailable:
			// A sub-server found no replica of a model up: the request ends
			// as when the front end sees the model down first.
			reason, err = stream.Error, fmt.Errorf("deploy: %w: %s", ErrUnavailable, e.Err)
		}
		s.Finish(reason, err)
	}
}

// commit appends a commit's tokens to the request's stream, leaving out
// those before the position the stream has reached (tokens a request sent
// again after a replica was lost commits a second time, DESIGN §9).
func (r *Deployment) commit(e *bus.Event) {
	r.mu.Lock()
	o, ok := r.open[e.ID]
	skip := 0
	if ok {
		skip = min(max(o.next-e.Pos, 0), len(e.Tokens))
		o.next = max(o.next, e.Pos+len(e.Tokens))
		r.open[e.ID] = o
	}
	r.mu.Unlock()
	if !ok || skip == len(e.Tokens) {
		return
	}
	lps := e.Logprobs
	if len(lps) > 0 {
		lps = lps[skip:]
	}
	o.s.PushLogprobs(e.Tokens[skip:], e.By[skip:], lps)
}

// ModelDown marks model i unavailable (its remote sub-server stopped
// answering): every request in flight ends with an error wrapping
// ErrUnavailable and cause and is cancelled in every sub-server, and
// Submit fails until ModelUp(i). It returns the number of requests ended.
func (r *Deployment) ModelDown(i int, cause error) int {
	if i < 0 || i >= len(r.info) {
		return 0
	}
	r.mu.Lock()
	if r.down == nil {
		r.down = map[int]error{}
	}
	r.down[i] = cause
	ids := make([]uint64, 0, len(r.open))
	for id := range r.open {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	err := fmt.Errorf("deploy: model %s: %w: %w", r.cfg.Models[i].Name, ErrUnavailable, cause)
	n := 0
	for _, id := range ids {
		s := r.forget(id)
		if s == nil {
			continue
		}
		e := r.bus.Get()
		e.Kind, e.ID, e.From = bus.Cancel, id, bus.Frontend
		_ = r.bus.Broadcast(context.Background(), e) // survivors free the request
		s.Finish(stream.Error, err)
		n++
	}
	return n
}

// ModelUp marks model i available again (its sub-server rejoined).
func (r *Deployment) ModelUp(i int) {
	r.mu.Lock()
	delete(r.down, i)
	r.mu.Unlock()
}

// Active returns the number of requests in flight.
func (r *Deployment) Active() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.open)
}

// Close cancels every request, stops the sub-servers, waits for them and
// closes the engines and the bus.
func (r *Deployment) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	open := r.open
	r.open = map[uint64]openReq{}
	r.mu.Unlock()
	for _, o := range open {
		if o.stop != nil {
			o.stop()
		}
		o.s.Finish(stream.Cancelled, ErrClosed)
	}
	r.cancel()
	r.wg.Wait()
	for _, l := range r.local {
		r.mu.Lock()
		done := l.done
		r.mu.Unlock()
		<-done // a stalled loop was replaced: this is its successor
	}
	r.bus.Detach(bus.Frontend)
	r.mu.Lock()
	errs := append([]error(nil), r.errs...)
	subs := slices.Clone(r.subs)
	r.mu.Unlock()
	for _, s := range subs {
		errs = append(errs, s.Engine().Close())
	}
	if r.cfg.Bus == nil || r.cfg.CloseBus {
		errs = append(errs, r.bus.Close())
	}
	return errors.Join(errs...)
}
