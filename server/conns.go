package server

import (
	"container/list"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
)

// Connection limits. Every read from a client has a deadline: the first
// request's headers within ReadHeaderTimeout, the wait between requests on
// a kept-alive connection within IdleTimeout (both net/http's), and a
// request's body within BodyTimeout from the end of its headers, on every
// path (Server.guard), also when the handler answers without reading the
// body (net/http reads the rest of it after the handler returns): a
// connection whose declared body never arrives is closed once the body
// timeout expires, whatever its answer was.
//
// The main lane serves at most the cap of connections at once
// (Config.MaxConnections, or the descriptor limit less fdHeadroom and the
// reserve). A connection there is either busy — its request's headers and
// body have arrived and its answer is being made or sent (a stream stays
// busy to its end), or an answer made before the body arrived is being
// written — or waiting: just accepted, sending its headers or body, idle
// between requests, or answered and waiting for the rest of a body it
// declared before it is closed. Waiting connections are kept in the order
// they began waiting, overall and per client address (the IP, port
// aside), and are the ones that make room:
//
//   - a client address holds at most the per-client bound of waiting
//     connections (Config.MaxConnsPerClient, by default the cap divided by
//     config.ClientShareDivisor): when one more of its connections arrives
//     or turns idle past it, its oldest waiting connection is closed;
//   - at the cap, a new connection closes the oldest waiting connection of
//     all.
//
// A busy connection is never closed to make room. So however many
// half-sent or idle connections an address holds, a new connection gets
// in, and keeps its place until that many newer connections from the same
// address arrive before it has sent its request — also when a well-behaved
// client shares the flooding address (NAT, loopback). Every operation is
// O(1): linked lists, each connection holding its own elements, and a
// map by address, under one lock.
//
// Only when every connection on the main lane is busy does a new one go to
// a reserved lane of reserveConns connections served one request each with
// short timeouts: /health answers there as usual, every other request gets
// 503. When the lane is full, its oldest connection is closed to make room:
// a probe sends its request at once and is answered in milliseconds, so
// the connections that linger there are the slow ones, and a new probe
// always gets in. The listener keeps accepting either way, so the kernel's
// backlog never fills and the process never runs out of descriptors.
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

// clientCap is the per-client bound of waiting connections for a
// configured value (0: a share of the connection cap).
func clientCap(configured, connCap int) int {
	if configured > 0 {
		return configured
	}
	return max(connCap/config.ClientShareDivisor, 1)
}

// limitListener accepts connections, hands up to max of them at once to
// the main server (closing waiting ones to make room, see above) and the
// ones past the cap to the reserved lane (at most reserveConns open there:
// the oldest makes room for the newest).
type limitListener struct {
	net.Listener
	max       int64
	perClient int
	open      atomic.Int64 // connections on the main lane
	lane      *laneListener
	dropped   atomic.Int64 // reserved-lane connections closed to make room
	evicted   atomic.Int64 // waiting main-lane connections closed to make room

	mu      sync.Mutex
	waiting list.List                 // of *trackedConn, oldest first
	clients map[netip.Addr]*list.List // waiting connections by client address, oldest first

	laneMu    sync.Mutex
	laneConns []*countedConn // open on the reserved lane, oldest first
}

func newLimitListener(ln net.Listener, max, perClient int) *limitListener {
	return &limitListener{Listener: ln, max: int64(max), perClient: perClient, clients: map[netip.Addr]*list.List{},
		lane: &laneListener{addr: ln.Addr(), ch: make(chan net.Conn, laneQueue), done: make(chan struct{})}}
}

// laneQueue bounds the reserved lane's connections accepted but not yet
// taken by its server (evicted ones may still wait there).
const laneQueue = 4 * reserveConns

// Accept returns the next connection admitted to the main lane.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.admit(c); tc != nil {
			if tcp, ok := c.(*net.TCPConn); ok {
				// A bounded send buffer: a client that stops reading
				// blocks the server's writes after sendBuffer bytes,
				// where the write timeout applies, instead of after
				// the megabytes the kernel would otherwise buffer.
				_ = tcp.SetWriteBuffer(sendBuffer)
			}
			return tc, nil
		}
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

// admit places c on the main lane, closing the waiting connections that
// make room for it, or returns nil when every connection there is busy.
func (l *limitListener) admit(c net.Conn) *trackedConn {
	tc := &trackedConn{Conn: c, l: l, client: clientAddr(c)}
	var victims [2]*trackedConn
	l.mu.Lock()
	if q := l.clients[tc.client]; q != nil && q.Len() >= l.perClient {
		victims[0] = l.detachLocked(q.Front().Value.(*trackedConn))
	}
	if l.open.Load() >= l.max {
		f := l.waiting.Front()
		if f == nil {
			l.mu.Unlock()
			return nil
		}
		victims[1] = l.detachLocked(f.Value.(*trackedConn))
	}
	l.open.Add(1)
	l.waitLocked(tc)
	l.mu.Unlock()
	for _, v := range victims {
		if v != nil {
			l.evicted.Add(1)
			_ = v.Conn.Close()
		}
	}
	return tc
}

// waitLocked appends tc to the waiting lists.
func (l *limitListener) waitLocked(tc *trackedConn) {
	q := l.clients[tc.client]
	if q == nil {
		q = list.New()
		l.clients[tc.client] = q
	}
	tc.elem = l.waiting.PushBack(tc)
	tc.clientElem = q.PushBack(tc)
}

// unwaitLocked takes tc off the waiting lists, if it is on them.
func (l *limitListener) unwaitLocked(tc *trackedConn) {
	if tc.elem == nil {
		return
	}
	l.waiting.Remove(tc.elem)
	q := l.clients[tc.client]
	q.Remove(tc.clientElem)
	if q.Len() == 0 {
		delete(l.clients, tc.client)
	}
	tc.elem, tc.clientElem = nil, nil
}

// detachLocked forgets tc and frees its place; it returns tc.
func (l *limitListener) detachLocked(tc *trackedConn) *trackedConn {
	l.unwaitLocked(tc)
	tc.gone = true
	l.open.Add(-1)
	return tc
}

// busy marks tc busy: it can no longer be closed to make room.
func (l *limitListener) busy(tc *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !tc.gone && !tc.busy {
		l.unwaitLocked(tc)
		tc.busy = true
	}
}

// wait marks tc waiting again (its request was answered and the
// connection kept alive, or it waits for the rest of a body its answer
// did not need), closing its address's oldest waiting connection when the
// address holds more than its bound.
func (l *limitListener) wait(tc *trackedConn) {
	l.mu.Lock()
	if tc.gone || !tc.busy {
		l.mu.Unlock()
		return
	}
	tc.busy = false
	l.waitLocked(tc)
	var victim *trackedConn
	if q := l.clients[tc.client]; q.Len() > l.perClient {
		victim = l.detachLocked(q.Front().Value.(*trackedConn))
	}
	l.mu.Unlock()
	if victim != nil {
		l.evicted.Add(1)
		_ = victim.Conn.Close()
	}
}

// release forgets a closed connection.
func (l *limitListener) release(tc *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !tc.gone {
		l.detachLocked(tc)
	}
}

// waitingConns is the number of waiting connections on the main lane and
// the number of client addresses holding them.
func (l *limitListener) waitingConns() (conns, clients int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting.Len(), len(l.clients)
}

// evictions counts the waiting connections closed to make room.
func (l *limitListener) evictions() int64 { return l.evicted.Load() }

// connState follows the main server's connections: an answered request
// leaves its connection idle (waiting); a hijacked one stays busy.
func (l *limitListener) connState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	switch st {
	case http.StateIdle:
		l.wait(tc)
	case http.StateHijacked:
		l.busy(tc)
	case http.StateClosed:
		l.release(tc)
	}
}

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

// Close closes the listener and the reserved lane.
func (l *limitListener) Close() error {
	l.lane.close()
	return l.Listener.Close()
}

// clientAddr is the address a connection's limits are kept by: the
// remote IP (an IPv4 address mapped into IPv6 as IPv4), port aside.
func clientAddr(c net.Conn) netip.Addr {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case nil:
		return netip.Addr{}
	default:
		ap, _ := netip.ParseAddrPort(a.String())
		return ap.Addr().Unmap()
	}
}

// trackedConn is a main-lane connection: busy or waiting (see above).
type trackedConn struct {
	net.Conn
	l      *limitListener
	client netip.Addr

	// Under l.mu.
	busy, gone       bool
	elem, clientElem *list.Element // on the waiting lists, or nil
}

// Close closes the connection and frees its place.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.l.release(c)
	return err
}

// setBusy marks c busy (nil: a connection the listener does not track).
func (c *trackedConn) setBusy() {
	if c != nil {
		c.l.busy(c)
	}
}

// setWaiting marks c waiting again (nil: a connection the listener does
// not track).
func (c *trackedConn) setWaiting() {
	if c != nil {
		c.l.wait(c)
	}
}

// connKey is the request context's key of its *trackedConn.
type connKey struct{}

// withConn puts a main-lane connection in its requests' context
// (http.Server.ConnContext).
func withConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// connOf is the main-lane connection a request came on (nil if none).
func connOf(r *http.Request) *trackedConn {
	tc, _ := r.Context().Value(connKey{}).(*trackedConn)
	return tc
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
