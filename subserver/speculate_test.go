package subserver_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/subserver"
)

func TestAutoDepth(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		agree      float64
		step, trip time.Duration
		want       int
	}{
		{0, 6 * ms, 60 * ms, 0},                         // never agrees: no speculation
		{subserver.MinAgree - 0.01, 6 * ms, 60 * ms, 0}, // below the threshold
		{subserver.MinAgree, 6 * ms, 60 * ms, 10},       // at it: the steps in one round trip
		{0.5, 6 * ms, 61 * ms, 11},                      // rounded up
		{0.9, 6 * ms, 3 * ms, 1},                        // at least one token
		{0.9, ms, time.Second, subserver.MaxDepth},      // at most MaxDepth
		{0.9, 0, 10 * ms, subserver.MaxDepth},           // no step time measured yet
	} {
		if got := subserver.AutoDepth(c.agree, c.step, c.trip); got != c.want {
			t.Errorf("AutoDepth(%g, %v, %v) = %d, want %d", c.agree, c.step, c.trip, got, c.want)
		}
	}
}

// specAt routes the token sampled at position pos to model 1, R2R-style,
// and opts into speculation.
type specAt struct {
	pos int
}

func (a specAt) Route(s *route.Step, d []route.Decision) {
	for i, r := range s.Requests {
		if s.Model == 0 && len(r.Tokens) == a.pos {
			d[i].Next, d[i].Token = 1, route.NoToken
		}
	}
}

func (specAt) Speculable(from, to int) bool { return from == 0 && to == 1 }

// counted is specAt with per-request state: the number of model 0 steps
// the request took, recorded by position (the last value seen).
type counted struct {
	specAt
	mu   sync.Mutex
	seen map[int]int64
}

func (a *counted) NewState(*route.Request) route.State { return &route.Ints{0} }

func (a *counted) Route(s *route.Step, d []route.Decision) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range s.Requests {
		st := r.State.(*route.Ints)
		(*st)[0]++
		a.seen[len(r.Tokens)] = (*st)[0]
	}
	a.specAt.Route(s, d)
}

// specRig starts model 0 with alg (specAt{5} when nil) and depth 3,
// submits request 9 (prompt of 3, 9 output tokens) and returns the verify
// job for position 5 once model 0 is parked at its bound.
func specRig(t *testing.T, alg route.Algorithm) (*rig, *bus.Event) {
	if alg == nil {
		alg = specAt{5}
	}
	r := start(t, opts{alg: alg})
	m := entry(9, prompt, route.Params{MaxTokens: 9, Speculate: 3}, 2)
	if st, ok := alg.(route.Stater); ok {
		m.State = st.NewState(nil)
	}
	r.admit(9)
	r.message(bus.Frontend, m)
	job := r.peer.next(t, bus.Peer)
	m = job.Msg
	if !slices.Equal(m.Verify, []int32{5}) || m.Anchor != 0 || !slices.Equal(m.Tokens, append(slices.Clone(prompt), 13, 14)) || m.Epoch != 0 {
		t.Fatalf("verify job %+v", m)
	}
	// Positions 6, 7, 8 are drafted past 5, then the request parks with
	// only the tokens before 5 committed.
	r.stats("parked", func(s subserver.Stats) bool { return s.Pending == 1 && s.Speculated == 4 && s.Tokens == 2 })
	for range 6 { // the steps that sampled positions 3 to 8
		r.step()
	}
	return r, job
}

// verdict is model 1's answer to job.
func verdict(job *bus.Event, toks ...int32) route.Message {
	return route.Message{ID: job.ID, From: 1, To: 0, Verify: job.Msg.Verify, Verdict: toks, Epoch: job.Msg.Epoch}
}

// TestSpeculationKeepsAgreedDrafts: while position 5 is verified the
// request drafts up to the depth bound and commits nothing past 5; the
// agreeing verdict commits every draft, attributes 5 to model 1, and the
// request goes on to its limit.
func TestSpeculationKeepsAgreedDrafts(t *testing.T) {
	r, job := specRig(t, nil)
	r.message(1, verdict(job, 15))
	res := r.result(9)
	if w := outputs(len(prompt), 9); !slices.Equal(res.tokens, w) || !slices.Equal(res.by, []int8{0, 0, 1, 0, 0, 0, 0, 0, 0}) || res.reason != "length" {
		t.Fatalf("after the verdict: %v by %v (%s), want %v", res.tokens, res.by, res.reason, w)
	}
	st := r.stats("kept", func(s subserver.Stats) bool { return s.Verified == 1 })
	if st.Agreed != 1 || st.Kept != 4 || st.RolledBack != 0 || st.Tokens != 9 || st.SmallTokens != 8 {
		t.Fatalf("stats %+v", st)
	}
	r.idle()
}

// TestSpeculationRollsBack: a disagreeing verdict truncates the KV to the
// position, commits the peer's token there and goes on from it; a verdict
// of the old round is ignored; the next verify job anchors at the
// position and starts a new round.
func TestSpeculationRollsBack(t *testing.T) {
	r, job := specRig(t, nil)
	r.message(1, verdict(job, 40))
	if tr := r.truncated(); tr.n != 5 {
		t.Fatalf("truncated to %d, want 5", tr.n)
	}
	r.message(1, verdict(job, 15)) // stale: ignored
	res := r.result(9)
	// 13 14, then 40 at position 5, then the count model after 6.. 10 tokens.
	want := []int32{13, 14, 40, 16, 17, 18, 19, 20, 21}
	if !slices.Equal(res.tokens, want) || res.by[2] != 1 || res.reason != "length" {
		t.Fatalf("after the rollback: %v by %v (%s %s), want %v", res.tokens, res.by, res.reason, res.err, want)
	}
	st := r.stats("rolled back", func(s subserver.Stats) bool { return s.Verified == 1 })
	if st.Agreed != 0 || st.Kept != 0 || st.RolledBack != 4 || st.Speculated != 4 {
		t.Fatalf("stats %+v", st)
	}
	if s := r.step(); !slices.Equal(s[0].tokens, []int32{40}) || len(s[0].held) != 5 {
		t.Fatalf("step after the rollback held %v appended %v, want 5 tokens then [40]", s[0].held, s[0].tokens)
	}
	r.idle()
}

// TestSpeculationRestoresState: after a rollback the algorithm's state is
// the one it had at the position: every position sees the number of steps
// that led to it, as without speculation.
func TestSpeculationRestoresState(t *testing.T) {
	alg := &counted{specAt: specAt{5}, seen: map[int]int64{}}
	r, job := specRig(t, alg)
	r.message(1, verdict(job, 40))
	if res := r.result(9); len(res.tokens) != 9 {
		t.Fatalf("output %v", res.tokens)
	}
	alg.mu.Lock()
	defer alg.mu.Unlock()
	for p := 3; p < 12; p++ {
		if alg.seen[p] != int64(p-2) {
			t.Errorf("position %d saw state %d, want %d (steps %v)", p, alg.seen[p], p-2, alg.seen)
		}
	}
	r.idle()
}

// TestSpeculationCancelled: a request cancelled while its position is
// being verified is freed at once; the late verdict changes nothing.
func TestSpeculationCancelled(t *testing.T) {
	r, job := specRig(t, nil)
	r.event(bus.Cancel, 9, bus.Frontend)
	r.idle()
	r.message(1, verdict(job, 15))
	if st := r.stats("rolled back", func(s subserver.Stats) bool { return s.RolledBack == 4 }); st.Verified != 0 {
		t.Fatalf("late verdict counted: %+v", st)
	}
	r.idle()
}

// TestVerifyJobs: as the verifier, jobs still queued for a request merge
// into one extend that asks for every appended position's token; the
// verdict lists the peer's token at each position; a cancel frees a
// queued job; a job built on a token the verifier refused is dropped.
func TestVerifyJobs(t *testing.T) {
	gate := make(chan struct{})
	r := start(t, opts{onStep: func(ctx context.Context, in []engine.Input) error {
		if in[0].Seq == 1 {
			<-gate // hold the step of request 1 while jobs for 2 and 3 queue
		}
		return nil
	}})
	r.submit(1, prompt, route.Params{MaxTokens: 1})
	r.step()
	for _, id := range []uint64{2, 3} {
		r.admit(id)
	}
	seq := []int32{1, 2, 3, 4, 5, 6, 7}
	job := func(id uint64, anchor, pos int) route.Message {
		return route.Message{ID: id, From: 1, To: 0, Anchor: anchor, Tokens: seq[anchor:pos], By: make([]int8, pos-anchor),
			PromptLen: 3, Committed: 3, Seen: []int{0, 0}, Verify: []int32{int32(pos)}, Epoch: 2}
	}
	r.message(1, job(2, 0, 4))
	r.message(1, job(2, 4, 6)) // joins the queued job
	r.message(1, job(3, 0, 5))
	r.event(bus.Cancel, 3, bus.Frontend)
	close(gate)
	s := r.step()
	if len(s) != 1 || s[0].seq != 2 || !slices.Equal(s[0].tokens, seq[:6]) || s[0].want&engine.WantAllTokens == 0 {
		t.Fatalf("verify step %+v, want request 2 appending %v for every token", s, seq[:6])
	}
	v := r.peer.next(t, bus.Peer).Msg
	if !slices.Equal(v.Verify, []int32{4, 6}) || !slices.Equal(v.Verdict, []int32{count(seq[:4]), count(seq[:6])}) || v.Epoch != 2 || v.ID != 2 {
		t.Fatalf("verdict %+v", v)
	}
	// A job of the same round built on the token refused at 6 is dropped;
	// the next round's job runs.
	r.message(1, job(2, 6, 7))
	r.submit(5, prompt, route.Params{MaxTokens: 1})
	if s := r.step(); len(s) != 1 || s[0].seq != 5 {
		t.Fatalf("step %+v, want request 5 alone (the job built on a refused token dropped)", s)
	}
	fresh := route.Message{ID: 2, From: 1, To: 0, Anchor: 4, Tokens: []int32{20, 21}, By: []int8{0, 0},
		PromptLen: 3, Committed: 3, Seen: []int{0, 0}, Verify: []int32{6}, Epoch: 3}
	r.message(1, fresh)
	if s := r.step(); len(s) != 1 || !slices.Equal(s[0].tokens, []int32{20, 21}) || len(s[0].held) != 4 {
		t.Fatalf("step after a refused token %+v, want the new round's job (4 held, [20 21] appended)", s)
	}
	if v := r.peer.next(t, bus.Peer).Msg; v.Epoch != 3 || !slices.Equal(v.Verify, []int32{6}) {
		t.Fatalf("verdict %+v, want the new round's", v)
	}
	r.event(bus.Cancel, 2, bus.Frontend)
	r.idle()
}
