package nats

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
)

// refWindow is the window's specification: every number accepted is
// remembered, and a number is accepted once, if it is not WindowSize or
// more below the highest accepted.
type refWindow struct {
	top  uint64
	seen map[uint64]bool
}

func (r *refWindow) accept(seq uint64) verdict {
	switch {
	case seq == 0 || (seq < r.top && r.top-seq >= WindowSize):
		return tooOld
	case r.seen[seq]:
		return duplicate
	}
	r.seen[seq] = true
	r.top = max(r.top, seq)
	return fresh
}

// count returns how many numbers w holds as accepted.
func (w *window) count() int {
	n := 0
	for _, x := range w.seen {
		n += bits.OnesCount64(x)
	}
	return n
}

// checkAgainstRef feeds seqs to a window and to the reference and fails
// at the first difference.
func checkAgainstRef(t *testing.T, seqs []uint64) {
	t.Helper()
	var w window
	ref := refWindow{seen: map[uint64]bool{}}
	for i, seq := range seqs {
		if got, want := w.accept(seq), ref.accept(seq); got != want {
			t.Fatalf("step %d: seq %d (top %d): verdict %d, reference %d", i, seq, ref.top, got, want)
		}
	}
	held := 0
	for seq := range ref.seen {
		if ref.top-seq < WindowSize {
			held++
		}
	}
	if w.top != ref.top || w.count() != held {
		t.Fatalf("window top %d holding %d, reference top %d holding %d", w.top, w.count(), ref.top, held)
	}
}

// TestWindowOutOfOrder: a sender's events overtaking each other within
// the window are all accepted, once each, whatever the order.
func TestWindowOutOfOrder(t *testing.T) {
	var w window
	for _, seq := range []uint64{2, 1, 5, 3, 4, 9, 6, 8, 7, 1000, 10, 999} {
		if v := w.accept(seq); v != fresh {
			t.Fatalf("seq %d: verdict %d, want fresh", seq, v)
		}
	}
	for _, seq := range []uint64{1, 5, 9, 1000, 999} {
		if v := w.accept(seq); v != duplicate {
			t.Fatalf("seq %d again: verdict %d, want duplicate", seq, v)
		}
	}
	if w.top != 1000 || w.count() != 12 {
		t.Fatalf("top %d, %d held", w.top, w.count())
	}
}

// TestWindowEdges: the oldest number the window holds and the one just
// below it, jumps of exactly the window's size and far beyond, and
// sequence number 0.
func TestWindowEdges(t *testing.T) {
	var w window
	if v := w.accept(0); v != tooOld {
		t.Fatalf("seq 0: verdict %d", v)
	}
	const top = 5000
	w.accept(top)
	for _, c := range []struct {
		seq  uint64
		want verdict
	}{
		{top - WindowSize, tooOld},    // just outside
		{top - WindowSize + 1, fresh}, // the oldest held
		{top - WindowSize + 1, duplicate},
		{top, duplicate},
		{top + WindowSize, fresh}, // a jump of exactly the window: every bit recycled
		{top, tooOld},             // now exactly WindowSize below
		{top + 1, fresh},          // its bit held top+1-WindowSize's place
		{top + 2*WindowSize - 1, fresh},
		{top + WindowSize, duplicate}, // still held at the edge
		{top + WindowSize - 1, tooOld},
		{top + WindowSize + 1, fresh},
		{1 << 62, fresh}, // far-future jump
		{1<<62 - 1, fresh},
		{1<<62 - WindowSize + 1, fresh},
		{1<<62 - WindowSize, tooOld},
		{top + 2*WindowSize - 1, tooOld},
		{1 << 62, duplicate},
		{^uint64(0), fresh}, // the largest number
		{^uint64(0), duplicate},
		{^uint64(0) - WindowSize + 1, fresh},
		{1 << 62, tooOld},
	} {
		if v := w.accept(c.seq); v != c.want {
			t.Fatalf("seq %d (top %d): verdict %d, want %d", c.seq, w.top, v, c.want)
		}
	}
	if w.count() != 2 || w.top != ^uint64(0) {
		t.Fatalf("%d numbers held below %d after the last jump, want 2", w.count(), w.top)
	}
}

// TestWindowMatchesReference runs the window and its reference on random
// sequences: increasing with jitter, with duplicates, with jumps of about
// the window's size and beyond.
func TestWindowMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		jitter := []int64{1, 8, 64, WindowSize / 2, WindowSize, 2 * WindowSize}[trial%6]
		next := uint64(1 + rng.IntN(3*WindowSize))
		seqs := make([]uint64, 0, 2000)
		for range cap(seqs) {
			switch r := rng.IntN(100); {
			case r < 3: // a jump
				next += uint64(WindowSize - 2 + rng.IntN(5+int(jitter)))
			case r < 10 && len(seqs) > 0: // a duplicate
				seqs = append(seqs, seqs[rng.IntN(len(seqs))])
				continue
			}
			seq := int64(next) + rng.Int64N(2*jitter+1) - jitter
			seqs = append(seqs, uint64(max(seq, 0)))
			next++
		}
		checkAgainstRef(t, seqs)
	}
}

// FuzzWindow compares the window with its reference on sequences made of
// the input's signed 16-bit steps around a moving base.
func FuzzWindow(f *testing.F) {
	f.Add([]byte{1, 0, 2, 0, 1, 0, 0, 4, 0, 0xfc, 0xff, 0xff})
	f.Add(binary.LittleEndian.AppendUint16(nil, WindowSize))
	f.Fuzz(func(t *testing.T, steps []byte) {
		base := uint64(1 << 20)
		var seqs []uint64
		for i := 0; i+1 < len(steps); i += 2 {
			d := int16(binary.LittleEndian.Uint16(steps[i:]))
			seqs = append(seqs, base+uint64(int64(d)))
			if d > 0 {
				base += uint64(d) / 2
			}
		}
		checkAgainstRef(t, seqs)
	})
}

// TestGuardUnknownSenders: an endpoint accepts a new sender's events sent
// after it attached (allowing for the skew), refuses older ones, and then
// judges a sender it knows by its window alone.
func TestGuardUnknownSenders(t *testing.T) {
	const attached, skew = 1_000_000, 50
	g := newReplayGuard(attached, skew)
	for _, c := range []struct {
		o    Origin
		want verdict
	}{
		{Origin{Sender: 1, Seq: 1, Time: attached - skew - 1}, stale},
		{Origin{Sender: 1, Seq: 2, Time: attached - skew}, fresh},    // within the skew
		{Origin{Sender: 1, Seq: 1, Time: attached - 10*skew}, fresh}, // known now: window only
		{Origin{Sender: 1, Seq: 2, Time: attached + 5}, duplicate},
		{Origin{Sender: 2, Seq: 7, Time: attached + 1}, fresh},
		{Origin{Sender: 3, Seq: 7, Time: 0}, stale},
	} {
		if v := g.accept(c.o); v != c.want {
			t.Fatalf("%+v: verdict %d, want %d", c.o, v, c.want)
		}
	}
	if len(g.senders) != 2 {
		t.Fatalf("%d senders remembered, want 2", len(g.senders))
	}
	if v := newReplayGuard(attached, -1).accept(Origin{Sender: 1, Seq: 1}); v != fresh {
		t.Fatalf("no time rule: verdict %d", v)
	}
}

// TestGuardForgets: past MaxSenders the least recently heard sender is
// forgotten, memory stays bounded, and the forgotten sender's old events
// are refused as stale because the horizon moved past them.
func TestGuardForgets(t *testing.T) {
	const attached = 1_000_000
	g := newReplayGuard(attached, 0)
	// Sender 1 is heard first and last at time attached+1.
	if v := g.accept(Origin{Sender: 1, Seq: 10, Time: attached + 1}); v != fresh {
		t.Fatalf("verdict %d", v)
	}
	for i := range uint64(MaxSenders - 1) {
		g.accept(Origin{Sender: 100 + i, Seq: 1, Time: attached + 2})
	}
	g.accept(Origin{Sender: 100, Seq: 2, Time: attached + 3}) // sender 100 is recent again
	// A new sender pushes out sender 1, the least recently heard.
	if v := g.accept(Origin{Sender: 5000, Seq: 1, Time: attached + 4}); v != fresh {
		t.Fatalf("new sender: verdict %d", v)
	}
	if len(g.senders) != MaxSenders || g.senders[1] != nil || g.senders[100] == nil {
		t.Fatalf("%d senders; sender 1 kept %v, sender 100 kept %v", len(g.senders), g.senders[1] != nil, g.senders[100] != nil)
	}
	// Sender 1's events up to its last send time cannot be told from
	// replays any more; its later ones are accepted.
	if v := g.accept(Origin{Sender: 1, Seq: 9, Time: attached}); v != stale {
		t.Fatalf("forgotten sender's old event: verdict %d", v)
	}
	if v := g.accept(Origin{Sender: 1, Seq: 11, Time: attached + 5}); v != fresh {
		t.Fatalf("forgotten sender's new event: verdict %d", v)
	}
	for i := range uint64(10 * MaxSenders) {
		g.accept(Origin{Sender: 1<<32 + i, Seq: 1, Time: attached + 6})
	}
	if len(g.senders) != MaxSenders {
		t.Fatalf("%d senders remembered, want at most %d", len(g.senders), MaxSenders)
	}
}

// TestReceivePathAllocatesNothing: encoding, numbering, sealing, opening,
// the replay check and decoding of a steady stream of commits allocate
// nothing.
func TestReceivePathAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop what it holds")
	}
	s, err := newSealer(NewKey())
	if err != nil {
		t.Fatal(err)
	}
	g := newReplayGuard(time.Now().UnixMilli(), DefaultClockSkew.Milliseconds())
	in := &bus.Event{Kind: bus.Commit, ID: 7, From: 1, Tokens: []int32{1234, 5}, By: []int8{1, 1}, Pos: 300}
	out := &bus.Event{}
	buf := make([]byte, 0, 256)
	seq := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		buf, _ = AppendEvent(buf[:0], Origin{Sender: 9, Time: time.Now().UnixMilli()}, in)
		seq++
		binary.LittleEndian.PutUint64(buf[seqOffset:], seq)
		buf = s.seal("x.ep.front", buf)
		data, err := s.open("x.ep.front", buf)
		if err != nil {
			t.Fatal(err)
		}
		h, err := DecodeHeader(data)
		if err != nil || g.accept(h.Origin) != fresh {
			t.Fatalf("header %+v, %v", h, err)
		}
		if _, err := DecodeEvent(data, out, nil); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 || out.Pos != 300 || len(out.Tokens) != 2 {
		t.Fatalf("%v allocations per message; decoded %+v", allocs, out)
	}
}
