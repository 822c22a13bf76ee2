package server

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// sse writes server-sent events: "data: <json>\n\n" per event and
// "data: [DONE]\n\n" at the end. Events are flushed per batch of tokens
// the runtime committed together (each token is its own event), by the
// end marker, and by error events.
type sse struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	opened bool
	buf    []byte
	// usage marks a stream that asked for usage (stream_options.
	// include_usage): as OpenAI sends it, the usage comes in a last chunk
	// of its own (no choices) before [DONE], and every other chunk has
	// "usage": null.
	usage bool
}

// usageCarrier is a streamed chunk that may hold the usage.
type usageCarrier interface {
	hasUsage() bool
}

func (r chatResponse) hasUsage() bool       { return r.Usage != nil }
func (r completionResponse) hasUsage() bool { return r.Usage != nil }

// includeUsage reports whether o asks for the usage.
func (o *streamOptions) includeUsage() bool { return o != nil && o.IncludeUsage }

func newSSE(w http.ResponseWriter) *sse {
	return &sse{w: w, rc: http.NewResponseController(w)}
}

// open sends the response headers (once).
func (e *sse) open() error {
	if e.opened {
		return nil
	}
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	e.w.WriteHeader(http.StatusOK)
	e.opened = true
	return e.flush()
}

// send writes one event holding v as JSON; flush sends what was written.
func (e *sse) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("sse: %w", err)
	}
	if c, ok := v.(usageCarrier); ok && e.usage && !c.hasUsage() && len(b) > 2 && b[len(b)-1] == '}' {
		b = append(b[:len(b)-1], `,"usage":null}`...) // the field omitted when unset
	}
	e.buf = append(append(append(e.buf[:0], "data: "...), b...), "\n\n"...)
	if _, err := e.w.Write(e.buf); err != nil {
		return fmt.Errorf("sse: %w", err)
	}
	return nil
}

// done writes the end marker.
func (e *sse) done() error {
	if _, err := e.w.Write([]byte("data: [DONE]\n\n")); err != nil {
		return fmt.Errorf("sse: %w", err)
	}
	return e.flush()
}

// flush sends everything written so far.
func (e *sse) flush() error {
	if err := e.rc.Flush(); err != nil {
		return fmt.Errorf("sse: flush: %w", err)
	}
	return nil
}

// fail ends the stream with an error event holding e (OpenAI's error
// object) and the end marker.
func (e *sse) fail(ae *apiError) error {
	if err := e.send(ae.body()); err != nil {
		return err
	}
	return e.done()
}
