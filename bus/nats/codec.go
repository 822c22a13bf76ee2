package nats

import (
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route"
)

// Version is the event encoding's version, the first byte of every
// encoded event. A decoder rejects any other version (ErrVersion).
//
// Version 4 added the origin (sender, sequence number, send time) after
// the version byte; version 5 the replicas (DESIGN §9): replicas'
// endpoints as senders, Msg.Placed, Event.Endpoint and the released and
// lost kinds.
const Version = 5

// OriginSize is the size of the encoded origin: Sender, Seq and Time as
// little-endian 64-bit numbers, right after the version byte.
const OriginSize = 24

// seqOffset is where the origin's sequence number starts in an encoded
// event.
const seqOffset = 1 + 8

// Origin says who sent an event and when. It travels inside the
// authenticated message, so on a keyed bus it is as trustworthy as the
// event: receivers use it to drop replayed messages.
type Origin struct {
	// Sender identifies the sending bus (one connection of one process
	// run): a random non-zero number chosen when it connects.
	Sender uint64
	// Seq numbers the sender's events from 1, across all subjects.
	Seq uint64
	// Time is the sender's clock when it sent the event, in Unix
	// milliseconds.
	Time int64
}

// Hard limits of the decoder: a hostile or corrupt message fails with an
// error before it can force an allocation beyond them.
const (
	// MaxTokens bounds a token or producer list (message or commit).
	MaxTokens = 1 << 22
	// MaxModels bounds the per-model positions of a message.
	MaxModels = 128
	// MaxEndpoint bounds an endpoint: the last replica of the last model.
	MaxEndpoint = bus.ReplicaStride*bus.MaxReplicas - 1
	// MaxState bounds an encoded algorithm state in bytes.
	MaxState = 1 << 24
	// MaxSchema bounds a request's output schema in bytes.
	MaxSchema = 1 << 20
	// MaxStopIDs bounds a request's stop tokens; MaxStops its stop
	// strings, each at most MaxStopBytes long.
	MaxStopIDs   = 1 << 10
	MaxStops     = 16
	MaxStopBytes = 1 << 10
	// MaxBias bounds the logit biases of a request.
	MaxBias = 1 << 20
	// MaxTopLogprobs bounds the top log-probabilities asked per token.
	MaxTopLogprobs = 1 << 10
	// MaxText bounds a finish reason or error text in bytes.
	MaxText = 1 << 16
)

// Section flags: which optional parts an encoded event carries.
const (
	hasMsg      = 1 << iota // Msg (peer messages)
	hasCommit               // Tokens, By, Pos, Logprobs (commits)
	hasText                 // Reason, Err (done)
	hasState                // Msg.State (only with hasMsg)
	hasFinish               // Msg.Finished
	hasSpec                 // Msg.Verify, Verdict, Epoch, Params.Speculate
	hasPlaced               // Msg.Placed (only with hasMsg)
	hasEndpoint             // Endpoint (lost)
	allFlags    = hasMsg | hasCommit | hasText | hasState | hasFinish | hasSpec | hasPlaced | hasEndpoint
)

// ErrDecode wraps every decoding error.
var ErrDecode = errors.New("bus/nats: bad event encoding")

// ErrVersion wraps the decoding errors of events in another encoding
// version, as a peer running another release sends. It wraps ErrDecode.
var ErrVersion = fmt.Errorf("%w: unsupported version", ErrDecode)

// AppendEvent appends the encoding of e sent from o to b. Fields an event
// does not use (zero) cost nothing beyond a flag bit.
func AppendEvent(b []byte, o Origin, e *bus.Event) ([]byte, error) {
	flags := eventFlags(e)
	b = append(b, Version)
	b = binary.LittleEndian.AppendUint64(b, o.Sender)
	b = binary.LittleEndian.AppendUint64(b, o.Seq)
	b = binary.LittleEndian.AppendUint64(b, uint64(o.Time))
	b = append(b, byte(e.Kind), flags)
	b = binary.AppendUvarint(b, e.ID)
	b = binary.AppendVarint(b, int64(e.From))
	if flags&hasMsg != 0 {
		var err error
		if b, err = appendMsg(b, &e.Msg, flags); err != nil {
			return nil, err
		}
	}
	if flags&hasCommit != 0 {
		b = binary.AppendVarint(b, int64(e.Pos))
		b = appendTokens(b, e.Tokens)
		b = appendBy(b, e.By)
		b = appendLogprobs(b, e.Logprobs)
	}
	if flags&hasText != 0 {
		b = appendText(b, e.Reason)
		b = appendText(b, e.Err)
	}
	if flags&hasEndpoint != 0 {
		b = binary.AppendVarint(b, int64(e.Endpoint))
	}
	return b, nil
}

// eventFlags returns the section flags for the parts e carries.
func eventFlags(e *bus.Event) byte {
	var flags byte
	m := &e.Msg
	if e.Kind == bus.Peer || !msgZero(m) {
		flags |= hasMsg
		if m.State != nil {
			flags |= hasState
		}
		if m.Finished {
			flags |= hasFinish
		}
		if len(m.Verify) > 0 || len(m.Verdict) > 0 || m.Epoch != 0 || m.Params.Speculate != 0 {
			flags |= hasSpec
		}
		if len(m.Placed) > 0 {
			flags |= hasPlaced
		}
	}
	if e.Endpoint != 0 {
		flags |= hasEndpoint
	}
	if len(e.Tokens) > 0 || len(e.By) > 0 || e.Pos != 0 || len(e.Logprobs) > 0 {
		flags |= hasCommit
	}
	if e.Reason != "" || e.Err != "" {
		flags |= hasText
	}
	return flags
}

// appendMsg encodes the message section; flags says whether the
// speculation fields follow.
func appendMsg(b []byte, m *route.Message, flags byte) ([]byte, error) {
	b = binary.AppendUvarint(b, m.ID)
	b = binary.AppendVarint(b, int64(m.From))
	b = binary.AppendVarint(b, int64(m.To))
	b = binary.AppendVarint(b, int64(m.Anchor))
	b = appendTokens(b, m.Tokens)
	b = appendBy(b, m.By)
	b = binary.AppendVarint(b, int64(m.PromptLen))
	b = binary.AppendVarint(b, int64(m.Committed))
	b = binary.AppendUvarint(b, uint64(len(m.Seen)))
	for _, s := range m.Seen {
		b = binary.AppendVarint(b, int64(s))
	}
	p := &m.Params
	b = appendSampling(b, p)
	b = appendLogprobs(b, m.Logprobs)
	b = binary.AppendUvarint(b, uint64(len(p.Schema)))
	b = append(b, p.Schema...)
	if err := checkStops(p); err != nil {
		return nil, err
	}
	b = appendStops(b, p)
	if m.State != nil {
		var err error
		if b, err = appendState(b, m.State); err != nil {
			return nil, err
		}
	}
	if flags&hasSpec != 0 {
		b = appendTokens(b, m.Verify)
		b = appendTokens(b, m.Verdict)
		b = binary.AppendUvarint(b, uint64(m.Epoch))
		b = binary.AppendVarint(b, int64(m.Params.Speculate))
	}
	if flags&hasPlaced != 0 {
		b = binary.AppendUvarint(b, uint64(len(m.Placed)))
		for _, r := range m.Placed {
			b = binary.AppendVarint(b, int64(r))
		}
	}
	return b, nil
}

// appendSampling encodes a request's token budget, sampling settings,
// ignore-EOS flag and seed.
func appendSampling(b []byte, p *route.Params) []byte {
	b = binary.AppendVarint(b, int64(p.MaxTokens))
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(p.Sampling.Temperature))
	b = binary.AppendVarint(b, int64(p.Sampling.TopK))
	b = binary.LittleEndian.AppendUint32(b, math.Float32bits(p.Sampling.TopP))
	b = binary.LittleEndian.AppendUint64(b, p.Sampling.Seed)
	b = appendPenalties(b, &p.Sampling)
	ign := byte(0)
	if p.IgnoreEOS {
		ign = 1
	}
	b = append(b, ign)
	return binary.LittleEndian.AppendUint64(b, p.Seed)
}

// appendStops encodes a request's stop tokens and strings.
func appendStops(b []byte, p *route.Params) []byte {
	b = appendTokens(b, p.StopIDs)
	b = binary.AppendUvarint(b, uint64(len(p.Stop)))
	for _, s := range p.Stop {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// msgZero reports whether m is the zero message (nothing to carry).
func msgZero(m *route.Message) bool {
	return m.ID == 0 && m.From == 0 && m.To == 0 && m.Anchor == 0 && m.PromptLen == 0 && m.Committed == 0 &&
		len(m.Tokens) == 0 && len(m.By) == 0 && len(m.Seen) == 0 && !m.Finished && paramsZero(&m.Params) && m.State == nil &&
		len(m.Logprobs) == 0 && len(m.Verify) == 0 && len(m.Verdict) == 0 && m.Epoch == 0 && len(m.Placed) == 0
}

// paramsZero reports whether p is the zero Params.
func paramsZero(p *route.Params) bool {
	sp := &p.Sampling
	return p.MaxTokens == 0 && !p.IgnoreEOS && p.Seed == 0 && p.Speculate == 0 && len(p.StopIDs) == 0 && len(p.Stop) == 0 && sp.Temperature == 0 && sp.TopK == 0 && sp.TopP == 0 &&
		sp.Seed == 0 && sp.MinP == 0 && !sp.Adjusts() && sp.Penalties.Repetition == 0 && !sp.Logprobs && sp.TopLogprobs == 0
}

// appendPenalties encodes min-p, the penalties and the log-probabilities
// asked for (not the per-step history and record, which every model has).
func appendPenalties(b []byte, sp *engine.Sampling) []byte {
	p := &sp.Penalties
	for _, f := range []float32{sp.MinP, p.Frequency, p.Presence, p.Repetition} {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	b = binary.AppendUvarint(b, uint64(len(p.Bias)))
	for _, x := range p.Bias {
		b = binary.AppendVarint(b, int64(x.Token))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x.Bias))
	}
	top := int64(-1)
	if sp.Logprobs {
		top = int64(sp.TopLogprobs)
	}
	return binary.AppendVarint(b, top)
}

// appendLogprobs encodes log-probabilities.
func appendLogprobs(b []byte, lps []engine.Logprob) []byte {
	b = binary.AppendUvarint(b, uint64(len(lps)))
	for _, lp := range lps {
		b = binary.AppendVarint(b, int64(lp.Pos))
		b = binary.AppendVarint(b, int64(lp.Token))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(lp.Logprob))
		b = binary.AppendUvarint(b, uint64(len(lp.Top)))
		for _, x := range lp.Top {
			b = binary.AppendVarint(b, int64(x.Token))
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x.Logprob))
		}
	}
	return b
}

// logprobs decodes what appendLogprobs wrote (nil for none).
func (d *decoder) logprobs() []engine.Logprob {
	n := d.length(math.MaxInt32, 7)
	if n == 0 {
		return nil
	}
	out := make([]engine.Logprob, n)
	for i := range out {
		lp := &out[i]
		lp.Pos = int32(d.int(0, math.MaxInt32))
		lp.Token = int32(d.int(0, math.MaxInt32))
		lp.Logprob = math.Float32frombits(d.u32())
		if k := d.length(MaxTopLogprobs, 5); k > 0 {
			lp.Top = make([]engine.TokenLogprob, k)
			for j := range lp.Top {
				lp.Top[j].Token = int32(d.int(0, math.MaxInt32))
				lp.Top[j].Logprob = math.Float32frombits(d.u32())
			}
		}
	}
	return out
}

// penalties decodes what appendPenalties wrote into sp.
func (d *decoder) penalties(sp *engine.Sampling) {
	p := &sp.Penalties
	for _, f := range []*float32{&sp.MinP, &p.Frequency, &p.Presence, &p.Repetition} {
		*f = math.Float32frombits(d.u32())
	}
	n := d.length(MaxBias, 5)
	p.Bias = nil // never reused: a copied event may share the old list
	if n > 0 {
		p.Bias = make([]engine.TokenBias, n)
	}
	for i := range p.Bias {
		p.Bias[i].Token = int32(d.int(0, math.MaxInt32))
		p.Bias[i].Bias = math.Float32frombits(d.u32())
	}
	top := d.int(-1, MaxTopLogprobs)
	sp.Logprobs, sp.TopLogprobs = top >= 0, max(top, 0)
}

func appendTokens(b []byte, t []int32) []byte {
	b = binary.AppendUvarint(b, uint64(len(t)))
	for _, x := range t {
		b = binary.AppendVarint(b, int64(x))
	}
	return b
}

func appendBy(b []byte, by []int8) []byte {
	b = binary.AppendUvarint(b, uint64(len(by)))
	for _, x := range by {
		b = append(b, byte(x))
	}
	return b
}

func appendText(b []byte, s string) []byte {
	if len(s) > MaxText {
		s = s[:MaxText]
	}
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendState appends a length-prefixed state, using AppendBinary when the
// state implements it (no intermediate allocation).
func appendState(b []byte, s route.State) ([]byte, error) {
	var raw []byte
	if a, ok := s.(encoding.BinaryAppender); ok {
		var err error
		if raw, err = a.AppendBinary(nil); err != nil {
			return nil, fmt.Errorf("bus/nats: encode state: %w", err)
		}
	} else {
		var err error
		if raw, err = s.MarshalBinary(); err != nil {
			return nil, fmt.Errorf("bus/nats: encode state: %w", err)
		}
	}
	if len(raw) > MaxState {
		return nil, fmt.Errorf("bus/nats: encoded state of %d bytes exceeds %d", len(raw), MaxState)
	}
	b = binary.AppendUvarint(b, uint64(len(raw)))
	return append(b, raw...), nil
}

// NewStateFunc returns an empty per-request state for the message m (its
// header and parameters are already decoded) to unmarshal into. It is the
// receiving algorithm's route.Stater.
type NewStateFunc func(m *route.Message) route.State

// Header is what DecodeHeader reads: enough to check where an event
// comes from before decoding it, and to name the request of an event whose
// body is corrupt.
type Header struct {
	// Origin is the event's sender, sequence number and send time.
	Origin Origin
	// Kind, ID and From are the event's.
	Kind bus.Kind
	ID   uint64
	From int
}

// DecodeHeader reads the version, origin, kind, request id and sender.
func DecodeHeader(b []byte) (Header, error) {
	d := decoder{b: b}
	h, _ := d.header()
	return h, d.err
}

// DecodeEvent decodes b into e, reusing e's slices, and returns its
// origin. newState supplies the empty state an encoded algorithm state is
// unmarshalled into; nil fails on any event carrying a state. On error e
// holds a partial event the caller should reset.
func DecodeEvent(b []byte, e *bus.Event, newState NewStateFunc) (Origin, error) {
	d := decoder{b: b}
	h, flags := d.header()
	e.Kind, e.ID, e.From = h.Kind, h.ID, h.From
	if flags&hasMsg != 0 {
		if err := d.msg(&e.Msg, flags, h.ID, newState); err != nil {
			return h.Origin, err
		}
	}
	if flags&hasCommit != 0 {
		e.Pos = d.int(math.MinInt32, math.MaxInt32)
		e.Tokens = d.tokens(e.Tokens[:0])
		e.By = d.by(e.By[:0])
		e.Logprobs = d.logprobs()
	}
	if flags&hasText != 0 {
		e.Reason = string(d.bytes(MaxText))
		e.Err = string(d.bytes(MaxText))
	}
	e.Endpoint = 0
	if flags&hasEndpoint != 0 {
		e.Endpoint = d.int(bus.Frontend, MaxEndpoint)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	return h.Origin, d.err
}

// msg decodes what appendMsg wrote into m, reusing m's slices. Decoding
// errors stick in d; the error returned is a state that could not be
// restored for request id.
func (d *decoder) msg(m *route.Message, flags byte, id uint64, newState NewStateFunc) error {
	m.ID = d.uvarint()
	m.From = d.int(-1, MaxModels)
	m.To = d.int(-1, MaxModels)
	m.Anchor = d.int(0, math.MaxInt32)
	m.Tokens = d.tokens(m.Tokens[:0])
	m.By = d.by(m.By[:0])
	m.PromptLen = d.int(0, math.MaxInt32)
	m.Committed = d.int(0, math.MaxInt32)
	n := d.length(MaxModels, 1)
	m.Seen = m.Seen[:0]
	for range n {
		m.Seen = append(m.Seen, d.int(0, math.MaxInt32))
	}
	p := &m.Params
	d.sampling(p)
	m.Logprobs = d.logprobs()
	p.Schema = string(d.bytes(MaxSchema))
	p.StopIDs, p.Stop = d.stops()
	m.Finished = flags&hasFinish != 0
	m.State = nil
	if flags&hasState != 0 {
		if err := d.state(m, id, newState); err != nil {
			return err
		}
	}
	m.Verify, m.Verdict, m.Epoch, p.Speculate = m.Verify[:0], m.Verdict[:0], 0, 0
	if flags&hasSpec != 0 {
		m.Verify = d.tokens(m.Verify)
		m.Verdict = d.tokens(m.Verdict)
		if ep := d.uvarint(); ep <= math.MaxUint32 {
			m.Epoch = uint32(ep)
		} else {
			d.fail("epoch")
		}
		p.Speculate = d.int(math.MinInt32, math.MaxInt32)
	}
	m.Placed = m.Placed[:0]
	if flags&hasPlaced != 0 {
		for range d.length(MaxModels, 1) {
			m.Placed = append(m.Placed, d.int(-1, bus.MaxReplicas-1))
		}
	}
	return nil
}

// sampling decodes what appendSampling wrote into p.
func (d *decoder) sampling(p *route.Params) {
	p.MaxTokens = d.int(math.MinInt32, math.MaxInt32)
	p.Sampling.Temperature = math.Float32frombits(d.u32())
	p.Sampling.TopK = d.int(math.MinInt32, math.MaxInt32)
	p.Sampling.TopP = math.Float32frombits(d.u32())
	p.Sampling.Seed = d.u64()
	d.penalties(&p.Sampling)
	switch d.byte() {
	case 0:
		p.IgnoreEOS = false
	case 1:
		p.IgnoreEOS = true
	default:
		d.fail("ignore-eos flag")
	}
	p.Seed = d.u64()
}

// state reads an encoded algorithm state and unmarshals it into a state
// from newState, setting m.State. Its errors (no factory, no state, bad
// state) name request id; a short or oversized read sticks in d instead.
func (d *decoder) state(m *route.Message, id uint64, newState NewStateFunc) error {
	raw := d.bytes(MaxState)
	if d.err != nil {
		return nil
	}
	if newState == nil {
		return fmt.Errorf("%w: request %d carries an algorithm state but the receiver has no state factory", ErrDecode, id)
	}
	st := newState(m)
	if st == nil {
		return fmt.Errorf("%w: request %d: the receiver's algorithm has no state", ErrDecode, id)
	}
	if err := st.UnmarshalBinary(raw); err != nil {
		return fmt.Errorf("%w: request %d: state: %w", ErrDecode, id, err)
	}
	m.State = st
	return nil
}

// decoder reads an encoded event; the first error sticks and every later
// read returns a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrDecode, what)
	}
	d.b = nil
}

func (d *decoder) header() (Header, byte) {
	if len(d.b) > 0 && d.b[0] != Version {
		// The version decides the layout of everything after it.
		d.err = fmt.Errorf("%w: version %d, want %d", ErrVersion, d.b[0], Version)
		d.b = nil
		return Header{}, 0
	}
	if len(d.b) < 1+OriginSize+2 {
		d.fail("short header")
		return Header{}, 0
	}
	o := Origin{
		Sender: binary.LittleEndian.Uint64(d.b[1:]),
		Seq:    binary.LittleEndian.Uint64(d.b[seqOffset:]),
		Time:   int64(binary.LittleEndian.Uint64(d.b[seqOffset+8:])),
	}
	k, flags := bus.Kind(d.b[1+OriginSize]), d.b[2+OriginSize]
	d.b = d.b[3+OriginSize:]
	if o.Sender == 0 || o.Seq == 0 {
		d.fail(fmt.Sprintf("origin %d/%d", o.Sender, o.Seq))
	}
	if k < bus.Peer || k > bus.Lost {
		d.fail(fmt.Sprintf("unknown kind %d", k))
	}
	if flags&^allFlags != 0 || (flags&(hasState|hasFinish|hasSpec|hasPlaced) != 0 && flags&hasMsg == 0) {
		d.fail(fmt.Sprintf("flags %#x", flags))
	}
	h := Header{Origin: o, Kind: k, ID: d.uvarint(), From: d.int(-1, MaxEndpoint)}
	if d.err != nil {
		return Header{}, 0
	}
	return h, flags
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// int reads a signed varint in [lo, hi].
func (d *decoder) int(lo, hi int64) int {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	if v < lo || v > hi {
		d.fail(fmt.Sprintf("value %d outside [%d, %d]", v, lo, hi))
		return 0
	}
	return int(v)
}

// length reads a count that may not exceed limit nor the bytes left (each
// element takes at least min bytes), so no count forces a large allocation
// from a short message.
func (d *decoder) length(limit, min int) int {
	v := d.uvarint()
	if d.err != nil {
		return 0
	}
	if v > uint64(limit) || v*uint64(min) > uint64(len(d.b)) {
		d.fail(fmt.Sprintf("length %d exceeds the limit or the message", v))
		return 0
	}
	return int(v)
}

func (d *decoder) tokens(dst []int32) []int32 {
	n := d.length(MaxTokens, 1)
	for range n {
		dst = append(dst, int32(d.int(math.MinInt32, math.MaxInt32)))
	}
	return dst
}

// checkStops refuses stops the decoder would refuse.
func checkStops(p *route.Params) error {
	if len(p.StopIDs) > MaxStopIDs || len(p.Stop) > MaxStops {
		return fmt.Errorf("bus/nats: %d stop tokens and %d stop strings (at most %d and %d)", len(p.StopIDs), len(p.Stop), MaxStopIDs, MaxStops)
	}
	for _, s := range p.Stop {
		if len(s) > MaxStopBytes {
			return fmt.Errorf("bus/nats: a stop string of %d bytes (at most %d)", len(s), MaxStopBytes)
		}
	}
	return nil
}

// stops decodes a request's stop tokens and strings into new slices (nil
// when there are none): the receiver keeps them with the request.
func (d *decoder) stops() (ids []int32, strs []string) {
	if n := d.length(MaxStopIDs, 1); n > 0 && d.err == nil {
		ids = make([]int32, 0, n)
		for range n {
			ids = append(ids, int32(d.int(math.MinInt32, math.MaxInt32)))
		}
	}
	if n := d.length(MaxStops, 1); n > 0 && d.err == nil {
		strs = make([]string, 0, n)
		for range n {
			strs = append(strs, string(d.bytes(MaxStopBytes)))
		}
	}
	return ids, strs
}

func (d *decoder) by(dst []int8) []int8 {
	n := d.length(MaxTokens, 1)
	if d.err != nil {
		return dst
	}
	for _, x := range d.b[:n] {
		dst = append(dst, int8(x))
	}
	d.b = d.b[n:]
	return dst
}

func (d *decoder) bytes(limit int) []byte {
	n := d.length(limit, 1)
	if d.err != nil {
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	x := d.b[0]
	d.b = d.b[1:]
	return x
}

func (d *decoder) u32() uint32 {
	if len(d.b) < 4 {
		d.fail("truncated")
		return 0
	}
	x := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return x
}

func (d *decoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	x := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return x
}
