// Package stream carries one request's output from the runtime to its
// caller: committed tokens as they happen (with the model that produced
// each), then a final reason. Every serving system in TokenRouter — the
// routed runtime and the baselines — returns its output as a Stream, so the
// HTTP layer and the benchmarks treat them alike.
package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/tokenrouter/tokenrouter/engine"
)

// Finish reasons.
const (
	// Length means the token limit was reached.
	Length = "length"
	// Stop means the model produced an end-of-sequence token.
	Stop = "stop"
	// Cancelled means the caller cancelled the request.
	Cancelled = "cancelled"
	// Error means the request failed; Recv returns the error.
	Error = "error"
)

// ErrCancelled is returned by Recv and Wait for a cancelled request.
var ErrCancelled = errors.New("request cancelled")

// Chunk is what one Recv returns.
type Chunk struct {
	// Tokens are newly committed tokens.
	Tokens []int32
	// By[i] is the index of the model that produced Tokens[i].
	By []int8
	// Logprobs[i] is Tokens[i]'s log-probability (when the request asked
	// for them; nil otherwise).
	Logprobs []engine.Logprob
	// Done is set on the last chunk.
	Done bool
	// Reason says why the request ended (set with Done).
	Reason string
}

// Stream is one request's output. The producer calls Push and Finish; one
// consumer calls Recv or Wait. The buffer grows as tokens arrive, so a slow
// consumer never blocks the runtime.
type Stream struct {
	// ID names the request.
	ID uint64

	mu     sync.Mutex
	toks   []int32 // committed, not yet received
	by     []int8
	lps    []engine.Logprob
	done   bool
	eof    bool
	reason string
	err    error
	sig    chan struct{}
	cancel func()
}

// New returns a stream for request id. cancel, if not nil, is called once
// by Close when the stream has not finished.
func New(id uint64, cancel func()) *Stream {
	return &Stream{ID: id, sig: make(chan struct{}, 1), cancel: cancel}
}

// Push appends committed tokens. It never blocks.
func (s *Stream) Push(toks []int32, by []int8) { s.PushLogprobs(toks, by, nil) }

// PushLogprobs is Push for a request that asked for log-probabilities:
// lps[i] belongs to toks[i].
func (s *Stream) PushLogprobs(toks []int32, by []int8, lps []engine.Logprob) {
	s.mu.Lock()
	if !s.done {
		s.toks = append(s.toks, toks...)
		s.by = append(s.by, by...)
		s.lps = append(s.lps, lps...)
	}
	s.mu.Unlock()
	s.wake()
}

// Finish ends the stream with a reason; err is set for Error. Only the
// first Finish counts; it reports whether this call finished the stream.
func (s *Stream) Finish(reason string, err error) bool {
	s.mu.Lock()
	first := !s.done
	if first {
		s.done, s.reason, s.err = true, reason, err
	}
	s.mu.Unlock()
	s.wake()
	return first
}

func (s *Stream) wake() {
	select {
	case s.sig <- struct{}{}:
	default:
	}
}

// Recv waits for new tokens or the end. It fills c (reusing its slices) and
// returns nil; the last chunk has Done set, and later calls return io.EOF.
// A failed request returns its error, a cancelled one ErrCancelled.
func (s *Stream) Recv(ctx context.Context, c *Chunk) error {
	for {
		s.mu.Lock()
		if s.eof {
			s.mu.Unlock()
			return io.EOF
		}
		if len(s.toks) > 0 || s.done {
			c.Tokens = append(c.Tokens[:0], s.toks...)
			c.By = append(c.By[:0], s.by...)
			c.Logprobs = append(c.Logprobs[:0], s.lps...)
			// Delivered tokens are dropped, so a long stream read with
			// Recv holds (and allocates) nothing in steady state.
			s.toks, s.by, s.lps = s.toks[:0], s.by[:0], s.lps[:0]
			c.Done, c.Reason = s.done, s.reason
			err := s.errLocked()
			if s.done {
				s.eof = true
			}
			s.mu.Unlock()
			return err
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream %d: %w", s.ID, ctx.Err())
		case <-s.sig:
		}
	}
}

func (s *Stream) errLocked() error {
	switch {
	case !s.done:
		return nil
	case s.reason == Cancelled:
		if s.err != nil {
			return fmt.Errorf("%w: %w", ErrCancelled, s.err)
		}
		return ErrCancelled
	case s.err != nil:
		return s.err
	}
	return nil
}

// Result is a whole request's output.
type Result struct {
	// Tokens are all committed tokens.
	Tokens []int32
	// By[i] is the model that produced Tokens[i].
	By []int8
	// Reason says why the request ended.
	Reason string
}

// Wait collects the output not yet taken by Recv (all of it when Recv was
// never called). On failure it returns what was committed so far along with
// the error.
func (s *Stream) Wait(ctx context.Context) (Result, error) {
	for {
		s.mu.Lock()
		if s.done {
			r := Result{Tokens: s.toks, By: s.by, Reason: s.reason}
			err := s.errLocked()
			s.toks, s.by, s.eof = nil, nil, true
			s.mu.Unlock()
			return r, err
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return Result{}, fmt.Errorf("stream %d: %w", s.ID, ctx.Err())
		case <-s.sig:
		}
	}
}

// Close cancels the request if it has not finished. It is safe to call
// more than once.
func (s *Stream) Close() {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if !done && s.cancel != nil {
		s.cancel()
	}
}
