package termchat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/server"
)

// startLocal is serveLocal for o.Local, given up on an interrupt.
func startLocal(ctx context.Context, o Options, key string) (base string, stop func() error, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopWatch := watchWith(func(quit <-chan struct{}) {
		select {
		case <-o.Interrupts:
			cancel()
		case <-quit:
		}
	})
	base, stop, err = serveLocal(sctx, *o.Local, key, o.Logger)
	stopWatch()
	if sctx.Err() != nil && ctx.Err() == nil { // interrupted
		if err == nil {
			_ = stop()
		}
		return "", nil, errors.New("termchat: interrupted while starting the models")
	}
	return base, stop, err
}

// serveLocal starts the deployment cfg describes and serves it on a free
// loopback port, requiring key. It returns the server's base URL and stop,
// which shuts the server down and closes it.
func serveLocal(ctx context.Context, cfg config.Config, key string, log *slog.Logger) (base string, stop func() error, err error) {
	cfg.Host, cfg.Port, cfg.APIKey = "127.0.0.1", 0, key
	srv, err := server.New(ctx, cfg, server.Options{Logger: log})
	if err != nil {
		return "", nil, fmt.Errorf("termchat: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, errors.Join(fmt.Errorf("termchat: %w", err), srv.Close())
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	stop = func() error {
		cancel()
		return errors.Join(<-served, srv.Close())
	}
	return "http://" + ln.Addr().String(), stop, nil
}
