// Package server is TokenRouter's HTTP front end: one endpoint over several
// models with token-level routing per request, compatible with OpenAI's API
// and with a native API that exposes the routing.
//
// Endpoints: POST /v1/completions and POST /v1/chat/completions (streaming
// as server-sent events ending with "data: [DONE]", or not), POST
// /v1/embeddings (presets of one model, embeddings.go), GET /v1/models,
// the native POST /generate (text or input_ids in; output ids, the model
// that produced each token and per-model counts out), GET /health and
// GET /metrics (Prometheus), and the web console at GET / (package
// console; its events stream at GET /console/events). The generation path is written once, for
// /generate; the OpenAI handlers only convert their requests into native
// ones and native results into OpenAI's shapes. Every response carries the
// standard usage and an extension object routing: {tokens_by_model,
// large_model_ratio}.
//
// Each preset of the configuration (a name clients put in "model") is a
// router over its own engines. Errors are answered in OpenAI's shape
// {"error":{"message","type","param","code"}}. A client that disconnects
// cancels its request in every sub-server; Serve shuts down gracefully when
// its context ends.
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/internal/faults"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/subserver"
	"github.com/tokenrouter/tokenrouter/system"
)

// Options configure a Server beyond its configuration.
type Options struct {
	// Logger receives request errors and lifecycle events (default: a
	// logger that discards).
	Logger *slog.Logger
	// Registry resolves algorithm names (default: route/builtin).
	Registry *route.Registry
	// Kinds opens the models' engines and text sides (default:
	// loader.Builtin()).
	Kinds loader.Kinds
	// Deploy, if set, runs every preset's models outside this process
	// (child processes, other machines); the server then opens only their
	// tokenizers and chat templates, not their weights. Nil runs every
	// model's engine in process.
	Deploy Deployer
	// BusDelay, when positive, delays every event between the in-process
	// sub-servers by this much, one way (bus.NewDelayed): an experiment
	// that serves as a split deployment would, the models on machines a
	// network apart. It has no effect with Deploy.
	BusDelay time.Duration
	// Faults, if set, injects failures into the engines and algorithms
	// this process runs (tests of the failure boundaries; internal/faults).
	Faults *faults.Faults
}

// Deployer runs one preset's models elsewhere and returns a deployment over
// them, for Options.Deploy. preset is the preset's name; s is the system
// specification the server would open in process (system.Open), the
// same value, so that every option of it reaches sub-servers elsewhere by
// one path (system.Spec.Member, system.Remote): the models' definitions
// (unplaced), the algorithm, its parameters and registry, the launch
// policy (static tables by now: automatic thresholds are computed up
// front; model i runs s.Launch.Policy(i)), MaxBatch, speculation, the
// stall timeout, the metrics Observer and the hooks. The returned
// deployment's models must announce their engine facts
// (deploy.Model.Remote). The server closes the deployment, then closer
// (which may be nil), on Close. ctx bounds the start-up.
type Deployer func(ctx context.Context, preset string, s system.Spec) (r *deploy.Deployment, closer io.Closer, err error)

// RemoteStatser is an optional capability of the closer a Deployer
// returns: the counters its sub-servers last reported, in model order.
// /metrics reports them as it reports sub-servers running in process.
type RemoteStatser interface {
	RemoteStats() []RemoteStat
}

// RemoteStat is what one remote sub-server last reported.
type RemoteStat struct {
	// Up says whether the model serves requests.
	Up bool
	// Restarts counts the times it came back as a new process.
	Restarts int
	// Stats are its counters as of its last heartbeat.
	Stats subserver.Stats
	// Policy is the launch policy it runs when the front end gave it
	// (nil: a sub-server started elsewhere owns its policy).
	Policy *sched.Policy
}

// Server serves the HTTP API over one deployment per preset.
type Server struct {
	cfg     config.Config
	log     *slog.Logger
	deps    []*deployment
	byName  map[string]*deployment
	metrics *metrics
	handler http.Handler
	epoch   string

	nextID   atomic.Uint64
	inFlight atomic.Int64
	draining atomic.Bool
	idle     chan struct{} // signalled when the last request in flight ends while draining
	conns    atomic.Pointer[limitListener]
	handlers sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// New validates cfg, opens every preset's engines and starts their deployments
// (or has Options.Deploy run them elsewhere). ctx bounds the start-up work
// (automatic thresholds, remote models joining). Close releases them.
func New(ctx context.Context, cfg config.Config, opts Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registry == nil {
		opts.Registry = builtin.Registry()
	}
	if opts.Kinds == nil {
		opts.Kinds = loader.Builtin()
	}
	if err := opts.Kinds.CheckAll(&cfg); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: opts.Logger, byName: map[string]*deployment{}, epoch: fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff),
		idle: make(chan struct{}, 1)}
	s.metrics = newMetrics(s)
	for _, p := range cfg.Presets {
		d, err := buildDeployment(ctx, &cfg, p, opts, s.metrics)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("server: %w", err)
		}
		s.deps = append(s.deps, d)
		s.byName[d.name] = d
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the HTTP handler of the API.
func (s *Server) Handler() http.Handler { return s.handler }

// Close stops every deployment and closes the engines. Requests still in
// flight are cancelled.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.draining.Store(true)
		var errs []error
		for _, d := range s.deps {
			errs = append(errs, d.close())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Serve answers requests on ln until ctx ends, then shuts down gracefully:
// new requests get 503 (with Retry-After) while the requests in flight
// finish, for up to the configured shutdown timeout; then it cancels what
// is left — a stream still running ends with an error event of type
// server_shutdown and "data: [DONE]", a request not streamed gets 503 with
// Retry-After — stops accepting and returns once every handler has
// returned. It does not Close the server.
//
// Every read from a client is bounded (Config.ReadHeaderTimeout,
// BodyTimeout, IdleTimeout), and so is every write (WriteTimeout). At most
// the connection cap (Config.MaxConnections) is served at once, and at
// most Config.MaxConnsPerClient idle or half-sent connections per client
// address; at either bound the oldest such connections make room (see
// conns.go). Past the cap with every connection busy, a reserved lane
// answers /health and gives other requests 503.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, hardStop := context.WithCancelCause(context.Background())
	defer hardStop(nil)
	limit := connCap(s.cfg.MaxConnections, fdLimit())
	lln := newLimitListener(ln, limit, clientCap(s.cfg.MaxConnsPerClient, limit))
	s.conns.Store(lln)
	srv := s.mainServer(base, lln)
	reserve := s.reserveServer(base, limit)
	errc, rerrc := make(chan error, 1), make(chan error, 1)
	go func() { errc <- srv.Serve(lln) }()
	go func() { rerrc <- reserve.Serve(lln.lane) }()
	select {
	case err := <-errc:
		_ = reserve.Close()
		<-rerrc
		s.handlers.Wait()
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
	}
	s.drain(srv)
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if !s.waitIdle(sctx) {
		s.log.Warn("shutdown timeout reached: cancelling requests in flight", "in_flight", s.inFlight.Load())
		hardStop(errHardStop) // their handlers tell their clients (stoppedByShutdown)
	}
	// Every generation has ended: stop accepting, let the last responses
	// go out (bounded by the write timeout), then close what is left.
	fctx, fcancel := context.WithTimeout(context.Background(), s.cfg.WriteTimeout)
	err := errors.Join(srv.Shutdown(fctx), reserve.Shutdown(fctx))
	fcancel()
	if err != nil {
		hardStop(errHardStop)
		_ = srv.Close()
		_ = reserve.Close()
	}
	<-errc // http.ErrServerClosed
	<-rerrc
	s.handlers.Wait()
	return nil
}

// mainServer is the http.Server of the main lane: its read timeouts, and
// the connection tracking of lln (which connections are busy).
func (s *Server) mainServer(base context.Context, lln *limitListener) *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ConnContext:       withConn,
		ConnState:         lln.connState,
		ErrorLog:          s.errorLog(),
	}
}

// ConnectionsEvicted counts the idle or half-sent connections closed to
// make room for newer ones (per-client bound or connection cap) since
// Serve began; 0 before.
func (s *Server) ConnectionsEvicted() int64 {
	if l := s.conns.Load(); l != nil {
		return l.evictions()
	}
	return 0
}

// drain starts a graceful shutdown: new requests get 503 and connections
// are no longer kept alive.
func (s *Server) drain(srv *http.Server) {
	s.draining.Store(true)
	srv.SetKeepAlivesEnabled(false)
	s.log.Info("shutting down: draining requests in flight", "in_flight", s.inFlight.Load(), "timeout", s.cfg.ShutdownTimeout)
}

// waitIdle waits until no generation request is in flight (true) or ctx
// ends (false). Call it once draining is set.
func (s *Server) waitIdle(ctx context.Context) bool {
	for s.inFlight.Load() > 0 {
		select {
		case <-s.idle:
		case <-ctx.Done():
			return s.inFlight.Load() == 0
		}
	}
	return true
}

// errorLog is the http.Server's log: debug lines of the server's logger.
func (s *Server) errorLog() *log.Logger {
	return slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)
}

// deployment returns the preset a request names ("" is the first one).
func (s *Server) deployment(name string) (*deployment, *apiError) {
	if name == "" {
		return s.deps[0], nil
	}
	if d, ok := s.byName[name]; ok {
		return d, nil
	}
	return nil, errNotFoundModel(name, s.presetNames())
}

// admit counts a generation request in flight, or refuses it.
func (s *Server) admit() (release func(), _ *apiError) {
	if s.draining.Load() {
		return nil, errShuttingDown("The server is shutting down")
	}
	if n := s.inFlight.Add(1); n > int64(s.cfg.MaxInFlight) {
		s.inFlight.Add(-1)
		return nil, errBusy(s.cfg.MaxInFlight)
	}
	return func() {
		if s.inFlight.Add(-1) == 0 && s.draining.Load() {
			select { // wake waitIdle
			case s.idle <- struct{}{}:
			default:
			}
		}
	}, nil
}

// routes builds the mux with its middleware.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	api := func(method string, h func(http.ResponseWriter, *http.Request)) http.Handler {
		return s.wrap(method, true, h)
	}
	mux.Handle("/v1/completions", api(http.MethodPost, s.handleCompletions))
	mux.Handle("/v1/chat/completions", api(http.MethodPost, s.handleChat))
	mux.Handle("/v1/embeddings", api(http.MethodPost, s.handleEmbeddings))
	mux.Handle("/v1/models", api(http.MethodGet, s.handleModels))
	mux.Handle("/generate", api(http.MethodPost, s.handleGenerate))
	mux.Handle("/v1/models/{id...}", api(http.MethodGet, s.handleModel))
	mux.Handle("/tokenize", api(http.MethodPost, s.handleTokenize))
	mux.Handle("/detokenize", api(http.MethodPost, s.handleDetokenize))
	mux.Handle("/version", s.wrap(http.MethodGet, false, s.handleVersion))
	mux.Handle("/metrics", api(http.MethodGet, s.metrics.handler().ServeHTTP))
	mux.Handle("/health", s.wrap(http.MethodGet, false, s.handleHealth))
	mux.Handle("/ready", s.wrap(http.MethodGet, false, s.handleReady))
	s.mountConsole(mux)
	mux.Handle("/", s.wrap("", false, func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errNotFoundPath(r.URL.Path))
	}))
	return s.guard(s.cors(mux))
}

// guard is the front of every request, whatever answers it (a handler,
// a refusal, the CORS preflight). A request that declares a body must
// deliver it within the body timeout from the end of its headers: the
// read deadline set here bounds the handler's reads and the ones net/http
// makes after the handler returns to discard what it left unread (which
// otherwise have no deadline: a connection that declares a body and never
// sends it would be held forever). A response made before the whole body
// was read closes the connection (Connection: close); net/http then lets
// the client finish sending, within the same deadline, before closing.
// Once the body has arrived the deadline is lifted (net/http's own read
// then watches for the client leaving, and must not time out).
//
// guard also tells the connection tracking (conns.go) when a connection
// is busy: once its request's body has arrived (at once without a body),
// or while a response made before the body arrived is being written; a
// connection left waiting for the rest of an unread body is not.
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tc := connOf(r)
		if r.Body == nil || r.Body == http.NoBody {
			tc.setBusy()
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) // unsupported only by test recorders
		b := &guardedBody{ReadCloser: r.Body, arrived: func() {
			_ = rc.SetReadDeadline(time.Time{})
			tc.setBusy()
		}}
		// A shallow copy: net/http keeps its own view of the body, which
		// decides what it reads after the handler.
		r = r.WithContext(r.Context())
		r.Body = b
		gw := &guardedWriter{ResponseWriter: w, rc: rc, body: b, conn: tc}
		h.ServeHTTP(gw, r)
		if gw.header && !b.eof.Load() {
			tc.setWaiting()
		}
	})
}

// guardedBody is a request body that tells when it has been read to its
// end.
type guardedBody struct {
	io.ReadCloser
	arrived func()
	eof     atomic.Bool
}

// Read reads the body, noting its end.
func (b *guardedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) && b.eof.CompareAndSwap(false, true) {
		b.arrived()
	}
	return n, err
}

// guardedWriter closes the connection after a response that was begun
// before its request's body had arrived, and keeps the connection busy
// while that response is written.
type guardedWriter struct {
	http.ResponseWriter
	rc     *http.ResponseController
	body   *guardedBody
	conn   *trackedConn
	header bool
}

// begin is called before the response headers go out.
func (w *guardedWriter) begin() {
	if w.header {
		return
	}
	w.header = true
	if !w.body.eof.Load() {
		w.Header().Set("Connection", "close")
		w.conn.setBusy()
	}
}

// WriteHeader sends the response headers.
func (w *guardedWriter) WriteHeader(code int) {
	if code >= http.StatusOK || code == http.StatusSwitchingProtocols {
		w.begin()
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write writes response body bytes.
func (w *guardedWriter) Write(b []byte) (int, error) {
	w.begin()
	return w.ResponseWriter.Write(b)
}

// FlushError sends what was written.
func (w *guardedWriter) FlushError() error {
	w.begin()
	return w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (w *guardedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// statusRecorder remembers the status code for metrics and bounds every
// write: before each one the connection's write deadline moves to
// timeout from now, so a client that accepts no data for that long fails
// the write (and the handler, its request).
type statusRecorder struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	code    int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	r.extend()
	return r.ResponseWriter.Write(b)
}

// FlushError sends what was written, within the write timeout.
func (r *statusRecorder) FlushError() error {
	r.extend()
	return r.rc.Flush()
}

// extend moves the write deadline to timeout from now.
func (r *statusRecorder) extend() {
	_ = r.rc.SetWriteDeadline(time.Now().Add(r.timeout)) // unsupported only by test recorders
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// wrap adds handler tracking, method checks, authentication, the refusal
// of API requests while draining, write deadlines and metrics. auth marks
// the endpoints behind the API key.
func (s *Server) wrap(method string, auth bool, h func(http.ResponseWriter, *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.handlers.Add(1)
		defer s.handlers.Done()
		rec := &statusRecorder{ResponseWriter: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
		rec.extend()
		defer func() { s.metrics.http(r.URL.Path, rec.code) }()
		defer s.recoverHandler(rec, r)
		switch {
		case method != "" && r.Method != method:
			rec.Header().Set("Allow", method)
			writeError(rec, errMethod(r.Method, r.URL.Path, method))
		case auth && s.cfg.APIKey != "" && !s.authorized(r):
			writeError(rec, errUnauthorized(s.authMessage(r)))
		case auth && s.draining.Load():
			rec.Header().Set("Connection", "close")
			writeError(rec, errShuttingDown("The server is shutting down"))
		default:
			h(rec, r)
		}
	})
}

// recoverHandler is the HTTP side of the failure boundary: a panic in a
// request's handler (its text, stop and log-probability handling, the
// front end's routing hooks) is logged once with its stack and counted,
// and that request alone fails: 500 internal_error before the response
// started, an error event then [DONE] on a stream, and a closed connection
// otherwise.
func (s *Server) recoverHandler(rec *statusRecorder, r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v == http.ErrAbortHandler {
		panic(v) // net/http's own way to abort a response
	}
	s.log.Error("panic recovered", "where", "http", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	s.metrics.panic()
	err := errInternal(fmt.Errorf("%w: panic in the request's handler: %v", subserver.ErrPanic, v))
	switch {
	case rec.code == 0:
		writeError(rec, err)
	case strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream"):
		b, _ := json.Marshal(err.body())
		_, _ = fmt.Fprintf(rec, "data: %s\n\ndata: [DONE]\n\n", b)
		_ = rec.FlushError()
	default:
		panic(http.ErrAbortHandler) // a body half written: only closing tells
	}
}

// authorized checks "Authorization: Bearer <key>" (the scheme in any case)
// or "api-key: <key>".
func (s *Server) authorized(r *http.Request) bool {
	key := r.Header.Get("Api-Key")
	if v := r.Header.Get("Authorization"); v != "" {
		if scheme, k, ok := strings.Cut(strings.TrimSpace(v), " "); ok && strings.EqualFold(scheme, "Bearer") {
			key = strings.TrimSpace(k)
		}
	}
	return key != "" && subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) == 1
}

func (s *Server) authMessage(r *http.Request) string {
	if r.Header.Get("Authorization") == "" && r.Header.Get("Api-Key") == "" {
		return "Missing API key: send it as \"Authorization: Bearer <key>\""
	}
	return "Incorrect API key provided"
}

// handleHealth answers 200 while serving (status "degraded" while a model
// is down, see /ready) and 503 (with Retry-After) while shutting down.
// When an API key is set, only a client that sends it sees more than the
// status.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		w.Header().Set("Retry-After", retryAfter)
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "shutting_down"})
		return
	}
	if s.cfg.APIKey != "" && !s.authorized(r) {
		writeJSON(w, http.StatusOK, map[string]any{"status": s.liveness()})
		return
	}
	presets := map[string]int{}
	for _, d := range s.deps {
		presets[d.name] = d.r.Active()
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": s.liveness(), "in_flight": s.inFlight.Load(), "active_by_preset": presets})
}
