package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Connection limits. Past the cap (Config.MaxConnections, or the
// descriptor limit less fdHeadroom and the reserve), a connection goes to a
// reserved lane of reserveConns connections served one request each with
// short timeouts: /health answers there as usual, every other request gets
// 503. When the lane is full, its oldest connection is closed to make room:
// a probe sends its request at once and is answered in milliseconds, so the
// connections that linger there are the slow ones, and a new probe always
// gets in. The listener keeps accepting either way, so the kernel's backlog
// never fills and the process never runs out of descriptors.
const (
	reserveConns   = 32
	fdHeadroom     = 64
	maxAutoConns   = 16384
	minAutoConns   = 16
	reserveTimeout = 250 * time.Millisecond
	sendBuffer     = 64 << 10
)

// connCap is the connection cap for a configured value (0: derived from
// the descriptor limit nofile, itself 0 when unknown).
func connCap(configured int, nofile uint64) int {
	if configured > 0 {
		return configured
	}
	if nofile == 0 {
		return maxAutoConns
	}
	n := int(min(nofile, uint64(maxAutoConns+fdHeadroom+reserveConns))) - fdHeadroom - reserveConns
	return max(n, minAutoConns)
}

// limitListener accepts connections, hands up to max of them at once to
// the main server and the ones past the cap to the reserved lane (at most
// reserveConns open there: the oldest makes room for the newest).
type limitListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	lane    *laneListener
	dropped atomic.Int64

	laneMu    sync.Mutex
	laneConns []*countedConn // open on the reserved lane, oldest first
}

func newLimitListener(ln net.Listener, max int) *limitListener {
	return &limitListener{Listener: ln, max: int64(max),
		lane: &laneListener{addr: ln.Addr(), ch: make(chan net.Conn, laneQueue), done: make(chan struct{})}}
}

// laneQueue bounds the reserved lane's connections accepted but not yet
// taken by its server (evicted ones may still wait there).
const laneQueue = 4 * reserveConns

// toLane registers c on the reserved lane, closing the oldest lane
// connection when the lane is full, and returns c counted.
func (l *limitListener) toLane(c net.Conn) *countedConn {
	lc := &countedConn{Conn: c}
	lc.release = func() { l.leaveLane(lc) }
	l.laneMu.Lock()
	var evict *countedConn
	if len(l.laneConns) >= reserveConns {
		evict = l.laneConns[0]
		l.laneConns = slices.Delete(l.laneConns, 0, 1)
	}
	l.laneConns = append(l.laneConns, lc)
	l.laneMu.Unlock()
	if evict != nil {
		l.dropped.Add(1)
		_ = evict.Close()
	}
	return lc
}

// leaveLane forgets a closed lane connection.
func (l *limitListener) leaveLane(lc *countedConn) {
	l.laneMu.Lock()
	defer l.laneMu.Unlock()
	if i := slices.Index(l.laneConns, lc); i >= 0 {
		l.laneConns = slices.Delete(l.laneConns, i, i+1)
	}
}

// laneOpen is the number of connections open on the reserved lane.
func (l *limitListener) laneOpen() int {
	l.laneMu.Lock()
	defer l.laneMu.Unlock()
	return len(l.laneConns)
}

// Accept returns the next connection within the cap.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.max {
			if tc, ok := c.(*net.TCPConn); ok {
				// A bounded send buffer: a client that stops reading
				// blocks the server's writes after sendBuffer bytes,
				// where the write timeout applies, instead of after
				// the megabytes the kernel would otherwise buffer.
				_ = tc.SetWriteBuffer(sendBuffer)
			}
			return &countedConn{Conn: c, release: func() { l.open.Add(-1) }}, nil
		}
		l.open.Add(-1)
		select {
		case <-l.lane.done:
			_ = c.Close()
			continue
		default:
		}
		lc := l.toLane(c)
		select {
		case l.lane.ch <- lc:
		default: // the lane's server is behind: this one goes too
			l.dropped.Add(1)
			_ = lc.Close()
		}
	}
}

// Close closes the listener and the reserved lane.
func (l *limitListener) Close() error {
	l.lane.close()
	return l.Listener.Close()
}

// countedConn calls release once when closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close closes the connection and releases its place.
func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// laneListener is the reserved lane's listener: the connections past the
// cap, fed by limitListener.
type laneListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

// Accept returns the next connection past the cap.
func (l *laneListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops the lane; connections still queued are closed.
func (l *laneListener) Close() error {
	l.close()
	return nil
}

func (l *laneListener) close() {
	l.once.Do(func() {
		close(l.done)
		for {
			select {
			case c := <-l.ch:
				_ = c.Close()
			default:
				return
			}
		}
	})
}

// Addr is the main listener's address.
func (l *laneListener) Addr() net.Addr { return l.addr }

// reserveServer serves the reserved lane: /health, and 503 for everything
// else, one request per connection.
func (s *Server) reserveServer(base context.Context, limit int) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/health", s.wrap(http.MethodGet, false, s.handleHealth))
	mux.Handle("/", s.wrap("", false, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		writeError(w, errUnavailable(fmt.Sprintf("The server is at its limit of %d connections; retry later", limit)))
	}))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: reserveTimeout,
		ReadTimeout:       reserveTimeout,
		WriteTimeout:      reserveTimeout,
		IdleTimeout:       reserveTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          s.errorLog(),
	}
	srv.SetKeepAlivesEnabled(false)
	return srv
}
