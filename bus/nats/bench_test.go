package nats_test

import (
	"context"
	"testing"

	"github.com/tokenrouter/tokenrouter/bus"
	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
)

// BenchmarkSendReceive sends one-token commits from one keyed connection
// to an endpoint on another through an embedded server, at most 1024 in
// flight. Allocations are the whole process's per message: both buses,
// nats.go and the embedded server.
func BenchmarkSendReceive(b *testing.B) {
	srv, err := busnats.StartServer(busnats.ServerOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	key := busnats.NewKey()
	open := func() *busnats.Bus {
		x, err := busnats.Connect(srv.URL(), busnats.Options{Prefix: "bench", Auth: srv.ClientAuth(), Key: key})
		if err != nil {
			b.Fatal(err)
		}
		return x
	}
	tx, rx := open(), open()
	defer tx.Close()
	defer rx.Close()
	credits := make(chan struct{}, 1024)
	if err := rx.Attach(bus.Frontend, func(e *bus.Event) {
		rx.Put(e)
		<-credits
	}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	send := func(i int) {
		credits <- struct{}{}
		e := tx.Get()
		e.Kind, e.ID, e.From, e.Pos = bus.Commit, uint64(i%64+1), 0, i
		e.Tokens, e.By = append(e.Tokens[:0], int32(i)), append(e.By[:0], 0)
		if err := tx.Send(ctx, bus.Frontend, e); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 4096 { // warm the pools and buffers
		send(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		send(i)
	}
	for range cap(credits) { // wait for the last messages
		credits <- struct{}{}
	}
	b.StopTimer()
	if n := tx.Errors() + rx.Errors(); n != 0 {
		b.Fatalf("%d errors", n)
	}
}
