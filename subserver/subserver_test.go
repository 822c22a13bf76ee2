package subserver_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/enginetest"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
)

var prompt = []int32{1, 5, 6}

func TestNewRejectsBadConfig(t *testing.T) {
	b := bus.NewMemory()
	defer b.Close()
	eng := enginetest.NewFake(ctxLen)
	ok := subserver.Config{Index: 0, Models: 2, Name: "m0", Engine: eng, Algorithm: script(nil), Bus: b}
	for _, c := range []struct {
		name string
		edit func(*subserver.Config)
		want string
	}{
		{"no engine", func(c *subserver.Config) { c.Engine = nil }, "required"},
		{"no algorithm", func(c *subserver.Config) { c.Algorithm = nil }, "required"},
		{"no bus", func(c *subserver.Config) { c.Bus = nil }, "required"},
		{"negative index", func(c *subserver.Config) { c.Index = -1 }, "model index"},
		{"index past the models", func(c *subserver.Config) { c.Index = 2 }, "model index"},
		{"too many models", func(c *subserver.Config) { c.Models = 128 }, "model index"},
		{"speculation on without opting in", func(c *subserver.Config) { c.Speculate.Mode = subserver.SpeculateOn }, "does not allow"},
		{"negative depth", func(c *subserver.Config) { c.Speculate.Depth = -1 }, "speculation depth"},
		{"depth past the bound", func(c *subserver.Config) { c.Speculate.Depth = subserver.MaxDepth + 1 }, "speculation depth"},
	} {
		cfg := ok
		c.edit(&cfg)
		if _, err := subserver.New(cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one about %q", c.name, err, c.want)
		}
	}
	on := ok
	on.Algorithm, on.Speculate = specAt{5}, subserver.Speculation{Mode: subserver.SpeculateOn, Depth: subserver.MaxDepth}
	if _, err := subserver.New(on); err != nil {
		t.Errorf("speculation on for an algorithm that opted in: %v", err)
	}
	b.Detach(0) // free the endpoint for the sub-servers below
	if _, err := subserver.New(ok); err != nil {
		t.Fatal(err)
	}
	if _, err := subserver.New(ok); err == nil || !strings.Contains(err.Error(), "m0") {
		t.Errorf("second sub-server on endpoint 0: %v, want an error naming it", err)
	}
}

// TestGeneratesAndFinishes: a request extends its prompt, decodes one
// token per step, commits each to the front end and finishes at its
// limit; the finish broadcast frees it.
func TestGeneratesAndFinishes(t *testing.T) {
	r := start(t, opts{})
	r.submit(7, prompt, route.Params{MaxTokens: 4})
	res := r.result(7)
	want := outputs(len(prompt), 4)
	if !slices.Equal(res.tokens, want) || !slices.Equal(res.by, []int8{0, 0, 0, 0}) || res.reason != "length" {
		t.Fatalf("got %v by %v (%s), want %v by model 0 (length)", res.tokens, res.by, res.reason, want)
	}
	seq := slices.Clone(prompt)
	for k := range 4 {
		s := r.step()
		appended := seq[len(seq)-1:]
		if k == 0 {
			appended = prompt
		}
		if len(s) != 1 || s[0].seq != 7 || !slices.Equal(s[0].held, seq[:len(seq)-len(appended)]) || !slices.Equal(s[0].tokens, appended) {
			t.Fatalf("step %d: %+v, want seq 7 appending %v", k, s, appended)
		}
		seq = append(seq, want[k])
	}
	if f := r.peer.next(t, bus.Finish); f.ID != 7 {
		t.Fatalf("finish for %d", f.ID)
	}
	r.idle()
	if st := r.srv.Stats(); st.Steps != 4 || st.Tokens != 4 || st.LastBatch != 1 || st.Stepped != 4 || st.HandedOff != 0 {
		t.Fatalf("stats %+v, want 4 steps of 1 request, 4 tokens, last batch 1, none handed off", st)
	}
}

// TestStopsAtEndOfSequence: an end-of-sequence token ends a request
// without being committed, unless the request ignores it.
func TestStopsAtEndOfSequence(t *testing.T) {
	eos := func(s []int32) int32 {
		if len(s) == 5 {
			return 2 // the fake engine's EOS
		}
		return count(s)
	}
	r := start(t, opts{next: eos})
	r.submit(1, prompt, route.Params{MaxTokens: 10})
	if res := r.result(1); !slices.Equal(res.tokens, []int32{13, 14}) || res.reason != "stop" {
		t.Fatalf("got %v (%s), want [13 14] (stop)", res.tokens, res.reason)
	}
	r.submit(2, prompt, route.Params{MaxTokens: 4, IgnoreEOS: true})
	if res := r.result(2); !slices.Equal(res.tokens, []int32{13, 14, 2, 16}) || res.reason != "length" {
		t.Fatalf("ignoring EOS: got %v (%s), want [13 14 2 16] (length)", res.tokens, res.reason)
	}
}

// toPeerAfter hands a request to model 1 when it reaches n outputs, once
// (a request holding tokens of model 1 came back and stays).
func toPeerAfter(n int) script {
	return func(s *route.Step, d []route.Decision) {
		for i, q := range s.Requests {
			if q.Output()+1 == n && !slices.Contains(q.By, 1) {
				d[i].Next = 1
			}
		}
	}
}

// handOff submits id and returns the peer message model 0 sends model 1
// after two output tokens (the rig's algorithm must be toPeerAfter(2)).
func (r *rig) handOff(id uint64, p route.Params) route.Message {
	r.t.Helper()
	r.submit(id, prompt, p)
	m := r.peer.next(r.t, bus.Peer)
	if m.ID != id {
		r.t.Fatalf("peer message for %d, want %d", m.ID, id)
	}
	r.stats("parked", func(s subserver.Stats) bool { return s.Pending == 1 })
	return m.Msg
}

// back is the message model 1 returns after appending toks to the whole
// sequence m brought it (m.Anchor is 0), anchored at what model 0 holds.
func back(m route.Message, commit bool, toks ...int32) route.Message {
	seq := append(slices.Clone(m.Tokens), toks...)
	by := append(slices.Clone(m.By), make([]int8, len(toks))...)
	for i := len(m.By); i < len(by); i++ {
		by[i] = 1
	}
	a := m.Seen[0]
	r := route.Message{ID: m.ID, From: 1, To: 0, Anchor: a, Tokens: seq[a:], By: by[a:], PromptLen: m.PromptLen,
		Committed: m.Committed, Seen: []int{a, len(seq)}, Params: m.Params, State: m.State}
	if commit {
		r.Committed = len(seq)
	}
	return r
}

// TestHandoffResume: a request handed to a peer is parked with its KV;
// when it comes back only the tokens the engine has not seen are appended.
func TestHandoffResume(t *testing.T) {
	r := start(t, opts{alg: toPeerAfter(2)})
	p := route.Params{MaxTokens: 6, Seed: 3}
	m := r.handOff(9, p)
	out := outputs(len(prompt), 2)
	seq := append(slices.Clone(prompt), out...)
	want := route.Message{ID: 9, From: 0, To: 1, Anchor: 0, Tokens: seq, By: []int8{-1, -1, -1, 0, 0},
		PromptLen: 3, Committed: 5, Seen: []int{4, 0}, Params: p}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("hand-off\n%+v, want\n%+v", m, want)
	}
	if st := r.srv.Stats(); st.KVSequences != 1 || st.Runnable != 0 || st.Records != 1 {
		t.Fatalf("while parked: %+v", st)
	}
	// Model 1 commits two tokens and hands the request back.
	c := r.bus.Get()
	c.Kind, c.ID, c.From, c.Pos, c.Tokens, c.By = bus.Commit, 9, 1, 2, []int32{40, 41}, []int8{1, 1}
	if err := r.bus.Send(context.Background(), bus.Frontend, c); err != nil {
		t.Fatal(err)
	}
	r.message(1, back(m, true, 40, 41))
	res := r.result(9)
	if w := []int32{13, 14, 40, 41, 17, 18}; !slices.Equal(res.tokens, w) || !slices.Equal(res.by, []int8{0, 0, 1, 1, 0, 0}) || res.reason != "length" {
		t.Fatalf("got %v by %v (%s), want %v", res.tokens, res.by, res.reason, w)
	}
	r.step()
	r.step()
	if s := r.step(); !slices.Equal(s[0].held, seq[:4]) || !slices.Equal(s[0].tokens, []int32{14, 40, 41}) {
		t.Fatalf("resumed step held %v appended %v, want %v then [14 40 41]", s[0].held, s[0].tokens, seq[:4])
	}
	r.idle()
}

// TestResumeTruncatesToTheAnchor: drafts the peer rejects are cut from
// the KV before the peer's tokens are appended.
func TestResumeTruncatesToTheAnchor(t *testing.T) {
	draft := func(s *route.Step, d []route.Decision) {
		toPeerAfter(2)(s, d)
		for i, q := range s.Requests {
			d[i].Commit = q.Committed > q.PromptLen // drafts until the verifier committed
		}
	}
	r := start(t, opts{alg: script(draft)})
	m := r.handOff(4, route.Params{MaxTokens: 3})
	if m.Committed != 3 {
		t.Fatalf("drafts were committed: %+v", m)
	}
	// The verifier keeps the prompt only, commits its own token and hands
	// the request back.
	c := r.bus.Get()
	c.Kind, c.ID, c.From, c.Tokens, c.By = bus.Commit, 4, 1, []int32{50}, []int8{1}
	if err := r.bus.Send(context.Background(), bus.Frontend, c); err != nil {
		t.Fatal(err)
	}
	ret := route.Message{ID: 4, From: 1, To: 0, Anchor: 3, Tokens: []int32{50}, By: []int8{1}, PromptLen: 3, Committed: 4,
		Seen: []int{3, 4}, Params: m.Params}
	r.message(1, ret)
	if tr := r.truncated(); tr != (trunc{4, 3}) {
		t.Fatalf("truncate %+v, want seq 4 to 3", tr)
	}
	r.step()
	r.step()
	if s := r.step(); !slices.Equal(s[0].held, prompt) || !slices.Equal(s[0].tokens, []int32{50}) {
		t.Fatalf("resumed step held %v appended %v", s[0].held, s[0].tokens)
	}
	res := r.result(4)
	if !slices.Equal(res.tokens, []int32{50, 14, 15}) || !slices.Equal(res.by, []int8{1, 0, 0}) || res.reason != "length" {
		t.Fatalf("got %v by %v (%s), want [50 14 15] by [1 0 0] (length)", res.tokens, res.by, res.reason)
	}
}

// TestResumeGuards: messages that do not fit what model 0 holds end the
// request with an error instead of corrupting it.
func TestResumeGuards(t *testing.T) {
	failTrunc := func(seq engine.SeqID, n int) error {
		if seq == 5 {
			return errInjected
		}
		return nil
	}
	r := start(t, opts{alg: toPeerAfter(2), onTrunc: failTrunc})
	for _, c := range []struct {
		id   uint64
		edit func(*route.Message)
		want string
	}{
		{1, func(m *route.Message) { m.Anchor, m.Tokens, m.By = 6, m.Tokens[1:], m.By[1:] }, "anchor 6 beyond the 5 tokens held"},
		{2, func(m *route.Message) { m.Anchor = -1 }, "anchor -1"},
		{3, func(m *route.Message) { m.Seen = m.Seen[:1] }, "anchor"},
		{5, func(m *route.Message) { m.Anchor, m.Tokens, m.By = 3, m.Tokens[:1], m.By[:1] }, errInjected.Error()},
	} {
		m := back(r.handOff(c.id, route.Params{MaxTokens: 50}), false, 40)
		c.edit(&m)
		r.message(1, m)
		r.failed(c.id, c.want)
	}
	// A request model 0 never stepped cannot resume at a position.
	r.admit(6)
	m := entry(6, prompt, route.Params{MaxTokens: 5}, 2)
	m.From, m.Anchor = 1, 2
	r.message(1, m)
	r.failed(6, "anchor 2 beyond the 0 tokens held")
}

// TestDecisionGuards: decisions the runtime cannot carry out end the
// request with an error.
func TestDecisionGuards(t *testing.T) {
	var mu sync.Mutex
	decide := map[uint64]route.Decision{} // per request: the decision on its first step
	alg := script(func(s *route.Step, d []route.Decision) {
		mu.Lock()
		defer mu.Unlock()
		for i, q := range s.Requests {
			if x, ok := decide[q.ID]; ok && q.Output() == 0 {
				x.Token = d[i].Token
				d[i] = x
			}
		}
	})
	r := start(t, opts{alg: alg, models: 3})
	for _, c := range []struct {
		id   uint64
		d    route.Decision
		want string
	}{
		{1, route.Decision{Next: 0, Cut: 2, Commit: true}, "cut to 2 below the 3 committed"},
		{2, route.Decision{Next: -1, Cut: -1, Commit: true}, "routed to model -1 of 3"},
		{3, route.Decision{Next: 3, Cut: -1, Commit: true}, "routed to model 3 of 3"},
		{5, route.Decision{Next: 2, Cut: -1, Commit: true}, "hand-off to model 2"}, // nobody serves model 2
	} {
		mu.Lock()
		decide[c.id] = c.d
		mu.Unlock()
		r.submit(c.id, prompt, route.Params{MaxTokens: 5})
		if c.id == 1 {
			r.failed(c.id, c.want)
			continue
		}
		// The sampled token was committed before the route was judged.
		if e := r.front.next(t, bus.Commit); e.ID != c.id {
			t.Fatalf("commit of %d", e.ID)
		}
		r.failed(c.id, c.want)
	}
}

// TestCutRollsBackDrafts: a cut within the drafts truncates the sequence
// and the engine's KV; the request goes on from there.
func TestCutRollsBackDrafts(t *testing.T) {
	alg := script(func(s *route.Step, d []route.Decision) {
		for i, q := range s.Requests {
			switch n := q.Output(); {
			case q.Committed > q.PromptLen:
			case n < 3:
				d[i].Commit = false // draft
			case n == 3:
				d[i].Cut = q.PromptLen + 1 // keep one draft, then the new token
			}
		}
	})
	r := start(t, opts{alg: alg, onTrunc: func(seq engine.SeqID, n int) error {
		if seq == 2 {
			return errInjected
		}
		return nil
	}})
	r.submit(1, prompt, route.Params{MaxTokens: 4})
	res := r.result(1)
	// Drafts 13 14 15; the fourth step samples 16, kept after 13 alone.
	if w := []int32{13, 16, 15, 16}; !slices.Equal(res.tokens, w) {
		t.Fatalf("got %v, want %v", res.tokens, w)
	}
	if tr := r.truncated(); tr != (trunc{1, 4}) {
		t.Fatalf("truncate %+v, want seq 1 to 4", tr)
	}
	for range 4 {
		r.step()
	}
	if s := r.step(); !slices.Equal(s[0].held, []int32{1, 5, 6, 13}) || !slices.Equal(s[0].tokens, []int32{16}) {
		t.Fatalf("step after the cut held %v appended %v", s[0].held, s[0].tokens)
	}
	r.step()
	// A cut the engine cannot carry out fails the request.
	r.submit(2, prompt, route.Params{MaxTokens: 4})
	r.failed(2, errInjected.Error())
}

// TestDroppedTokenRecomputes: when the sampled token is dropped and the
// request stays, everything is in the KV already: the last position is
// computed again (or, should truncating fail, the whole sequence).
func TestDroppedTokenRecomputes(t *testing.T) {
	dropped := map[uint64]bool{} // used by the loop goroutine alone
	drop := script(func(s *route.Step, d []route.Decision) {
		for i, q := range s.Requests {
			if !dropped[q.ID] {
				dropped[q.ID] = true
				d[i].Token = route.NoToken
			}
		}
	})
	r := start(t, opts{alg: drop, onTrunc: func(seq engine.SeqID, n int) error {
		if seq == 2 && n > 0 {
			return errInjected
		}
		return nil
	}})
	for id, held := range map[uint64][]int32{1: prompt[:2], 2: nil} {
		r.submit(id, prompt, route.Params{MaxTokens: 2})
		if res := r.result(id); !slices.Equal(res.tokens, []int32{13, 14}) {
			t.Fatalf("request %d: got %v", id, res.tokens)
		}
		r.step()
		s := r.step()
		if w := prompt[len(held):]; !slices.Equal(s[0].held, held) || !slices.Equal(s[0].tokens, w) {
			t.Fatalf("request %d: step after the drop held %v appended %v, want %v then %v", id, s[0].held, s[0].tokens, held, w)
		}
		r.step()
	}
}

// TestStepFailureEndsTheBatch: an engine error ends every request of the
// step with that error.
func TestStepFailureEndsTheBatch(t *testing.T) {
	r := start(t, opts{policy: sched.Policy{B: sched.Static(2)}, onStep: func(_ context.Context, in []engine.Input) error {
		if len(in) == 2 {
			return errInjected
		}
		return nil
	}})
	r.admit(1)
	r.admit(2)
	r.message(bus.Frontend, entry(1, prompt, route.Params{MaxTokens: 3}, 2))
	r.message(bus.Frontend, entry(2, prompt, route.Params{MaxTokens: 3}, 2))
	ended := map[uint64]bool{}
	for range 2 {
		e := r.front.next(t, bus.Done)
		if e.Reason != "error" || !strings.Contains(e.Err, errInjected.Error()) {
			t.Fatalf("request %d ended %q: %s", e.ID, e.Reason, e.Err)
		}
		ended[e.ID] = true
	}
	if !ended[1] || !ended[2] {
		t.Fatalf("ended %v, want both", ended)
	}
	r.idle()
}

// TestOutOfMemorySplitsTheBatch: when the engine's KV cache cannot hold a
// whole step, the sub-server steps part of it and the rest waits: every
// request completes; a request too large alone fails alone.
func TestOutOfMemorySplitsTheBatch(t *testing.T) {
	r := start(t, opts{policy: sched.Policy{B: sched.Static(4)}, onStep: func(_ context.Context, in []engine.Input) error {
		if len(in) > 1 && slices.ContainsFunc(in, func(ip engine.Input) bool { return ip.Seq == 9 }) || len(in) > 2 {
			return fmt.Errorf("fake: %w", engine.ErrOutOfMemory)
		}
		if len(in) == 1 && in[0].Seq == 9 {
			return fmt.Errorf("fake: seq 9 alone: %w", engine.ErrOutOfMemory)
		}
		return nil
	}})
	for _, id := range []uint64{1, 2, 3, 9} {
		r.admit(id)
	}
	for _, id := range []uint64{1, 2, 3, 9} {
		r.message(bus.Frontend, entry(id, prompt, route.Params{MaxTokens: 3}, 2))
	}
	ends := map[uint64]string{}
	for range 4 {
		e := r.front.next(t, bus.Done)
		ends[e.ID] = e.Reason
	}
	if ends[1] != "length" || ends[2] != "length" || ends[3] != "length" || ends[9] != "error" {
		t.Fatalf("requests ended %v; want 1-3 complete (length) and 9 failed alone", ends)
	}
	r.idle()
}

// TestShutdownDuringStep: a step cut short by the end of Run fails no
// request; Run returns nil and the sub-server lets go of everything.
func TestShutdownDuringStep(t *testing.T) {
	r := start(t, opts{onStep: func(ctx context.Context, _ []engine.Input) error {
		<-ctx.Done()
		return ctx.Err()
	}})
	r.submit(1, prompt, route.Params{MaxTokens: 3})
	r.step() // under way
	r.stop()
	if len(r.front.ch) != 0 {
		t.Fatalf("the front end heard %+v", <-r.front.ch)
	}
	if st := r.srv.Stats(); st.Records != 0 || st.Runnable != 0 || st.KVSequences != 0 || r.eng.Sequences() != 0 {
		t.Fatalf("after Run: %+v, %d sequences in the engine", st, r.eng.Sequences())
	}
	if err := r.bus.Send(context.Background(), 0, r.bus.Get()); err == nil {
		t.Fatal("model 0 still attached after Run")
	}
}

// TestCancelAndFinishFree: a cancel or a finish from elsewhere frees a
// request wherever it is here: runnable, parked, or only admitted.
func TestCancelAndFinishFree(t *testing.T) {
	r := start(t, opts{alg: toPeerAfter(2), policy: sched.Policy{B: sched.Static(2)}})
	// Two admitted, one runnable: below the threshold of 2, it waits.
	r.admit(1)
	r.admit(2)
	r.message(bus.Frontend, entry(1, prompt, route.Params{MaxTokens: 9}, 2))
	r.stats("one runnable", func(s subserver.Stats) bool { return s.Runnable == 1 && s.Records == 2 })
	r.event(bus.Cancel, 1, bus.Frontend)
	r.stats("runnable request cancelled", func(s subserver.Stats) bool { return s.Runnable == 0 && s.Records == 1 })
	r.event(bus.Finish, 2, 1)
	r.idle()
	if len(r.steps) != 0 {
		t.Fatalf("a step ran: %+v", <-r.steps)
	}
	// Parked requests: their KV is freed.
	r.srv.SetPolicy(sched.Policy{})
	for id, k := range map[uint64]bus.Kind{3: bus.Cancel, 4: bus.Finish} {
		r.handOff(id, route.Params{MaxTokens: 9})
		r.event(k, id, 1)
		r.idle()
	}
}

// TestIgnoredEvents: messages for requests that are gone or were never
// admitted, events meant for the front end, and repeated admits change
// nothing.
func TestIgnoredEvents(t *testing.T) {
	r := start(t, opts{})
	// A finished request whose finish broadcast has not come back yet.
	r.bus.setHold(true)
	r.submit(1, prompt, route.Params{MaxTokens: 1})
	if res := r.result(1); res.reason != "length" {
		t.Fatalf("request 1 ended %q", res.reason)
	}
	r.step()
	r.stats("finished, not freed", func(s subserver.Stats) bool { return s.Records == 1 })
	stale := entry(1, prompt, route.Params{MaxTokens: 5}, 2)
	stale.From = 1
	r.message(1, stale) // for the finished request
	stale.ID = 99
	r.message(1, stale) // for a request never admitted
	r.event(bus.Commit, 1, 1)
	r.event(bus.Done, 1, 1)
	r.admit(2)
	r.admit(2)
	r.stats("admitted once", func(s subserver.Stats) bool { return s.Records == 2 })
	r.bus.setHold(false)
	r.message(bus.Frontend, entry(2, prompt, route.Params{MaxTokens: 1}, 2))
	if res := r.result(2); res.reason != "length" {
		t.Fatalf("request 2 ended %q", res.reason)
	}
	if s := r.step(); s[0].seq != 2 {
		t.Fatalf("stepped seq %d, want only request 2", s[0].seq)
	}
	r.idle()
	// An entry message that overtook its admit starts the request.
	r.message(bus.Frontend, entry(3, prompt, route.Params{MaxTokens: 2}, 2))
	if res := r.result(3); len(res.tokens) != 2 {
		t.Fatalf("request without admit: %+v", res)
	}
}

// TestSenderHoldingNothing: an algorithm whose Send says the sender holds
// none of the sequence (the std-serving baseline's wrapper) gets the whole
// sequence back, and the sender cuts its kept KV and extends all of it.
func TestSenderHoldingNothing(t *testing.T) {
	alg := &hooked{script: toPeerAfter(2)}
	alg.send = func(_ *route.Request, m *route.Message) { m.Seen[m.From] = 0 }
	r := start(t, opts{alg: alg})
	m := r.handOff(1, route.Params{MaxTokens: 4})
	if m.Seen[0] != 0 {
		t.Fatalf("hand-off says model 0 holds %d tokens", m.Seen[0])
	}
	r.message(1, back(m, true, 40))
	r.step()
	r.step()
	if s := r.step(); len(s[0].held) != 0 || len(s[0].tokens) != 6 {
		t.Fatalf("returning request held %v appended %v, want its whole sequence of 6", s[0].held, s[0].tokens)
	}
}

// TestAlgorithmHooks: Want reaches the engine, Route sees the optional
// outputs, Send and Receive shape the messages, and algorithm states bind
// to a bus that decodes them.
func TestAlgorithmHooks(t *testing.T) {
	sawLogits := make(chan int, 64)
	alg := &hooked{want: engine.WantLogits | engine.WantHidden}
	alg.script = func(s *route.Step, d []route.Decision) {
		for i := range s.Outputs {
			sawLogits <- len(s.Outputs[i].Logits) + len(s.Outputs[i].Hidden)
		}
		toPeerAfter(2)(s, d)
	}
	alg.send = func(_ *route.Request, m *route.Message) { m.State = &route.Ints{42} }
	alg.receive = func(_ *route.Request, m *route.Message) {
		if m.From != 1 {
			return // the entry message
		}
		// Re-anchor one token earlier, resending that token.
		m.Anchor--
		m.Tokens = append([]int32{13}, m.Tokens...)
		m.By = append([]int8{0}, m.By...)
	}
	r := start(t, opts{alg: alg})
	if r.bus.boundTo(0) != alg {
		t.Fatal("the algorithm's states were not bound to the bus")
	}
	m := r.handOff(1, route.Params{MaxTokens: 4})
	if st, ok := m.State.(*route.Ints); !ok || !slices.Equal(*st, route.Ints{42}) {
		t.Fatalf("message state %#v, want the Send hook's", m.State)
	}
	if n := <-sawLogits; n != 64+8 {
		t.Fatalf("Route saw %d logits and hidden values, want 64+8", n)
	}
	if s := r.step(); s[0].want != alg.want {
		t.Fatalf("engine asked for %b, want %b", s[0].want, alg.want)
	}
	r.message(1, back(m, true, 40))
	if tr := r.truncated(); tr != (trunc{1, 3}) {
		t.Fatalf("truncate %+v, want seq 1 to 3 (the re-anchored position)", tr)
	}
	r.step()
	if s := r.step(); !slices.Equal(s[0].held, prompt) || !slices.Equal(s[0].tokens, []int32{13, 14, 40}) {
		t.Fatalf("resumed step held %v appended %v", s[0].held, s[0].tokens)
	}
	if plain := start(t, opts{}); plain.bus.boundTo(0) != nil {
		t.Fatal("an algorithm without states was bound")
	}
}

// observer records what a sub-server reports.
type observer struct {
	mu     sync.Mutex
	steps  [][3]int // model, batch, appended
	times  []time.Duration
	routed [][]int
}

func (o *observer) Step(model, batch, appended int, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.steps = append(o.steps, [3]int{model, batch, appended})
	o.times = append(o.times, d)
}

func (o *observer) Routed(model int, moved []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.routed = append(o.routed, append([]int{model}, moved...))
}

func TestObserverSeesStepsAndRoutes(t *testing.T) {
	obs := &observer{}
	r := start(t, opts{alg: toPeerAfter(2), observer: obs})
	r.handOff(1, route.Params{MaxTokens: 5})
	r.submit(2, prompt, route.Params{MaxTokens: 1})
	if res := r.result(2); res.reason != "length" {
		t.Fatalf("request 2: %+v", res)
	}
	testkit.Eventually(t, wait, func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return len(obs.routed) == 3
	}, "three steps routed")
	obs.mu.Lock()
	defer obs.mu.Unlock()
	// Request 1: extend of 3 (stays), decode (moves to 1); request 2:
	// extend of 3 (finishes: not counted as routed).
	if w := [][3]int{{0, 1, 3}, {0, 1, 1}, {0, 1, 3}}; !reflect.DeepEqual(obs.steps, w) {
		t.Fatalf("steps %v, want %v", obs.steps, w)
	}
	if w := [][]int{{0, 1, 0}, {0, 0, 1}, {0, 0, 0}}; !reflect.DeepEqual(obs.routed, w) {
		t.Fatalf("routed %v, want %v", obs.routed, w)
	}
	if st := r.srv.Stats(); st.Stepped != 3 || st.HandedOff != 1 {
		t.Fatalf("stats %+v, want 3 requests stepped, 1 handed off", st)
	}
}

// TestDelayedBatching: below the threshold a request waits for company,
// or for the max-wait guard; a new policy applies from the next decision.
func TestDelayedBatching(t *testing.T) {
	r := start(t, opts{policy: sched.Policy{B: sched.Static(2)}})
	r.admit(1)
	r.admit(2)
	r.message(bus.Frontend, entry(1, prompt, route.Params{MaxTokens: 1}, 2))
	r.stats("waiting", func(s subserver.Stats) bool { return s.Runnable == 1 })
	r.message(bus.Frontend, entry(2, prompt, route.Params{MaxTokens: 1}, 2))
	if s := r.step(); len(s) != 2 {
		t.Fatalf("first step ran %d requests, want both", len(s))
	}
	r.idle()

	const maxWait = 40 * time.Millisecond
	r.srv.SetPolicy(sched.Policy{B: sched.Static(2), MaxWait: maxWait})
	if p := r.srv.Policy(); p.MaxWait != maxWait {
		t.Fatalf("policy %+v", p)
	}
	r.admit(3)
	r.admit(4)
	sent := time.Now()
	r.message(bus.Frontend, entry(3, prompt, route.Params{MaxTokens: 1}, 2))
	if s := r.step(); len(s) != 1 || time.Since(sent) < maxWait {
		t.Fatalf("step of %d after %v, want 1 request after the max wait %v", len(s), time.Since(sent), maxWait)
	}
	r.result(3)

	// A lower threshold takes effect at the next event.
	r.srv.SetPolicy(sched.Policy{B: sched.Static(3)})
	r.admit(5)
	r.message(bus.Frontend, entry(4, prompt, route.Params{MaxTokens: 1}, 2))
	r.stats("waiting for 3", func(s subserver.Stats) bool { return s.Runnable == 1 })
	r.srv.SetPolicy(sched.Policy{})
	r.admit(6)
	if s := r.step(); len(s) != 1 || s[0].seq != 4 {
		t.Fatalf("step %+v, want request 4 alone", s)
	}
}

// TestMaxBatchBoundsAStep: no step runs more than MaxBatch requests; the
// rest go in the next.
func TestMaxBatchBoundsAStep(t *testing.T) {
	r := start(t, opts{maxBatch: 2, policy: sched.Policy{B: sched.Static(3)}})
	for id := uint64(1); id <= 3; id++ {
		r.admit(id)
	}
	for id := uint64(1); id <= 3; id++ {
		r.message(bus.Frontend, entry(id, prompt, route.Params{MaxTokens: 2}, 2))
	}
	first, second := r.step(), r.step()
	if len(first) != 2 || first[0].seq != 1 || first[1].seq != 2 || len(second) != 2 || second[0].seq != 3 {
		t.Fatalf("steps %+v then %+v, want requests 1 and 2, then 3 first", first, second)
	}
	if st := r.srv.Stats(); st.LastBatch > 2 {
		t.Fatalf("last batch %d", st.LastBatch)
	}
}

// turns is an engine.Turner whose turns the test grants.
type turns struct {
	*enginetest.Fake
	waiting chan struct{} // a Turn started waiting
	grant   chan struct{} // the test grants the turn
	ended   chan struct{} // a turn ended
}

func (t *turns) Turn(ctx context.Context) (func(), error) {
	t.waiting <- struct{}{}
	select {
	case <-t.grant:
		return func() { t.ended <- struct{}{} }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestTurnFormsTheBatchWhenItComes: an engine that takes turns is stepped
// inside its turn, with what arrived during the wait in the batch, and
// observers see the step's time without the wait.
func TestTurnFormsTheBatchWhenItComes(t *testing.T) {
	tu := &turns{waiting: make(chan struct{}, 1), grant: make(chan struct{}), ended: make(chan struct{}, 4)}
	obs := &observer{}
	r := start(t, opts{observer: obs, wrap: func(f *enginetest.Fake) engine.Engine { tu.Fake = f; return tu }})
	r.admit(1)
	r.admit(2)
	r.message(bus.Frontend, entry(1, prompt, route.Params{MaxTokens: 1}, 2))
	testkit.Receive(t, tu.waiting, wait)
	// The in-memory bus delivers into the inbox before Send returns.
	r.message(bus.Frontend, entry(2, prompt, route.Params{MaxTokens: 1}, 2))
	select {
	case <-tu.ended:
		t.Fatal("a turn ended before it was granted")
	default:
	}
	// The turn comes no sooner than held after the wait began.
	const held = 20 * time.Millisecond
	time.Sleep(held)
	tu.grant <- struct{}{}
	if s := r.step(); len(s) != 2 {
		t.Fatalf("the turn's step ran %d requests, want both", len(s))
	}
	testkit.Receive(t, tu.ended, wait)
	r.result(1)
	r.result(2)
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.times) != 1 || obs.times[0] >= held {
		t.Fatalf("observed step times %v, want one step without the %v wait for the turn", obs.times, held)
	}
}
