package nats_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	gonats "github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/tokenrouter/tokenrouter/bus"
	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/internal/testkit"
	"github.com/tokenrouter/tokenrouter/route"
)

// TestServerRequiresCredentials: the embedded server refuses clients
// without its per-run credentials (so they can neither subscribe nor
// publish), two servers have different credentials, and it listens on
// loopback only.
func TestServerRequiresCredentials(t *testing.T) {
	srv := startServer(t)
	auth := srv.ClientAuth()
	if auth.User == "" || len(auth.Password) < 32 {
		t.Fatalf("weak credentials %q/%d bytes", auth.User, len(auth.Password))
	}
	for name, opts := range map[string][]gonats.Option{
		"no credentials": nil,
		"wrong password": {gonats.UserInfo(auth.User, auth.Password+"x")},
		"token":          {gonats.Token(auth.Password)},
	} {
		nc, err := gonats.Connect(srv.URL(), append(opts, gonats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", name)
		} else if !errors.Is(err, gonats.ErrAuthorization) {
			t.Errorf("%s: %v, want an authorization violation", name, err)
		}
	}
	if _, err := busnats.Connect(srv.URL(), busnats.Options{Prefix: "x"}); !errors.Is(err, gonats.ErrAuthorization) {
		t.Errorf("bus without credentials: %v", err)
	}
	other := startServer(t)
	if other.ClientAuth() == auth {
		t.Error("two servers share credentials")
	}
	for _, host := range []string{"0.0.0.0", "192.0.2.1", "example.com"} {
		if s, err := busnats.StartServer(busnats.ServerOptions{Host: host}); err == nil {
			s.Close()
			t.Errorf("embedded server started on %s", host)
		}
	}
}

// TestKeyedBus: with a message key, events between holders of the key
// flow; a client of the same server without the key cannot inject an
// event (unsigned, signed with another key, or a genuine message moved to
// another subject); raw Publish/Subscribe are authenticated the same way.
func TestKeyedBus(t *testing.T) {
	srv := startServer(t)
	key := busnats.NewKey()
	errs := make(chan error, 16)
	keyed := func(k []byte) *busnats.Bus {
		b, err := busnats.Connect(srv.URL(), busnats.Options{Prefix: "k", Auth: srv.ClientAuth(), Key: k,
			OnError: func(err error) { errs <- err }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	a, b := keyed(key), keyed(key)
	if _, err := busnats.Connect(srv.URL(), busnats.Options{Auth: srv.ClientAuth(), Key: []byte("short")}); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
	got := [2]chan *bus.Event{make(chan *bus.Event, 16), make(chan *bus.Event, 16)}
	for i := range 2 {
		if err := b.Attach(i, func(e *bus.Event) { got[i] <- e }); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	send := func(from *busnats.Bus, id uint64) {
		e := from.Get()
		e.Kind, e.ID, e.From = bus.Peer, id, bus.Frontend
		e.Msg = route.Message{ID: id, From: -1, Tokens: []int32{1, 2}, By: []int8{-1, -1}, Seen: []int{0, 0}}
		if err := from.Send(ctx, 0, e); err != nil {
			t.Fatal(err)
		}
	}
	send(a, 1)
	if e := recv(t, got[0]); e.ID != 1 || e.Kind != bus.Peer {
		t.Fatalf("got %+v", e)
	}

	// A raw client with the server's credentials but not the key: it
	// sees the genuine message on model 0's subject and replays it on
	// model 1's, and it publishes an unsigned event.
	raw, err := gonats.Connect(srv.URL(), gonats.UserInfo(srv.ClientAuth().User, srv.ClientAuth().Password))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	spy, err := raw.SubscribeSync("k.ep.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Flush(); err != nil {
		t.Fatal(err)
	}
	send(a, 2)
	recv(t, got[0])
	genuine, err := spy.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Publish("k.ep.1", genuine.Data); err != nil {
		t.Fatal(err)
	}
	unsigned, _ := busnats.AppendEvent(nil, busnats.Origin{Sender: 1, Seq: 1, Time: time.Now().UnixMilli()},
		&bus.Event{Kind: bus.Cancel, ID: 2, From: bus.Frontend})
	if err := raw.Publish("k.all", unsigned); err != nil {
		t.Fatal(err)
	}
	// Another key: a bus of another deployment on the same server.
	c := keyed(busnats.NewKey())
	send(c, 3)
	for range 3 {
		if err := testkit.Receive(t, errs, 5*time.Second); !errors.Is(err, busnats.ErrAuth) {
			t.Fatalf("reported %v, want ErrAuth", err)
		}
	}
	testkit.Quiet(t, got[0], 50*time.Millisecond)
	testkit.Quiet(t, got[1], 0)

	// Heartbeat-style raw messages.
	beats := make(chan string, 4)
	sub, err := b.Subscribe("k.hb.*", func(subject string, p []byte) { beats <- subject + " " + string(p) })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := b.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if err := raw.Publish("k.hb.1", []byte(`{"v":2,"index":1,"incarnation":2}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Publish("k.hb.0", []byte("beat")); err != nil {
		t.Fatal(err)
	}
	if s := testkit.Receive(t, beats, 5*time.Second); s != "k.hb.0 beat" {
		t.Fatalf("got %q", s)
	}
	if err := testkit.Receive(t, errs, 5*time.Second); !errors.Is(err, busnats.ErrAuth) {
		t.Fatalf("reported %v, want ErrAuth", err)
	}
	testkit.Quiet(t, beats, 50*time.Millisecond)
}

// TestNkeyAuth connects with an nkey seed file to a server that knows
// only the public key, as on a cluster configured with nkeys.
func TestNkeyAuth(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	ns := startPlainServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	if _, err := busnats.Connect(ns.ClientURL(), busnats.Options{}); err == nil {
		t.Fatal("connected without the nkey")
	}
	b, err := busnats.Connect(ns.ClientURL(), busnats.Options{Auth: busnats.Auth{NkeyFile: seedFile}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := busnats.Connect(ns.ClientURL(), busnats.Options{Auth: busnats.Auth{NkeyFile: seedFile, Token: "x"}}); err == nil {
		t.Fatal("two authentication methods were accepted")
	}
}

// startPlainServer runs a nats-server on a free loopback port with opts (host,
// port and quiet settings filled in) until the test ends.
func startPlainServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", server.RANDOM_PORT, true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server did not start")
	}
	return ns
}
