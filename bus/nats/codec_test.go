package nats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
)

func intsState(*route.Message) route.State { return &route.Ints{} }

// someOrigin is an origin for events the tests encode.
func someOrigin() Origin {
	return Origin{Sender: 0xfeedface12345678, Seq: 1<<40 + 3, Time: 1_750_000_000_123}
}

// header returns an encoded header: the version, someOrigin, kind and
// flags, followed by rest.
func header(kind bus.Kind, flags byte, rest ...byte) []byte {
	b, _ := AppendEvent(nil, someOrigin(), &bus.Event{})
	b = append(b[:1+OriginSize], byte(kind), flags)
	return append(b, rest...)
}

func sampleEvents() []*bus.Event {
	st := route.Ints{3, -7, 1 << 40}
	return []*bus.Event{
		{Kind: bus.Admit, ID: 1, From: bus.Frontend},
		{Kind: bus.Finish, ID: 1 << 60, From: 3},
		{Kind: bus.Cancel, ID: 9, From: bus.Frontend},
		{Kind: bus.Peer, ID: 42, From: 0, Msg: route.Message{
			ID: 42, From: 0, To: 1, Anchor: 5, Tokens: []int32{1, 2, 31999, -1}, By: []int8{-1, -1, 0, 1},
			PromptLen: 2, Committed: 3, Seen: []int{5, 2}, Finished: true,
			Params: route.Params{MaxTokens: 100, IgnoreEOS: true, Seed: 1<<63 + 5, StopIDs: []int32{2, 151645},
				Stop: []string{"\n\nUser:", "</answer>"}, Sampling: engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, Seed: 77}},
			State: &st,
		}},
		{Kind: bus.Peer, ID: 43, From: bus.Frontend, Msg: route.Message{ID: 43, From: -1, Tokens: []int32{1}, By: []int8{-1}, Seen: []int{0, 0}}},
		{Kind: bus.Peer, ID: 44, From: 0, Msg: route.Message{ID: 44, From: 0, To: 1, Anchor: 3, Tokens: []int32{8, 9}, By: []int8{0, 0},
			Seen: []int{5, 3}, Verify: []int32{5}, Epoch: 2, Params: route.Params{MaxTokens: 9, Speculate: 4}}},
		{Kind: bus.Peer, ID: 44, From: 1, Msg: route.Message{ID: 44, From: 1, To: 0, Verify: []int32{5, 8}, Verdict: []int32{17, 3}, Epoch: 2}},
		{Kind: bus.Commit, ID: 7, From: 1, Tokens: []int32{10, 11}, By: []int8{0, 1}, Pos: 12},
		{Kind: bus.Done, ID: 7, From: 1, Reason: "error", Err: "engine: boom"},
		// Replicas: a replica's endpoint as sender, pins, a release, a loss.
		{Kind: bus.Peer, ID: 45, From: bus.Endpoint(1, 3), Msg: route.Message{ID: 45, From: 1, To: 0, Anchor: 2, Tokens: []int32{5},
			By: []int8{1}, Seen: []int{3, 3}, Placed: []int{2, 3}}},
		{Kind: bus.Released, ID: 45, From: bus.Endpoint(0, 2)},
		{Kind: bus.Lost, From: bus.Frontend, Endpoint: bus.Endpoint(MaxModels-2, bus.MaxReplicas-1)},
	}
}

// normalise makes nil and empty slices compare equal.
func normalise(e *bus.Event) bus.Event {
	c := *e
	for _, s := range []any{&c.Tokens, &c.By, &c.Msg.Tokens, &c.Msg.By, &c.Msg.Seen, &c.Msg.Verify, &c.Msg.Verdict, &c.Msg.Placed} {
		v := reflect.ValueOf(s).Elem()
		if v.Len() == 0 {
			v.Set(reflect.Zero(v.Type()))
		}
	}
	return c
}

func TestRoundTrip(t *testing.T) {
	var buf []byte
	got := &bus.Event{}
	for _, e := range sampleEvents() {
		var err error
		buf, err = AppendEvent(buf[:0], someOrigin(), e)
		if err != nil {
			t.Fatal(err)
		}
		got.Reset()
		o, err := DecodeEvent(buf, got, intsState)
		if err != nil {
			t.Fatalf("%v: %v", e.Kind, err)
		}
		if want, have := normalise(e), normalise(got); !reflect.DeepEqual(want, have) || o != someOrigin() {
			t.Fatalf("%v round trip:\n got %+v from %+v\nwant %+v from %+v", e.Kind, have, o, want, someOrigin())
		}
		h, err := DecodeHeader(buf)
		if err != nil || h.Kind != e.Kind || h.ID != e.ID || h.From != e.From || h.Origin != someOrigin() {
			t.Fatalf("header %+v, %v", h, err)
		}
	}
}

func TestEncodingIsCompact(t *testing.T) {
	b, err := AppendEvent(nil, someOrigin(), &bus.Event{Kind: bus.Commit, ID: 1000, From: 0, Tokens: []int32{1234}, By: []int8{0}, Pos: 300})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 16+OriginSize {
		t.Fatalf("one-token commit encodes to %d bytes", len(b))
	}
	b, _ = AppendEvent(nil, someOrigin(), &bus.Event{Kind: bus.Admit, ID: 1000, From: -1})
	if len(b) > 6+OriginSize {
		t.Fatalf("admit encodes to %d bytes", len(b))
	}
}

// TestCodecCoversEveryField fails when a field is added to a type the codec
// carries, so the encoding is extended (and its version bumped) with it.
func TestCodecCoversEveryField(t *testing.T) {
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[bus.Event]():     11,
		reflect.TypeFor[route.Message](): 17,
		reflect.TypeFor[route.Params]():  8,
		// History, PromptLen and Record are set by every model for its own
		// step.
		reflect.TypeFor[engine.Sampling]():  8 + 3,
		reflect.TypeFor[engine.Penalties](): 4,
	} {
		if typ.NumField() != n {
			t.Errorf("%v has %d fields, the codec carries %d: extend codec.go", typ, typ.NumField(), n)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := AppendEvent(nil, someOrigin(), sampleEvents()[3])
	huge := binary.AppendUvarint(header(bus.Commit, hasCommit, 1, 0, 0), MaxTokens) // claims 4M tokens in a tiny message
	noSender, noSeq := header(bus.Admit, 0, 1, 0), header(bus.Admit, 0, 1, 0)
	clear(noSender[1:9])
	clear(noSeq[seqOffset : seqOffset+8])
	cases := map[string][]byte{
		"empty":        nil,
		"short":        good[:1+OriginSize],
		"kind":         header(99, 0, 1, 0),
		"placed alone": header(bus.Admit, hasPlaced, 1, 0),
		"far endpoint": header(bus.Lost, hasEndpoint, append([]byte{1, 0}, binary.AppendVarint(nil, MaxEndpoint+1)...)...),
		"state alone":  header(bus.Admit, hasState, 1, 0),
		"spec alone":   header(bus.Admit, hasSpec, 1, 0),
		"truncated":    good[:len(good)-3],
		"trailing":     append(append([]byte(nil), good...), 0),
		"huge length":  huge,
		"bad from":     header(bus.Admit, 0, 1, 0x7f),
		"sender 0":     noSender,
		"sequence 0":   noSeq,
	}
	for name, b := range cases {
		if _, err := DecodeEvent(b, &bus.Event{}, intsState); !errors.Is(err, ErrDecode) || errors.Is(err, ErrVersion) {
			t.Errorf("%s: err %v, want ErrDecode", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"next version": append([]byte{Version + 1}, good[1:]...),
		// A version 3 admit, as the previous release sent it.
		"version 3": {3, byte(bus.Admit), 0, 1, 1},
	} {
		_, err := DecodeEvent(b, &bus.Event{}, intsState)
		if _, herr := DecodeHeader(b); !errors.Is(err, ErrVersion) || !errors.Is(herr, ErrVersion) || !errors.Is(err, ErrDecode) {
			t.Errorf("%s: err %v, header err %v, want ErrVersion", name, err, herr)
		}
	}
	if _, err := DecodeEvent(good, &bus.Event{}, nil); !errors.Is(err, ErrDecode) {
		t.Errorf("state without a factory: %v", err)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, e := range sampleEvents() {
		b, _ := AppendEvent(nil, someOrigin(), e)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e := &bus.Event{}
		o, err := DecodeEvent(b, e, intsState)
		if err != nil {
			return
		}
		// A decodable event re-encodes and decodes to the same event.
		again, err := AppendEvent(nil, o, e)
		if err != nil {
			t.Fatal(err)
		}
		e2 := &bus.Event{}
		o2, err := DecodeEvent(again, e2, intsState)
		if err != nil || o2 != o {
			t.Fatalf("re-encoded event does not decode to origin %+v: %+v, %v", o, o2, err)
		}
		third, err := AppendEvent(nil, o2, e2)
		if err != nil || !bytes.Equal(again, third) {
			t.Fatalf("unstable round trip (%v):\n%x\n%x", err, again, third)
		}
		// Decoded sizes never exceed what the input can describe.
		if len(e.Tokens) > len(b) || len(e.Msg.Tokens) > len(b) || len(e.Msg.Seen) > MaxModels {
			t.Fatalf("decoded %d/%d tokens from %d bytes", len(e.Tokens), len(e.Msg.Tokens), len(b))
		}
	})
}
