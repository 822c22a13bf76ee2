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

func sampleEvents() []*bus.Event {
	st := route.Ints{3, -7, 1 << 40}
	return []*bus.Event{
		{Kind: bus.Admit, ID: 1, From: bus.Frontend},
		{Kind: bus.Finish, ID: 1 << 60, From: 3},
		{Kind: bus.Cancel, ID: 9, From: bus.Frontend},
		{Kind: bus.Peer, ID: 42, From: 0, Msg: route.Message{
			ID: 42, From: 0, To: 1, Anchor: 5, Tokens: []int32{1, 2, 31999, -1}, By: []int8{-1, -1, 0, 1},
			PromptLen: 2, Committed: 3, Seen: []int{5, 2}, Finished: true,
			Params: route.Params{MaxTokens: 100, IgnoreEOS: true, Seed: 1<<63 + 5,
				Sampling: engine.Sampling{Temperature: 0.7, TopK: 40, TopP: 0.95, Seed: 77}},
			State: &st,
		}},
		{Kind: bus.Peer, ID: 43, From: bus.Frontend, Msg: route.Message{ID: 43, From: -1, Tokens: []int32{1}, By: []int8{-1}, Seen: []int{0, 0}}},
		{Kind: bus.Peer, ID: 44, From: 0, Msg: route.Message{ID: 44, From: 0, To: 1, Anchor: 3, Tokens: []int32{8, 9}, By: []int8{0, 0},
			Seen: []int{5, 3}, Verify: []int32{5}, Epoch: 2, Params: route.Params{MaxTokens: 9, Speculate: 4}}},
		{Kind: bus.Peer, ID: 44, From: 1, Msg: route.Message{ID: 44, From: 1, To: 0, Verify: []int32{5, 8}, Verdict: []int32{17, 3}, Epoch: 2}},
		{Kind: bus.Commit, ID: 7, From: 1, Tokens: []int32{10, 11}, By: []int8{0, 1}, Pos: 12},
		{Kind: bus.Done, ID: 7, From: 1, Reason: "error", Err: "engine: boom"},
	}
}

// normalise makes nil and empty slices compare equal.
func normalise(e *bus.Event) bus.Event {
	c := *e
	for _, s := range []any{&c.Tokens, &c.By, &c.Msg.Tokens, &c.Msg.By, &c.Msg.Seen, &c.Msg.Verify, &c.Msg.Verdict} {
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
		buf, err = AppendEvent(buf[:0], e)
		if err != nil {
			t.Fatal(err)
		}
		got.Reset()
		if err := DecodeEvent(buf, got, intsState); err != nil {
			t.Fatalf("%v: %v", e.Kind, err)
		}
		if want, have := normalise(e), normalise(got); !reflect.DeepEqual(want, have) {
			t.Fatalf("%v round trip:\n got %+v\nwant %+v", e.Kind, have, want)
		}
		h, err := DecodeHeader(buf)
		if err != nil || h.Kind != e.Kind || h.ID != e.ID || h.From != e.From {
			t.Fatalf("header %+v, %v", h, err)
		}
	}
}

func TestEncodingIsCompact(t *testing.T) {
	b, err := AppendEvent(nil, &bus.Event{Kind: bus.Commit, ID: 1000, From: 0, Tokens: []int32{1234}, By: []int8{0}, Pos: 300})
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 16 {
		t.Fatalf("one-token commit encodes to %d bytes", len(b))
	}
	b, _ = AppendEvent(nil, &bus.Event{Kind: bus.Admit, ID: 1000, From: -1})
	if len(b) > 6 {
		t.Fatalf("admit encodes to %d bytes", len(b))
	}
}

// TestCodecCoversEveryField fails when a field is added to a type the codec
// carries, so the encoding is extended (and its version bumped) with it.
func TestCodecCoversEveryField(t *testing.T) {
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[bus.Event]():     10,
		reflect.TypeFor[route.Message](): 16,
		reflect.TypeFor[route.Params]():  6,
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
	good, _ := AppendEvent(nil, sampleEvents()[3])
	huge := []byte{Version, byte(bus.Commit), hasCommit, 1, 0, 0}
	huge = binary.AppendUvarint(huge, MaxTokens) // claims 4M tokens in a tiny message
	cases := map[string][]byte{
		"empty":       nil,
		"version":     append([]byte{Version + 1}, good[1:]...),
		"kind":        {Version, 99, 0, 1, 0},
		"flags":       {Version, byte(bus.Admit), 0x80, 1, 0},
		"state alone": {Version, byte(bus.Admit), hasState, 1, 0},
		"spec alone":  {Version, byte(bus.Admit), hasSpec, 1, 0},
		"truncated":   good[:len(good)-3],
		"trailing":    append(append([]byte(nil), good...), 0),
		"huge length": huge,
		"bad from":    {Version, byte(bus.Admit), 0, 1, 0x7f},
	}
	for name, b := range cases {
		if err := DecodeEvent(b, &bus.Event{}, intsState); !errors.Is(err, ErrDecode) {
			t.Errorf("%s: err %v, want ErrDecode", name, err)
		}
	}
	if err := DecodeEvent(good, &bus.Event{}, nil); !errors.Is(err, ErrDecode) {
		t.Errorf("state without a factory: %v", err)
	}
}

func FuzzDecodeEvent(f *testing.F) {
	for _, e := range sampleEvents() {
		b, _ := AppendEvent(nil, e)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e := &bus.Event{}
		if err := DecodeEvent(b, e, intsState); err != nil {
			return
		}
		// A decodable event re-encodes and decodes to the same event.
		again, err := AppendEvent(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		e2 := &bus.Event{}
		if err := DecodeEvent(again, e2, intsState); err != nil {
			t.Fatalf("re-encoded event does not decode: %v", err)
		}
		third, err := AppendEvent(nil, e2)
		if err != nil || !bytes.Equal(again, third) {
			t.Fatalf("unstable round trip (%v):\n%x\n%x", err, again, third)
		}
		// Decoded sizes never exceed what the input can describe.
		if len(e.Tokens) > len(b) || len(e.Msg.Tokens) > len(b) || len(e.Msg.Seen) > MaxModels {
			t.Fatalf("decoded %d/%d tokens from %d bytes", len(e.Tokens), len(e.Msg.Tokens), len(b))
		}
	})
}
