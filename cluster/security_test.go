package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	gonats "github.com/nats-io/nats.go"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
)

// TestForgedHeartbeats runs live streams on a deployment whose NATS
// server the attacker can use (it holds the server's credentials, not the
// deployment's key, as another tenant of a shared cluster would) and
// attacks the liveness protocol: heartbeats of a new incarnation of a
// model and of the front end (incarnation + 1, as seen on the wire),
// genuine heartbeats replayed, and a corrupt copy of a genuine one. It
// also replays the streams' own events (admits, hand-offs, commits) as
// captured. None has any effect: every stream completes with every token
// once, and no model goes down.
func TestForgedHeartbeats(t *testing.T) {
	ns, err := busnats.StartServer(busnats.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	const hb = 100 * time.Millisecond
	l, out := startWith(t, "zero", hb, "0.35", func(c *cluster.LocalConfig) { c.NATS, c.NATSAuth = ns.URL(), ns.ClientAuth() })
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	before := waitMembers(t, l, 5*time.Second, func(m []cluster.Member) bool { return m[0].Up && m[1].Up })

	// The attacker listens to every heartbeat on the server.
	auth := ns.ClientAuth()
	raw, err := gonats.Connect(ns.URL(), gonats.UserInfo(auth.User, auth.Password))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	spy, err := raw.SubscribeSync("*.*.hb.>")
	if err != nil {
		t.Fatal(err)
	}
	// And to every event.
	events := make(chan *gonats.Msg, 1<<16)
	for _, subject := range []string{"*.*.ep.>", "*.*.all"} {
		if _, err := raw.ChanSubscribe(subject, events); err != nil {
			t.Fatal(err)
		}
	}
	captured := map[string]*gonats.Msg{}
	testkit.Until(t, 5*time.Second, func() error {
		m, err := spy.NextMsg(time.Second)
		if err != nil {
			return err
		}
		captured[m.Subject[strings.LastIndex(m.Subject, ".")+1:]] = m
		if len(captured) < 3 {
			return fmt.Errorf("captured heartbeats %v", keys(captured))
		}
		return nil
	})

	// Live streams.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const streams, tokens = 16, 400
	var wg sync.WaitGroup
	errs := make([]error, streams)
	started := make(chan struct{}, streams)
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := l.Submit(ctx, []int32{1, int32(i + 2)}, route.Params{MaxTokens: tokens, Seed: uint64(i)})
			if err != nil {
				errs[i] = err
				return
			}
			var first stream.Chunk
			if err := s.Recv(ctx, &first); err != nil || len(first.Tokens) == 0 {
				errs[i] = fmt.Errorf("no first token: %w", err)
				started <- struct{}{}
				return
			}
			started <- struct{}{}
			res, err := s.Wait(ctx)
			if n := len(first.Tokens) + len(res.Tokens); err == nil && n != tokens {
				err = fmt.Errorf("%d tokens, want %d", n, tokens)
			}
			errs[i] = err
		}()
	}
	for range streams {
		testkit.Receive(t, started, 20*time.Second)
	}

	// The attacks, while the streams run: the events so far, replayed
	// twice, then forged and replayed heartbeats.
	var seen []*gonats.Msg
	for len(events) > 0 {
		seen = append(seen, <-events)
	}
	if len(seen) < streams {
		t.Fatalf("captured %d events", len(seen))
	}
	for range 2 {
		for _, m := range seen {
			if err := raw.Publish(m.Subject, m.Data); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, idx := range []string{"0", "1", "front"} {
		m := captured[idx]
		payload := m.Data[:len(m.Data)-busnats.TagSize]
		var b map[string]any
		if err := json.Unmarshal(payload, &b); err != nil {
			t.Fatalf("heartbeat %s: %v", idx, err)
		}
		inc := uint64(b["incarnation"].(float64)) // JSON numbers: what a naive attacker would decode
		b["incarnation"], b["seq"] = inc+1, 1
		forged, _ := json.Marshal(b)
		corrupt := append([]byte(nil), m.Data...)
		corrupt[len(corrupt)/2] ^= 1
		for _, data := range [][]byte{forged, append(forged, m.Data[len(m.Data)-busnats.TagSize:]...), m.Data, corrupt} {
			if err := raw.Publish(m.Subject, data); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("stream %d: %v", i, err)
		}
	}
	after := l.Front().Members()
	for i := range after {
		if !after[i].Up || after[i].Restarts != 0 || after[i].Last.Incarnation != before[i].Last.Incarnation {
			t.Errorf("model %d: up %v, restarts %d, incarnation %x (was %x)", i, after[i].Up, after[i].Restarts,
				after[i].Last.Incarnation, before[i].Last.Incarnation)
		}
	}
	if t.Failed() {
		t.Logf("children:\n%s", out)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
