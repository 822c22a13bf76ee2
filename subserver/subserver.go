// Package subserver is the per-model event loop of TokenRouter. One
// goroutine owns each sub-server and runs three stages per iteration:
//
//  1. Receive: drain the inbox as a batch — peer messages (a request handed
//     over or back), admit/finish/cancel broadcasts. A returning request
//     resumes from pending: its KV cache stayed, so only the tokens it has
//     not seen are appended (handoff-resume).
//  2. Schedule: sched.Decide says whether enough requests are runnable
//     (delayed batching, with a max-wait guard).
//  3. Execute: one engine step for all runnable requests, the algorithm's
//     Route on the results, then for each request: stay, move to a peer
//     (parked as pending here), or finish.
//
// For algorithms that opt in (route.Speculable), a routed position need
// not stop the request: it goes on as a draft here while the peer
// verifies the position (speculative continuation, speculate.go).
//
// Sub-servers share nothing but the bus.
package subserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/constrain"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
)

// Config configures one sub-server.
type Config struct {
	// Index is this model's index; Models is the number of models.
	Index, Models int
	// Name is the model's name.
	Name string
	// Engine runs the model. The sub-server owns it while running.
	Engine engine.Engine
	// Algorithm is this model's instance of the routing algorithm.
	Algorithm route.Algorithm
	// Policy is the initial launch policy; SetPolicy changes it.
	Policy sched.Policy
	// Bus connects the sub-servers.
	Bus bus.Bus
	// MaxBatch bounds a step's batch (default 256).
	MaxBatch int
	// Observer, if set, is told about every step and every hand-off. It is
	// called from the loop goroutine and must be quick.
	Observer Observer
	// Vocab returns the model's vocabulary prepared for structured output
	// (route.Params.Schema), built on the first request that has a schema;
	// nil refuses such requests.
	Vocab func() *constrain.Vocab
	// Speculate configures speculative continuation (route.Speculable);
	// the zero value speculates where the algorithm opted in, to a depth
	// chosen from measurements.
	Speculate Speculation
	// Reopen, if set, opens a new engine for the model after the current
	// one panicked (the failure boundary, guard.go); without it such a
	// panic stops the sub-server with ErrEngineFailed.
	Reopen func(context.Context) (engine.Engine, error)
	// OnPanic, if set, is told about every recovered panic, once, with its
	// stack (for the log). It is called from the loop goroutine.
	OnPanic func(*Panic)
	// Replica is this sub-server's replica of its model (DESIGN §9): its
	// bus endpoint is bus.Endpoint(Index, Replica).
	Replica int
	// Placer, if set, places the requests this sub-server hands to models
	// with several replicas (replicas.go); nil: every model has one.
	Placer Placer
}

// Observer watches a sub-server's steps, for automatic thresholds and
// metrics.
type Observer interface {
	// Step reports one engine step: batch size, tokens appended, latency.
	Step(model, batch, appended int, d time.Duration)
	// Routed reports the requests of one step by destination: stayed[i]
	// requests went to model i (the own index counts stays). Finished
	// requests are not counted.
	Routed(model int, moved []int)
}

// WaitObserver is an optional Observer capability: how long each request
// that arrived on a model (new from the front end, or handed over by a
// peer) waited, runnable, before the step that ran it (the batch admission
// delay). entry is set for a new request's first step.
type WaitObserver interface {
	Waited(model int, entry bool, d time.Duration)
}

// where a request is, seen from one sub-server.
type where uint8

const (
	absent   where = iota // never here or moved on before arriving
	runnable              // queued for the next step
	pending               // handed to a peer; KV kept here
	parked                // speculating, at its bound: waits for a verdict
	finished              // finished here; waiting for the finish broadcast
)

// rec is one request's record on one sub-server.
type rec struct {
	req     route.Request
	seen    []int // seen[i]: tokens of the sequence model i's KV holds
	at      where
	readyAt time.Duration
	hasKV   bool
	cons    *constraint // the output schema's state (nil: none)
	arrived arrival     // how it became runnable, until its next step
	// Log-probabilities, when the request asks for them: lps of the
	// uncommitted tokens kept (by position), fresh of the last step.
	lps, fresh []engine.Logprob
	// draft is the request's speculation where it speculates from, vto
	// the endpoint verifying it; verify lists the positions of its verify
	// job queued here, for round vepoch of model vfrom at endpoint vfromEP;
	// vlast holds the positions and verdicts of the job answered last, and
	// vdead says a later job of its round was found built on a refused
	// token.
	draft   draft
	vto     int
	verify  []int32
	vepoch  uint32
	vfrom   int
	vfromEP int
	vlast   []int32
	vdead   bool
	// Replicas (replicas.go): placed[i] is the replica of model i the
	// request is pinned to (−1: none); from is the endpoint it last
	// arrived from. While it is pending here, sent is the copy of the
	// hand-off this sub-server answers for (nil: none), sentTo where it
	// went and snap its algorithm state's encoding.
	placed []int
	from   int
	sent   *bus.Event
	sentTo int
	snap   []byte
}

// arrival says how a request became runnable on a sub-server.
type arrival uint8

const (
	stayed  arrival = iota // it stepped here last
	entered                // new from the front end
	handed                 // handed over by a peer
)

// Stats is a snapshot of a sub-server's counters.
type Stats struct {
	// Records is the number of requests known here (active system-wide).
	Records int
	// Runnable and Pending count requests queued here and parked here.
	Runnable, Pending int
	// KVSequences is the number of sequences holding KV in the engine.
	KVSequences int
	// Steps is the number of steps run; Tokens the tokens committed here.
	Steps, Tokens uint64
	// LastBatch is the last step's batch size; LastStep its latency.
	LastBatch int
	// LastStep is the latency of the last step.
	LastStep time.Duration
	// BusyTime is the total time spent in engine steps.
	BusyTime time.Duration
	// Stepped sums the steps' batch sizes: the mean batch over an interval
	// is its change over the change of Steps.
	Stepped uint64
	// HandedOff counts the requests this model's steps sent to another
	// model: its routed fraction over an interval is the change of
	// HandedOff over the change of Stepped.
	HandedOff uint64
	// KVBlocks is the number of KV cache blocks (pages) in use, or -1
	// when the engine does not report them (engine.KVPager).
	KVBlocks int
	// Threshold is the launch threshold in force: the batch size the
	// policy waits for at the current number of active requests.
	Threshold int
	// PrefixLooked and PrefixHit count the prompt tokens of sequences that
	// looked up the engine's prefix cache and those found there
	// (engine.PrefixCacher; zero otherwise).
	PrefixLooked, PrefixHit uint64
	// Speculative continuation, counted on the model that speculates:
	// Speculated tokens kept as drafts past an unverified routed position
	// (that position's own token included); Kept of them committed;
	// RolledBack of them discarded (by a disagreement, or when the
	// request ended). Verified counts the routed positions whose peer
	// token was compared with this model's (speculated or not), Agreed
	// those where the two were equal.
	Speculated, Kept, RolledBack, Verified, Agreed uint64
	// Depth is the speculation depth bound in force for requests that do
	// not set their own: the configured one, or AutoDepth of the
	// measurements so far (0 until enough routed positions were compared);
	// 0 when this model does not speculate.
	Depth int
	// SmallTokens counts the tokens committed here that model 0 (the
	// small model) produced; the rest of Tokens other models produced
	// (with speculation the small model commits the large model's tokens
	// at routed positions).
	SmallTokens uint64
	// Panics counts the panics recovered here (guard.go); Restarts the
	// engine restarts that followed one.
	Panics, Restarts uint64
	// Progress counts the loop's iterations; Busy is how long its current
	// iteration has run (0 while it waits for work), and MaxStep the
	// longest engine step so far: the stall watchdog's inputs (Stalled).
	Progress uint64
	Busy     time.Duration
	MaxStep  time.Duration
	// Losses counts the losses of replicas this sub-server took in
	// (bus.Lost, DESIGN §9).
	Losses uint64
}

// Server is one model's sub-server.
type Server struct {
	cfg    Config
	ep     int // the bus endpoint: bus.Endpoint(Index, Replica)
	inbox  *queue
	policy atomic.Pointer[sched.Policy]
	epoch  time.Time

	recs  map[uint64]*rec
	run   []*rec
	spare []*rec
	evs   []*bus.Event

	// step buffers, reused
	batch []*rec
	in    []engine.Input
	out   []engine.Output
	reqs  []*route.Request
	dec   []route.Decision
	moved []int
	view  route.Step

	eos      int32
	pieces   route.Pieces // the model's token texts, for stop strings (nil: none)
	embed    engine.Embedder
	wanter   route.Wanter
	turner   engine.Turner // the engine, if it takes turns with others
	pager    engine.KVPager
	prefix   engine.PrefixCacher
	waits    WaitObserver
	sender   route.Sender
	receiver route.Receiver

	stats struct {
		records, runnable, pending, kv, batch atomic.Int64
		kvBlocks, threshold                   atomic.Int64
		steps, tokens, stepped, handed        atomic.Uint64
		prefixLooked, prefixHit               atomic.Uint64
		last, busy                            atomic.Int64
		speculated, kept, rolledBack          atomic.Uint64
		verified, agreed, small               atomic.Uint64
		depth                                 atomic.Int64
		panics, restarts, progress, losses    atomic.Uint64
		iterStart, maxStep                    atomic.Int64
	}

	engMu        sync.Mutex // guards cfg.Engine's replacement (Engine)
	abandoned    atomic.Bool
	timer        *time.Timer
	failed       []int // indices of the step's requests that failed in Route
	engineBroken bool  // the engine panicked: restart it before the next step

	spec  route.Speculable // the algorithm, when it may speculate here
	meter meter            // measurements for the automatic depth
}

// New returns a sub-server and attaches it to the bus. Run starts it.
func New(cfg Config) (*Server, error) {
	if cfg.Engine == nil || cfg.Algorithm == nil || cfg.Bus == nil {
		return nil, errors.New("subserver: engine, algorithm and bus are required")
	}
	if cfg.Index < 0 || cfg.Index >= cfg.Models || cfg.Models > 127 {
		return nil, fmt.Errorf("subserver: model index %d of %d", cfg.Index, cfg.Models)
	}
	if cfg.Replica < 0 || cfg.Replica >= bus.MaxReplicas {
		return nil, fmt.Errorf("subserver: replica %d: want 0 to %d", cfg.Replica, bus.MaxReplicas-1)
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 256
	}
	s := &Server{cfg: cfg, ep: bus.Endpoint(cfg.Index, cfg.Replica), inbox: newQueue(), epoch: time.Now(), recs: map[uint64]*rec{},
		moved: make([]int, cfg.Models)}
	p := cfg.Policy
	s.policy.Store(&p)
	s.bindEngine()
	if cfg.Vocab != nil {
		s.pieces = func(id int32) []byte {
			if v := cfg.Vocab(); v != nil {
				return v.Piece(id)
			}
			return nil
		}
	}
	s.wanter, _ = cfg.Algorithm.(route.Wanter)
	s.waits, _ = cfg.Observer.(WaitObserver)
	s.sender, _ = cfg.Algorithm.(route.Sender)
	s.receiver, _ = cfg.Algorithm.(route.Receiver)
	if cfg.Speculate.Mode != SpeculateOff {
		s.spec, _ = cfg.Algorithm.(route.Speculable)
	}
	if cfg.Speculate.Mode == SpeculateOn && !speculable(s.spec, cfg.Models) {
		return nil, fmt.Errorf("subserver %s: speculation on, but the algorithm does not allow it", cfg.Name)
	}
	if cfg.Speculate.Depth < 0 || cfg.Speculate.Depth > MaxDepth {
		return nil, fmt.Errorf("subserver %s: speculation depth %d: want 0 (automatic) to %d", cfg.Name, cfg.Speculate.Depth, MaxDepth)
	}
	if b, ok := cfg.Bus.(bus.StateBinder); ok {
		if st, ok := cfg.Algorithm.(route.Stater); ok {
			b.BindStates(s.ep, st) // states arriving here decode into this algorithm's
		}
	}
	if err := cfg.Bus.Attach(s.ep, s.inbox.push); err != nil {
		return nil, fmt.Errorf("subserver %s: %w", cfg.Name, err)
	}
	return s, nil
}

// bindEngine takes the engine's facts and optional capabilities.
func (s *Server) bindEngine() {
	e := s.cfg.Engine
	s.eos = e.Info().EOS
	s.embed, _ = e.(engine.Embedder)
	s.turner, _ = e.(engine.Turner)
	s.pager, _ = engine.Capability[engine.KVPager](e)
	s.prefix, _ = engine.Capability[engine.PrefixCacher](e)
}

// Engine returns the engine the sub-server runs now: Config.Engine, or the
// one Config.Reopen opened after it failed. Whoever closes engines closes
// this one once Run has returned.
func (s *Server) Engine() engine.Engine {
	s.engMu.Lock()
	defer s.engMu.Unlock()
	return s.cfg.Engine
}

// SetPolicy replaces the launch policy; the loop uses it from its next
// decision on. Safe to call from any goroutine.
func (s *Server) SetPolicy(p sched.Policy) { s.policy.Store(&p) }

// Policy returns the current launch policy.
func (s *Server) Policy() sched.Policy { return *s.policy.Load() }

// Stats returns a snapshot of the counters. Safe from any goroutine.
func (s *Server) Stats() Stats {
	return Stats{
		Records: int(s.stats.records.Load()), Runnable: int(s.stats.runnable.Load()),
		Pending: int(s.stats.pending.Load()), KVSequences: int(s.stats.kv.Load()),
		Steps: s.stats.steps.Load(), Tokens: s.stats.tokens.Load(),
		LastBatch: int(s.stats.batch.Load()), LastStep: time.Duration(s.stats.last.Load()),
		BusyTime: time.Duration(s.stats.busy.Load()),
		Stepped:  s.stats.stepped.Load(), HandedOff: s.stats.handed.Load(),
		KVBlocks: int(s.stats.kvBlocks.Load()), Threshold: int(s.stats.threshold.Load()),
		PrefixLooked: s.stats.prefixLooked.Load(), PrefixHit: s.stats.prefixHit.Load(),
		Speculated: s.stats.speculated.Load(), Kept: s.stats.kept.Load(), RolledBack: s.stats.rolledBack.Load(),
		Verified: s.stats.verified.Load(), Agreed: s.stats.agreed.Load(), Depth: int(s.stats.depth.Load()),
		SmallTokens: s.stats.small.Load(),
		Panics:      s.stats.panics.Load(), Restarts: s.stats.restarts.Load(),
		Progress: s.stats.progress.Load(), Busy: s.busy(), MaxStep: time.Duration(s.stats.maxStep.Load()),
		Losses: s.stats.losses.Load(),
	}
}

// busy is how long the loop's current iteration has run, 0 while it waits.
func (s *Server) busy() time.Duration {
	t := s.stats.iterStart.Load()
	if t == 0 {
		return 0
	}
	return max(time.Duration(time.Now().UnixNano()-t), 0)
}

// Run runs the loop until ctx ends; it then detaches from the bus and
// releases every request's KV. It returns nil on a normal stop, and an
// error wrapping ErrEngineFailed when the engine panicked and could not be
// reopened: every request held here has then ended with an error, unless
// the model has other replicas, where they go on once the deployment
// announces this one lost (replicas.go).
func (s *Server) Run(ctx context.Context) error {
	defer s.shutdown()
	s.timer = time.NewTimer(time.Hour)
	s.timer.Stop()
	for ctx.Err() == nil {
		if err := s.loopSafe(ctx); err != nil {
			for _, r := range s.recs {
				if r.at != finished && s.replicas(s.cfg.Index) <= 1 {
					s.fail(ctx, r, err)
				}
			}
			return err
		}
	}
	return nil
}

// iterate is one iteration of the loop: receive, then launch a step or
// wait for work.
func (s *Server) iterate(ctx context.Context) {
	s.stats.iterStart.Store(time.Now().UnixNano())
	s.stats.progress.Add(1)
	s.receive(ctx)
	s.publish()
	if ctx.Err() != nil {
		return
	}
	st := sched.State{Runnable: len(s.run), Active: s.active()}
	if len(s.run) > 0 {
		st.ReadySince = s.run[0].readyAt
	}
	d := sched.Decide(*s.policy.Load(), st, s.now())
	if d.Launch {
		s.launch(ctx)
		return
	}
	if d.Wake {
		s.timer.Reset(d.WakeAt - s.now())
	}
	s.stats.iterStart.Store(0)
	select {
	case <-ctx.Done():
	case <-s.inbox.wake:
	case <-s.timer.C:
	}
	s.timer.Stop()
}

func (s *Server) now() time.Duration { return time.Since(s.epoch) }

// launch runs a step. An engine that takes turns with others
// (engine.Turner) is stepped inside its turn, with the batch formed once
// the turn has come: requests that arrived during the wait join it.
func (s *Server) launch(ctx context.Context) {
	if s.turner == nil {
		s.step(ctx)
		return
	}
	end, err := s.turner.Turn(ctx)
	if err != nil {
		return // ctx ended: Run returns
	}
	defer end()
	s.receive(ctx)
	if len(s.run) > 0 {
		s.step(ctx)
	}
}

func (s *Server) shutdown() {
	if s.abandoned.Load() {
		s.closeEngine()
		return
	}
	s.cfg.Bus.Detach(s.ep)
	for _, e := range s.inbox.drain(nil) {
		s.cfg.Bus.Put(e)
	}
	for id, r := range s.recs {
		s.drop(id, r)
	}
	s.publish()
}

// publish stores the gauges for Stats.
func (s *Server) publish() {
	pend := 0
	kv := 0
	for _, r := range s.recs {
		if r.at == pending || r.at == parked {
			pend++
		}
		if r.hasKV {
			kv++
		}
	}
	s.stats.records.Store(int64(len(s.recs)))
	s.stats.runnable.Store(int64(len(s.run)))
	s.stats.pending.Store(int64(pend))
	s.stats.kv.Store(int64(kv))
	blocks := -1
	if s.pager != nil {
		blocks = s.pager.KVBlocksInUse()
	}
	s.stats.kvBlocks.Store(int64(blocks))
	if s.prefix != nil {
		looked, hit, _ := s.prefix.PrefixCacheStats()
		s.stats.prefixLooked.Store(looked)
		s.stats.prefixHit.Store(hit)
	}
	s.stats.threshold.Store(int64(s.policy.Load().B.At(s.active())))
}

// receive drains the inbox and applies every event.
func (s *Server) receive(ctx context.Context) {
	s.evs = s.inbox.drain(s.evs)
	for i, e := range s.evs {
		switch e.Kind {
		case bus.Admit:
			if s.recs[e.ID] == nil {
				s.recs[e.ID] = s.newRec(e.ID)
			}
		case bus.Peer:
			s.resumeSafe(ctx, e)
		case bus.Finish, bus.Cancel:
			if r := s.recs[e.ID]; r != nil {
				s.drop(e.ID, r)
			}
		case bus.Released:
			s.released(e)
		case bus.Lost:
			if t, ok := s.cfg.Placer.(LossTaker); ok {
				t.Lost(e.Endpoint)
			}
			s.lost(ctx, e.Endpoint)
		}
		s.cfg.Bus.Put(e)
		s.evs[i] = nil
	}
	s.evs = s.evs[:0]
}

func (s *Server) newRec(id uint64) *rec {
	var r *rec
	if n := len(s.spare); n > 0 {
		r, s.spare = s.spare[n-1], s.spare[:n-1]
	} else {
		r = &rec{seen: make([]int, s.cfg.Models), placed: make([]int, s.cfg.Models)}
	}
	r.req.ID = id
	for i := range r.placed {
		r.placed[i] = -1
	}
	r.from = bus.Frontend
	return r
}

// drop forgets a request and frees its KV.
func (s *Server) drop(id uint64, r *rec) {
	if r.at == runnable {
		if i := slices.Index(s.run, r); i >= 0 {
			s.run = slices.Delete(s.run, i, i+1)
		}
	}
	if r.hasKV && !s.engineBroken {
		s.release(id)
	}
	if dr := &r.draft; len(dr.open) > 0 {
		s.stats.rolledBack.Add(uint64(len(r.req.Tokens) - int(dr.open[0])))
	}
	delete(s.recs, id)
	s.unkeep(r)
	tok, by, seen := r.req.Tokens[:0], r.req.By[:0], r.seen
	dr := draft{open: r.draft.open[:0], sent: r.draft.sent[:0], snaps: r.draft.snaps[:0]}
	clear(seen)
	*r = rec{seen: seen, draft: dr, verify: r.verify[:0], vlast: r.vlast[:0], placed: r.placed, snap: r.snap[:0]}
	r.req.Tokens, r.req.By = tok, by
	s.spare = append(s.spare, r)
}

// resume applies an arriving peer message: handoff-resume.
func (s *Server) resume(ctx context.Context, e *bus.Event) {
	r := s.recs[e.ID]
	if r == nil && e.From == bus.Frontend {
		// The entry message can overtake its admit broadcast when the bus
		// does not order messages from one sender across subjects.
		r = s.newRec(e.ID)
		s.recs[e.ID] = r
	}
	if r == nil || r.at == finished {
		return // cancelled or finished while the message travelled
	}
	m := &e.Msg
	if len(m.Verify) > 0 {
		if len(m.Verdict) > 0 {
			s.settle(ctx, r, m)
		} else {
			s.queueVerify(ctx, r, e)
		}
		return
	}
	r.req.State = m.State
	if s.receiver != nil {
		s.receiver.Receive(&r.req, m)
	}
	self := s.cfg.Index
	kv := s.kvHeld(r)
	if m.Anchor > len(r.req.Tokens) || m.Anchor < 0 || len(m.Seen) != s.cfg.Models {
		s.fail(ctx, r, fmt.Errorf("subserver %s: message anchor %d beyond the %d tokens held", s.cfg.Name, m.Anchor, len(r.req.Tokens)))
		return
	}
	if !s.cutKV(ctx, r, m.Anchor) {
		return
	}
	r.req.Params, r.req.PromptLen, r.req.Committed = m.Params, m.PromptLen, m.Committed
	r.req.Tokens = append(r.req.Tokens[:m.Anchor], m.Tokens...)
	r.req.By = append(r.req.By[:m.Anchor], m.By...)
	r.lps = logprobsIn(r.lps[:0], m.Logprobs, m.Committed, len(r.req.Tokens))
	copy(r.seen, m.Seen)
	s.arrived(r, m, e.From)
	// The KV holds the anchor's tokens, or fewer when the engine was
	// restarted meanwhile: the step recomputes the rest.
	r.seen[self] = min(m.Anchor, kv)
	r.at, r.readyAt, r.arrived = runnable, s.now(), handed
	if e.From == bus.Frontend {
		r.arrived = entered
	}
	s.run = append(s.run, r)
	s.probed(r)
}

// kvHeld is how many tokens of r's sequence the engine holds here.
func (s *Server) kvHeld(r *rec) int {
	if !r.hasKV {
		return 0
	}
	return r.seen[s.cfg.Index]
}

// cutKV truncates r's KV here to n tokens when it holds more. On failure
// it fails r and returns false.
func (s *Server) cutKV(ctx context.Context, r *rec, n int) bool {
	if s.kvHeld(r) <= n {
		return true
	}
	if err := s.truncate(r.req.ID, n); err != nil {
		s.fail(ctx, r, fmt.Errorf("subserver %s: %w", s.cfg.Name, err))
		return false
	}
	return true
}

// step runs one engine step over the runnable requests and applies the
// algorithm's decisions.
func (s *Server) step(ctx context.Context) {
	n, appended, ok := s.formBatch(ctx)
	if !ok {
		return
	}
	s.observeWaits()
	t0 := time.Now()
	n, appended, err := s.runEngine(ctx, n, appended)
	d := time.Since(t0)
	s.recordStep(n, d, err)
	if err != nil {
		s.stepFailed(ctx, err)
		return
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Step(s.cfg.Index, n, appended, d)
	}
	s.routeAndApply(ctx, n)
}

// formBatch takes up to MaxBatch runnable requests into the step's batch
// and builds their engine inputs. It returns the batch size and the number
// of tokens the step appends, or false when every request failed to join.
func (s *Server) formBatch(ctx context.Context) (n, appended int, ok bool) {
	n = min(len(s.run), s.cfg.MaxBatch)
	s.batch = append(s.batch[:0], s.run[:n]...)
	s.run = append(s.run[:0], s.run[n:]...)
	s.in, s.out = s.in[:0], slices.Grow(s.out[:0], n)[:n]
	s.reqs, s.dec = s.reqs[:0], s.dec[:0]
	for _, r := range s.batch {
		in, ok := s.stepInput(ctx, r)
		if !ok {
			continue
		}
		appended += len(in.Tokens)
		s.in = append(s.in, in)
		s.batch[len(s.in)-1] = r
		s.reqs = append(s.reqs, &r.req)
		s.dec = append(s.dec, route.Decision{})
	}
	if len(s.in) < n { // requests whose schema could not be applied left the batch
		clear(s.batch[len(s.in):])
		s.batch, n = s.batch[:len(s.in)], len(s.in)
		s.out = s.out[:n]
		if n == 0 {
			return 0, 0, false
		}
	}
	return n, appended, true
}

// stepInput rewinds r's KV position as the step needs and returns its
// engine input (tokens, wants, sampling and schema mask); false when r
// failed and leaves the batch.
func (s *Server) stepInput(ctx context.Context, r *rec) (engine.Input, bool) {
	self := s.cfg.Index
	if len(r.verify) > 0 && r.seen[self] >= int(r.verify[0]) {
		// A verify job reads this model's token at each position:
		// recompute from the one before the first.
		r.seen[self] = int(r.verify[0]) - 1
		if err := s.truncate(r.req.ID, r.seen[self]); err != nil {
			s.fail(ctx, r, fmt.Errorf("subserver %s: %w", s.cfg.Name, err))
			return engine.Input{}, false
		}
	}
	if r.seen[self] >= len(r.req.Tokens) {
		// Everything is in the KV already (the token sampled here was
		// dropped and came back unchanged): recompute the last position.
		r.seen[self] = len(r.req.Tokens) - 1
		if err := s.truncate(r.req.ID, r.seen[self]); err != nil {
			r.seen[self] = 0
			_ = s.truncate(r.req.ID, 0)
		}
	}
	var want engine.Want
	if s.wanter != nil {
		want = s.wanter.Want(self, &r.req)
	}
	if len(r.verify) > 0 {
		want |= engine.WantAllTokens
	}
	toks := r.req.Tokens[r.seen[self]:]
	allow, err := s.allowSafe(r, r.seen[self], want)
	if err != nil {
		s.fail(ctx, r, err)
		return engine.Input{}, false
	}
	r.req.Appended = len(toks)
	sp := r.req.StepSampling()
	if sp.Logprobs {
		r.fresh, sp.Record = r.fresh[:0], &r.fresh
	}
	return engine.Input{Seq: engine.SeqID(r.req.ID), Tokens: toks, Want: want, Sampling: sp, Allow: allow}, true
}

// runEngine steps the engine over the batch. When the KV cache cannot hold
// the whole batch it halves it (decodes first) until a step fits, deferring
// the rest; it returns the batch size and appended tokens actually stepped.
func (s *Server) runEngine(ctx context.Context, n, appended int) (int, int, error) {
	err := s.stepEngine(ctx)
	if errors.Is(err, engine.ErrOutOfMemory) && n > 1 {
		s.smallFirst()
	}
	for errors.Is(err, engine.ErrOutOfMemory) && n > 1 && ctx.Err() == nil {
		// The KV cache cannot hold the whole batch: step the first half
		// (and so on; decodes first, they need the least) and let the
		// rest wait for the next step.
		n, appended = s.deferTail(n/2), 0
		for _, in := range s.in {
			appended += len(in.Tokens)
		}
		err = s.stepEngine(ctx)
	}
	return n, appended, err
}

// recordStep records a step of n requests that took d in the stats (and,
// when it succeeded, in the speculation meter).
func (s *Server) recordStep(n int, d time.Duration, err error) {
	if int64(d) > s.stats.maxStep.Load() {
		s.stats.maxStep.Store(int64(d))
	}
	if s.spec != nil && err == nil {
		s.meter.step.add(float64(d))
	}
	s.stats.steps.Add(1)
	s.stats.stepped.Add(uint64(n))
	s.stats.batch.Store(int64(n))
	s.stats.last.Store(int64(d))
	s.stats.busy.Add(int64(d))
}

// stepFailed handles an engine step's error: when shutting down it puts the
// batch back for shutdown to free; otherwise it fails every request of it.
func (s *Server) stepFailed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		// Shutting down: put the batch back so shutdown frees it.
		s.run = append(s.batch, s.run...)
		s.batch = s.batch[:0]
		return
	}
	for _, r := range s.batch {
		r.hasKV = true
		s.fail(ctx, r, fmt.Errorf("subserver %s: step: %w", s.cfg.Name, err))
	}
}

// routeAndApply has the algorithm route the step's n outputs and carries
// out each request's decision (or answers its verify job).
func (s *Server) routeAndApply(ctx context.Context, n int) {
	self := s.cfg.Index
	for i, r := range s.batch {
		r.hasKV = true
		r.seen[self] = len(r.req.Tokens)
		s.dec[i] = route.Decision{Next: self, Cut: -1, Token: s.out[i].Token, Commit: true}
	}
	s.view = route.Step{Model: self, Requests: s.reqs, Outputs: s.out[:n], Embed: s.embed}
	s.route(ctx)
	clear(s.moved)
	now := s.now()
	for i, r := range s.batch {
		if len(s.failed) > 0 && slices.Contains(s.failed, i) {
			continue
		}
		if len(r.verify) > 0 {
			s.answerSafe(ctx, r, &s.out[i])
			continue
		}
		s.applySafe(ctx, r, s.dec[i], s.out[i].Token, now)
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Routed(self, s.moved)
	}
	clear(s.batch)
	clear(s.reqs)
}

// observeWaits reports the wait of each request of the batch that arrived
// since its last step.
func (s *Server) observeWaits() {
	now := s.now()
	for _, r := range s.batch {
		if r.arrived != stayed && s.waits != nil {
			s.waits.Waited(s.cfg.Index, r.arrived == entered, now-r.readyAt)
		}
		r.arrived = stayed
	}
}

// smallFirst reorders the step being formed by the tokens each request
// appends, fewest first (stable), so that splitting it keeps the running
// decodes going while new prompts wait for memory.
func (s *Server) smallFirst() {
	order := make([]int, len(s.in))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(s.in[a].Tokens) - len(s.in[b].Tokens) })
	batch, in, reqs := slices.Clone(s.batch), slices.Clone(s.in), slices.Clone(s.reqs)
	for i, j := range order {
		s.batch[i], s.in[i], s.reqs[i] = batch[j], in[j], reqs[j]
	}
}

// deferTail keeps the first k requests of the step being formed and puts
// the others back at the front of the run queue; it returns k.
func (s *Server) deferTail(k int) int {
	s.run = append(slices.Clone(s.batch[k:]), s.run...)
	clear(s.batch[k:])
	s.batch, s.in, s.out, s.reqs, s.dec = s.batch[:k], s.in[:k], s.out[:k], s.reqs[:k], s.dec[:k]
	return k
}

// apply carries out one decision; tok is the token the step sampled.
func (s *Server) apply(ctx context.Context, r *rec, d route.Decision, tok int32, now time.Duration) {
	self := s.cfg.Index
	q := &r.req
	if s.speculate(ctx, r, d, tok, now) {
		return
	}
	if d.Cut >= 0 && d.Cut < len(q.Tokens) {
		if d.Cut < q.Committed || len(r.draft.open) > 0 {
			s.fail(ctx, r, fmt.Errorf("subserver %s: algorithm cut to %d below the %d committed tokens", s.cfg.Name, d.Cut, q.Committed))
			return
		}
		q.Tokens, q.By = q.Tokens[:d.Cut], q.By[:d.Cut]
		r.lps = logprobsIn(r.lps[:0], r.lps, 0, d.Cut)
		for k := range r.seen {
			r.seen[k] = min(r.seen[k], d.Cut)
		}
		if err := s.truncate(q.ID, r.seen[self]); err != nil {
			s.fail(ctx, r, fmt.Errorf("subserver %s: %w", s.cfg.Name, err))
			return
		}
	}
	if d.Token != route.NoToken {
		if q.Params.Sampling.Logprobs {
			r.keepLogprob(len(q.Tokens), d.Token)
		}
		q.Tokens = append(q.Tokens, d.Token)
		q.By = append(q.By, int8(self))
		if len(r.draft.open) > 0 {
			s.stats.speculated.Add(1)
		}
	}
	if d.Commit && len(q.Tokens) > q.Committed {
		if s.commit(ctx, r) {
			return
		}
	}
	if d.Next < 0 || d.Next >= s.cfg.Models {
		s.fail(ctx, r, fmt.Errorf("subserver %s: algorithm routed to model %d of %d", s.cfg.Name, d.Next, s.cfg.Models))
		return
	}
	s.moved[d.Next]++
	if d.Next == self {
		s.requeue(r, now)
		return
	}
	if len(r.draft.open) > 0 {
		s.fail(ctx, r, fmt.Errorf("subserver %s: algorithm moved a request with unverified positions to model %d", s.cfg.Name, d.Next))
		return
	}
	s.stats.handed.Add(1)
	s.send(ctx, r, d.Next)
}

// commit makes the tokens past q.Committed final, up to the oldest
// unverified routed position, tells the front end and finishes the request
// when it reached its limit or end of sequence. It reports whether the
// request finished.
func (s *Server) commit(ctx context.Context, r *rec) bool {
	q := &r.req
	from := q.Committed
	to, reason := q.CommitEnd(s.eos, s.pieces)
	if lim := r.commitLimit(); to > lim {
		to, reason = lim, ""
	}
	q.Committed = to
	if to > from {
		s.stats.tokens.Add(uint64(to - from))
		small := 0
		for _, b := range q.By[from:to] {
			if b == 0 {
				small++
			}
		}
		s.stats.small.Add(uint64(small))
		e := s.cfg.Bus.Get()
		e.Kind, e.ID, e.From, e.Pos = bus.Commit, q.ID, s.ep, from-q.PromptLen
		e.Tokens = append(e.Tokens[:0], q.Tokens[from:to]...)
		e.By = append(e.By[:0], q.By[from:to]...)
		if q.Params.Sampling.Logprobs {
			e.Logprobs = r.takeLogprobs(from, to)
		}
		_ = s.emit(ctx, bus.Frontend, e) // a front end that is gone has nobody to tell
	}
	if reason == "" {
		return false
	}
	s.end(ctx, r, reason, "")
	return true
}

// end finishes a request: done to the front end, finish to everyone.
func (s *Server) end(ctx context.Context, r *rec, reason, msg string) {
	r.at = finished
	e := s.cfg.Bus.Get()
	e.Kind, e.ID, e.From, e.Reason, e.Err = bus.Done, r.req.ID, s.ep, reason, msg
	_ = s.emit(ctx, bus.Frontend, e)
	f := s.cfg.Bus.Get()
	f.Kind, f.ID, f.From = bus.Finish, r.req.ID, s.ep
	s.announce(ctx, f)
}

// fail ends a request with an error.
func (s *Server) fail(ctx context.Context, r *rec, err error) {
	reason := "error"
	if errors.Is(err, ErrNoReplica) {
		reason = bus.ReasonUnavailable
	}
	s.end(ctx, r, reason, err.Error())
}

// send parks r as pending and hands it to model to: to the replica it is
// pinned to there, or the one placement chooses (replicas.go).
func (s *Server) send(ctx context.Context, r *rec, to int) {
	ep, ok := s.placeHandOff(ctx, r, to)
	if !ok {
		return
	}
	q := &r.req
	e := s.cfg.Bus.Get()
	e.Kind, e.ID, e.From = bus.Peer, q.ID, s.ep
	m := &e.Msg
	anchor := min(r.seen[to], len(q.Tokens))
	m.ID, m.From, m.To, m.Anchor = q.ID, s.cfg.Index, to, anchor
	m.Tokens = append(m.Tokens[:0], q.Tokens[anchor:]...)
	m.By = append(m.By[:0], q.By[anchor:]...)
	m.PromptLen, m.Committed, m.Params, m.State = q.PromptLen, q.Committed, q.Params, q.State
	m.Seen = append(m.Seen[:0], r.seen...)
	m.Placed = m.Placed[:0]
	if s.cfg.Placer != nil {
		m.Placed = append(m.Placed, r.placed...)
	}
	m.Logprobs = append(m.Logprobs[:0], r.lps...)
	if s.sender != nil {
		s.sender.Send(q, m)
	}
	r.at = pending
	if err := s.keep(r, e, ep); err != nil {
		s.cfg.Bus.Put(e)
		s.fail(ctx, r, err)
		return
	}
	s.leaving(ctx, r, ep)
	s.handOff(ctx, r, e, ep)
}

// logprobsIn appends to dst the entries of lps at positions in [lo, hi).
func logprobsIn(dst, lps []engine.Logprob, lo, hi int) []engine.Logprob {
	for _, lp := range lps {
		if int(lp.Pos) >= lo && int(lp.Pos) < hi {
			dst = append(dst, lp)
		}
	}
	return dst
}

// keepLogprob keeps the log-probability the last step gave tok at pos
// (none when the algorithm placed a token the step did not sample there).
func (r *rec) keepLogprob(pos int, tok int32) {
	r.lps = logprobsIn(r.lps[:0], r.lps, 0, pos)
	for _, lp := range r.fresh {
		if int(lp.Pos) == pos && lp.Token == tok {
			r.lps = append(r.lps, lp)
			return
		}
	}
}

// takeLogprobs returns the log-probabilities of the tokens at [from, to),
// which are being committed, and forgets them; a token without one gets
// NaN.
func (r *rec) takeLogprobs(from, to int) []engine.Logprob {
	out := make([]engine.Logprob, to-from)
	for i := range out {
		out[i] = engine.Logprob{Pos: int32(from + i), Token: r.req.Tokens[from+i], Logprob: float32(math.NaN())}
	}
	for _, lp := range r.lps {
		if p := int(lp.Pos); p >= from && p < to && lp.Token == r.req.Tokens[p] {
			out[p-from] = lp
		}
	}
	r.lps = logprobsIn(r.lps[:0], r.lps, to, math.MaxInt)
	return out
}
