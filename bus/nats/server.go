package nats

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerOptions configure an embedded NATS server.
type ServerOptions struct {
	// Host is the listen address: a loopback address (default
	// 127.0.0.1); any other is refused.
	Host string
	// Port is the client port (0: a random free port).
	Port int
	// Log sends the server's log to stderr; off by default.
	Log bool
	// MaxPayload bounds a message in bytes (default 8 MiB, enough for a
	// long prompt's first hand-off).
	MaxPayload int32
}

// Server is an embedded NATS server owned by its creator. It listens on
// loopback only and accepts only clients that present the credentials
// generated when it started (ClientAuth); it runs no monitoring, cluster,
// gateway or leaf-node listener.
type Server struct {
	s    *server.Server
	auth Auth
}

// StartServer starts an embedded NATS server with fresh random
// credentials and waits until it accepts connections.
func StartServer(o ServerOptions) (*Server, error) {
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if ip := net.ParseIP(o.Host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("bus/nats: embedded server on %q: only a loopback address is allowed", o.Host)
	}
	if o.Port == 0 {
		o.Port = server.RANDOM_PORT
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = 8 << 20
	}
	auth := Auth{User: "tokenrouter", Password: NewSecret()}
	s, err := server.NewServer(&server.Options{
		Host: o.Host, Port: o.Port, NoLog: !o.Log, NoSigs: true, MaxPayload: o.MaxPayload,
		MaxPending: 256 << 20, ServerName: "tokenrouter",
		Username: auth.User, Password: auth.Password, AuthTimeout: 2,
	})
	if err != nil {
		return nil, fmt.Errorf("bus/nats: embedded server: %w", err)
	}
	if o.Log {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, errors.New("bus/nats: embedded server did not start within 10s")
	}
	return &Server{s: s, auth: auth}, nil
}

// ClientAuth returns the credentials clients must present. They are
// secrets: hand them to child processes through a pipe or the
// environment, never on a command line or in a log.
func (s *Server) ClientAuth() Auth { return s.auth }

// URL is the client URL (nats://127.0.0.1:PORT).
func (s *Server) URL() string { return s.s.ClientURL() }

// Close shuts the server down and waits until it has stopped.
func (s *Server) Close() {
	s.s.Shutdown()
	s.s.WaitForShutdown()
}
