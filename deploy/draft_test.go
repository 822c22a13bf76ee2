package deploy_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tokenrouter/tokenrouter/baseline/lockstep"
	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/deploy/routetest"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/route"
)

// draft is a minimal draft-and-verify algorithm used to exercise the
// runtime's drafts (kept, uncommitted tokens), Cut, per-request state,
// WantAllTokens and the Sender hook. Model 0 drafts k tokens, model 1
// verifies them in one extend, keeps the longest matching prefix plus one
// token of its own and hands back.
type draft struct {
	k     int
	sends *int
}

func (a *draft) NewState(*route.Request) route.State { return &route.Ints{0} }

func (a *draft) Want(model int, _ *route.Request) engine.Want {
	if model == 1 {
		return engine.WantAllTokens
	}
	return 0
}

func (a *draft) Send(r *route.Request, m *route.Message) {
	*a.sends++
	if m.State != r.State {
		panic("state not carried")
	}
}

func (a *draft) Route(s *route.Step, d []route.Decision) {
	for i, r := range s.Requests {
		st := r.State.(*route.Ints)
		if s.Model == 0 {
			d[i].Commit = false // a draft
			(*st)[0]++
			if int((*st)[0]) == a.k {
				(*st)[0] = 0
				d[i].Next = 1
			}
			continue
		}
		out := s.Outputs[i]
		L, n := len(r.Tokens), r.Tokens[r.Committed:]
		drafts := len(n)
		acc := 0
		for acc < drafts && out.Tokens[r.Appended-drafts-1+acc] == r.Tokens[L-drafts+acc] {
			acc++
		}
		d[i].Cut = L - drafts + acc
		d[i].Token = out.Tokens[r.Appended-drafts-1+acc]
		d[i].Next = 0
	}
}

func draftRegistry(k int, sends *int) *route.Registry {
	reg := route.NewRegistry()
	_ = reg.Register("draft", func(route.Spec) (route.Algorithm, error) { return &draft{k: k, sends: sends}, nil })
	return reg
}

// largeAlone is what model 1 generates alone, greedily.
func largeAlone(t *testing.T, prompt []int32, n int, seed uint64) []int32 {
	e := sim.New(sim.Config{Seed: seed})
	out := make([]engine.Output, 1)
	seq := slices.Clone(prompt)
	var gen []int32
	for k := range n {
		toks := seq // the prompt first, then one token per step
		if k > 0 {
			toks = seq[len(seq)-1:]
		}
		if err := e.Step(context.Background(), []engine.Input{{Seq: 1, Tokens: toks}}, out); err != nil {
			t.Fatal(err)
		}
		gen = append(gen, out[0].Token)
		seq = append(seq, out[0].Token)
	}
	return gen
}

func TestDraftVerifyEqualsLargeModelAlone(t *testing.T) {
	forEachBus(t, testDraftVerifyEqualsLargeModelAlone)
}

func testDraftVerifyEqualsLargeModelAlone(t *testing.T, bc busCase) {
	for _, agree := range []float64{0, 0.7, 1} {
		sends := 0
		ms := []deploy.Model{
			{Name: "draft", Engine: sim.New(sim.Config{Seed: 11, Agree: agree, AgreeSeed: 22})},
			{Name: "target", Engine: sim.New(sim.Config{Seed: 22})},
		}
		r, err := deploy.New(deploy.Config{Models: ms, Algorithm: "draft", Registry: draftRegistry(4, &sends), Bus: bc.bus(t)})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			prompt := []int32{1, int32(50 + i), 9}
			s, err := r.Submit(context.Background(), prompt, route.Params{MaxTokens: 41})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Wait(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want := largeAlone(t, prompt, 41, 22)
			if !slices.Equal(res.Tokens, want) {
				t.Fatalf("agree=%.1f prompt %d:\n got %v\nwant %v", agree, i, res.Tokens, want)
			}
			fromDraft := 0
			for _, b := range res.By {
				if b == 0 {
					fromDraft++
				}
			}
			switch {
			case agree == 0 && fromDraft != 0, agree == 1 && fromDraft < 30, agree == 0.7 && (fromDraft == 0 || fromDraft > 35):
				t.Fatalf("agree=%.1f: %d of 41 tokens attributed to the draft model", agree, fromDraft)
			}
		}
		if sends == 0 {
			t.Fatal("Sender hook never called")
		}
		routetest.WaitIdle(t, r)
		r.Close()
	}
}

// TestLockstepMatchesRouted runs the same algorithm and seeds on the
// lockstep baseline and the routed runtime: the outputs must be equal,
// token for token and owner for owner.
func TestLockstepMatchesRouted(t *testing.T) { forEachBus(t, testLockstepMatchesRouted) }

func testLockstepMatchesRouted(t *testing.T, bc busCase) {
	for _, alg := range []string{"draft", "r2r"} {
		sends := 0
		reg := draftRegistry(3, &sends)
		if alg == "r2r" {
			reg = nil
		}
		mk := func() []engine.Engine {
			return []engine.Engine{sim.New(sim.Config{Seed: 1, Agree: 0.5, AgreeSeed: 2}), sim.New(sim.Config{Seed: 2})}
		}
		var systems []bench.System
		es := mk()
		lcfg := lockstep.Config{Engines: es, Names: []string{"a", "b"}, Algorithm: "draft", Registry: reg}
		rcfg := deploy.Config{Models: []deploy.Model{{Name: "a", Engine: mk()[0]}, {Name: "b", Engine: mk()[1]}}, Algorithm: "draft", Registry: reg}
		if alg == "r2r" {
			rr := newRouter(t, bc, simModels(0, 0), "0.4")
			systems = append(systems, rr)
			lcfg.Algorithm, lcfg.Params, lcfg.Registry = "r2r-random", map[string]string{"p": "0.4"}, builtinRegistry()
			lcfg.Engines = []engine.Engine{sim.New(sim.Config{Seed: 1}), sim.New(sim.Config{Seed: 2})}
		} else {
			rcfg.Bus = bc.bus(t)
			rr, err := deploy.New(rcfg)
			if err != nil {
				t.Fatal(err)
			}
			systems = append(systems, rr)
		}
		ls, err := lockstep.New(lcfg)
		if err != nil {
			t.Fatal(err)
		}
		systems = append(systems, ls)
		var outs [2][][]int32
		var owners [2][][]int8
		for si, sys := range systems {
			for i := range 5 {
				s, err := sys.Submit(context.Background(), []int32{1, int32(i + 10)}, route.Params{MaxTokens: 30, Seed: uint64(i)})
				if err != nil {
					t.Fatal(err)
				}
				res, err := s.Wait(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				outs[si] = append(outs[si], res.Tokens)
				owners[si] = append(owners[si], res.By)
			}
			if err := sys.Close(); err != nil {
				t.Fatal(err)
			}
		}
		for i := range outs[0] {
			if !slices.Equal(outs[0][i], outs[1][i]) || !slices.Equal(owners[0][i], owners[1][i]) {
				t.Fatalf("%s request %d: routed %v/%v, lockstep %v/%v", alg, i, outs[0][i], owners[0][i], outs[1][i], owners[1][i])
			}
		}
	}
}
