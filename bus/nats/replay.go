package nats

import (
	"errors"
	"sync/atomic"
)

// ErrReplay wraps the errors of events dropped as replays: seen before,
// too old, or sent before the receiving endpoint could have received them.
var ErrReplay = errors.New("bus/nats: replayed event")

// WindowSize is the span of one sender's sequence numbers an endpoint
// accepts (once each), ending at the highest it has accepted: how far one
// sender's events may arrive out of order.
const WindowSize = 1024

// MaxSenders bounds the senders an endpoint remembers; past it, the one
// heard from least recently is forgotten (see replayGuard).
const MaxSenders = 1024

// verdict is what an anti-replay check makes of an event.
type verdict uint8

const (
	// fresh: accepted (and recorded).
	fresh verdict = iota
	// duplicate: accepted before.
	duplicate
	// tooOld: WindowSize or more below its sender's highest accepted
	// number, so it cannot be told from a replay.
	tooOld
	// stale: from a sender the endpoint does not know, sent before the
	// endpoint could have received it (replayGuard only).
	stale
)

// window is one sender's anti-replay window, as in IPsec and DTLS: the
// highest sequence number accepted and which of the WindowSize numbers up
// to it were. The zero value has accepted nothing. A window is owned by
// one goroutine.
type window struct {
	top  uint64
	seen [WindowSize / 64]uint64 // bit seq%WindowSize: seq was accepted
}

// accept records seq and returns fresh, or returns why seq is refused
// (duplicate, tooOld). Sequence number 0 is never accepted.
func (w *window) accept(seq uint64) verdict {
	switch {
	case seq == 0:
		return tooOld
	case seq > w.top:
		w.clear(w.top+1, seq)
		w.top = seq
	case w.top-seq >= WindowSize:
		return tooOld
	case w.seen[seq%WindowSize/64]&(1<<(seq%64)) != 0:
		return duplicate
	}
	w.seen[seq%WindowSize/64] |= 1 << (seq % 64)
	return fresh
}

// clear forgets the numbers from..to (inclusive), which the window is
// about to cover: their bits still hold numbers WindowSize lower.
func (w *window) clear(from, to uint64) {
	if to-from >= WindowSize {
		w.seen = [WindowSize / 64]uint64{}
		return
	}
	for from <= to {
		off := from % 64
		n := min(64-off, to-from+1)
		w.seen[from%WindowSize/64] &^= (1<<n - 1) << off // n = 64: 1<<64-1 is all ones
		from += n
	}
}

// sender is what an endpoint remembers of one sender.
type sender struct {
	id   uint64
	win  window
	last int64  // newest send time accepted, Unix milliseconds
	used uint64 // replayGuard.tick when last heard from
}

// replayGuard drops the replayed events of one endpoint: those it
// accepted before, those too far below their sender's newest (window),
// and those of senders it does not know that were sent before it could
// have received them. The last rule covers what no window can: a
// receiver that started after the capture (a restarted process), and a
// sender it forgot (past MaxSenders). It needs clocks that agree within
// the skew; a sender known to the endpoint is judged by its window alone.
// A replayGuard is owned by its endpoint's delivery goroutine.
type replayGuard struct {
	senders map[uint64]*sender
	tick    uint64
	// horizon (Unix milliseconds): events of unknown senders sent
	// before it, less the skew, are refused. It starts at the endpoint's
	// attach time, and each forgotten sender moves it to that sender's
	// newest send time, so its old events do not pass as new.
	horizon int64
	skew    int64 // milliseconds; negative: no time rule
}

func newReplayGuard(attached, skew int64) *replayGuard {
	return &replayGuard{senders: make(map[uint64]*sender), horizon: attached, skew: skew}
}

// accept records o and returns fresh, or returns why o is refused
// (duplicate, tooOld, stale).
func (g *replayGuard) accept(o Origin) verdict {
	g.tick++
	s := g.senders[o.Sender]
	if s == nil {
		if g.skew >= 0 && o.Time < g.horizon-g.skew {
			return stale
		}
		s = g.admit(o.Sender)
	}
	s.used = g.tick
	v := s.win.accept(o.Seq)
	if v == fresh {
		s.last = max(s.last, o.Time)
	}
	return v
}

// admit starts remembering sender id, forgetting the least recently heard
// sender when MaxSenders are remembered.
func (g *replayGuard) admit(id uint64) *sender {
	var s *sender
	if len(g.senders) >= MaxSenders {
		for _, x := range g.senders {
			if s == nil || x.used < s.used {
				s = x
			}
		}
		delete(g.senders, s.id)
		g.horizon = max(g.horizon, s.last)
		*s = sender{}
	} else {
		s = new(sender)
	}
	s.id = id
	g.senders[id] = s
	return s
}

// dropCounters count the messages a bus dropped on receipt, by reason.
type dropCounters struct {
	badTag, replayed, stale, version, undecodable atomic.Uint64
}

// DropCounts counts the messages a bus dropped on receipt, by reason,
// since it connected. Every drop is also reported (Options.OnError) and
// counted by Errors.
type DropCounts struct {
	// BadTag: the authentication tag did not verify: forged, corrupted,
	// moved to another subject, or sealed with another deployment's key
	// (events and heartbeats).
	BadTag uint64
	// Replayed: an event the endpoint had accepted before, or one
	// WindowSize or more below its sender's newest.
	Replayed uint64
	// Stale: an event of a sender the endpoint did not know, sent before
	// it attached (or before a sender it forgot last sent), allowing for
	// Options.ClockSkew: a replay, or a sender whose clock is behind.
	Stale uint64
	// Version: an event in another encoding version (a peer running
	// another release).
	Version uint64
	// Undecodable: any other bad encoding.
	Undecodable uint64
}

func (c *dropCounters) load() DropCounts {
	return DropCounts{BadTag: c.badTag.Load(), Replayed: c.replayed.Load(), Stale: c.stale.Load(),
		Version: c.version.Load(), Undecodable: c.undecodable.Load()}
}

// Plus returns the sum of d and o, reason by reason.
func (d DropCounts) Plus(o DropCounts) DropCounts {
	return DropCounts{BadTag: d.BadTag + o.BadTag, Replayed: d.Replayed + o.Replayed, Stale: d.Stale + o.Stale,
		Version: d.Version + o.Version, Undecodable: d.Undecodable + o.Undecodable}
}

// ByReason returns the counts keyed by reason: bad_tag, replayed, stale,
// version, undecodable.
func (d DropCounts) ByReason() map[string]uint64 {
	return map[string]uint64{"bad_tag": d.BadTag, "replayed": d.Replayed, "stale": d.Stale, "version": d.Version, "undecodable": d.Undecodable}
}
