package nats

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/bus"
)

// BenchmarkSealedCodec is the bus's own per-message work without the
// network: encode, number, seal, open, check for a replay and decode a
// one-token commit.
func BenchmarkSealedCodec(b *testing.B) {
	s, err := newSealer(NewKey())
	if err != nil {
		b.Fatal(err)
	}
	const subject = "bench.ep.front"
	in := &bus.Event{Kind: bus.Commit, ID: 7, From: 1, Tokens: []int32{1234}, By: []int8{1}, Pos: 300}
	out := &bus.Event{}
	var buf []byte
	g := newReplayGuard(time.Now().UnixMilli(), DefaultClockSkew.Milliseconds())
	seq := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		buf, err = AppendEvent(buf[:0], Origin{Sender: 1, Time: time.Now().UnixMilli()}, in)
		if err != nil {
			b.Fatal(err)
		}
		seq++
		binary.LittleEndian.PutUint64(buf[seqOffset:], seq)
		buf = s.seal(subject, buf)
		data, err := s.open(subject, buf)
		if err != nil {
			b.Fatal(err)
		}
		h, err := DecodeHeader(data)
		if err != nil || g.accept(h.Origin) != fresh {
			b.Fatalf("header %+v, %v", h, err)
		}
		if _, err := DecodeEvent(data, out, nil); err != nil {
			b.Fatal(err)
		}
	}
}
