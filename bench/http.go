package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
)

// IsURL reports whether a system name is a server's URL ("http://..." or
// "https://...", optionally as LABEL=URL): Setup.Build drives it with an
// HTTPSystem.
func IsURL(name string) bool {
	_, u := splitURL(name)
	return u != ""
}

// splitURL splits LABEL=URL (or a bare URL) into its label and URL; the
// URL is "" when name is no URL.
func splitURL(name string) (label, url string) {
	if strings.HasPrefix(name, "http://") || strings.HasPrefix(name, "https://") {
		return name, name
	}
	if l, u, ok := strings.Cut(name, "="); ok && (strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) {
		return l, u
	}
	return name, ""
}

// HTTPOptions configure HTTPSystem.
type HTTPOptions struct {
	// Model is the "model" every request names ("": the first model the
	// server lists at /v1/models).
	Model string
	// APIKey, if set, is sent as "Authorization: Bearer <key>".
	APIKey string
}

// HTTPSystem drives an OpenAI-compatible server: each request is a
// streamed POST /v1/completions (greedy, max_tokens and ignore_eos from the
// request, its routing seed as seed, usage asked for in the last chunk),
// with the prompt as text when it has text and as token ids otherwise. Each
// streamed chunk that carries text counts as one token when it arrives; a
// server may hold a token's text back (an incomplete UTF-8 sequence) and
// send it with a later token's, so the tokens the final usage reports
// beyond the chunks counted are added when the request ends. Streams carry
// no model attribution (every token reads as model 0's); LargeShare
// reports the servers' own account where they give one (TokenRouter's
// "routing" field).
type HTTPSystem struct {
	url, model, key string
	client          *http.Client
	ctx             context.Context
	cancel          context.CancelFunc
	wg              sync.WaitGroup
	nextID          atomic.Uint64
	large, total    atomic.Int64 // from finished requests' routing
}

// NewHTTPSystem connects to the server at base (its root or its /v1
// address); with no o.Model it asks the server for its models.
func NewHTTPSystem(ctx context.Context, base string, o HTTPOptions) (*HTTPSystem, error) {
	base = strings.TrimRight(base, "/")
	base = strings.TrimSuffix(strings.TrimSuffix(base, "/completions"), "/v1")
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       time.Minute,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
	h := &HTTPSystem{url: base + "/v1/completions", model: o.Model, key: o.APIKey, client: &http.Client{Transport: tr}}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	if h.model == "" {
		var err error
		if h.model, err = h.firstModel(ctx, base+"/v1/models"); err != nil {
			h.Close()
			return nil, err
		}
	}
	return h, nil
}

// firstModel returns the first model a server lists.
func (h *HTTPSystem) firstModel(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	h.auth(req)
	resp, err := h.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("bench: listing models: %w", err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("bench: listing models: %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return "", fmt.Errorf("bench: listing models: %s: %w", url, err)
	}
	if len(list.Data) == 0 || list.Data[0].ID == "" {
		return "", fmt.Errorf("bench: %s lists no model", url)
	}
	return list.Data[0].ID, nil
}

func (h *HTTPSystem) auth(req *http.Request) {
	if h.key != "" {
		req.Header.Set("Authorization", "Bearer "+h.key)
	}
}

// Model is the model the requests name.
func (h *HTTPSystem) Model() string { return h.model }

// completionRequest is the body of a streamed /v1/completions request.
type completionRequest struct {
	Model         string         `json:"model"`
	Prompt        any            `json:"prompt"`
	MaxTokens     int            `json:"max_tokens"`
	Temperature   float64        `json:"temperature"`
	Seed          uint64         `json:"seed"`
	IgnoreEOS     bool           `json:"ignore_eos"`
	Stream        bool           `json:"stream"`
	StreamOptions map[string]any `json:"stream_options"`
}

// completionChunk is what one streamed event may carry.
type completionChunk struct {
	Choices []struct {
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Routing *struct {
		LargeModelRatio float64 `json:"large_model_ratio"`
	} `json:"routing"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Submit admits a request with the prompt as token ids.
func (h *HTTPSystem) Submit(ctx context.Context, prompt []int32, p route.Params) (*stream.Stream, error) {
	return h.SubmitPrompt(ctx, Prompt{IDs: prompt}, p)
}

// SubmitPrompt admits a request: the stream ends when the server's stream
// does; cancelling ctx, Close or closing the stream cancels the request.
func (h *HTTPSystem) SubmitPrompt(ctx context.Context, prompt Prompt, p route.Params) (*stream.Stream, error) {
	body := completionRequest{Model: h.model, Prompt: prompt.Text, MaxTokens: p.MaxTokens, Temperature: float64(p.Sampling.Temperature),
		Seed: p.Seed, IgnoreEOS: p.IgnoreEOS, Stream: true, StreamOptions: map[string]any{"include_usage": true}}
	if prompt.Text == "" {
		body.Prompt = prompt.IDs
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(h.ctx, cancel)
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, h.url, bytes.NewReader(b))
	if err != nil {
		stop()
		cancel()
		return nil, fmt.Errorf("bench: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	h.auth(req)
	s := stream.New(h.nextID.Add(1), cancel)
	h.wg.Go(func() {
		defer stop()
		defer cancel()
		reason, err := h.receive(req, s)
		switch {
		case err != nil && rctx.Err() != nil:
			s.Finish(stream.Cancelled, rctx.Err())
		case err != nil:
			s.Finish(stream.Error, err)
		default:
			s.Finish(reason, nil)
		}
	})
	return s, nil
}

// receive runs one request and pushes its tokens to s as they arrive; it
// returns the finish reason.
func (h *HTTPSystem) receive(req *http.Request, s *stream.Stream) (string, error) {
	resp, err := h.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("bench: %s: %w", h.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return "", fmt.Errorf("bench: %s: %s: %s", h.url, resp.Status, bytes.TrimSpace(msg))
	}
	one, by := []int32{0}, []int8{0}
	counted, reason := 0, stream.Length
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			return reason, nil
		}
		var c completionChunk
		if err := json.Unmarshal(data, &c); err != nil {
			return "", fmt.Errorf("bench: %s: bad event %q: %w", h.url, data, err)
		}
		if c.Error != nil {
			return "", fmt.Errorf("bench: %s: %s", h.url, c.Error.Message)
		}
		for _, ch := range c.Choices {
			if ch.Text != "" {
				s.Push(one, by)
				counted++
			}
			if ch.FinishReason != nil {
				reason = *ch.FinishReason
			}
		}
		if c.Usage != nil {
			if more := c.Usage.CompletionTokens - counted; more > 0 {
				s.Push(make([]int32, more), make([]int8, more))
				counted += more
			}
			h.total.Add(int64(c.Usage.CompletionTokens))
			if c.Routing != nil {
				h.large.Add(int64(c.Routing.LargeModelRatio*float64(c.Usage.CompletionTokens) + 0.5))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("bench: %s: %w", h.url, err)
	}
	return "", fmt.Errorf("bench: %s: the stream ended without [DONE]", h.url)
}

// LargeShare is the share of tokens from models other than the first in
// the requests that finished so far, as the server accounted them; false
// when it gave no account.
func (h *HTTPSystem) LargeShare() (float64, bool) {
	t := h.total.Load()
	if t == 0 {
		return 0, false
	}
	return float64(h.large.Load()) / float64(t), true
}

// Close cancels the requests in flight, waits for them and closes idle
// connections.
func (h *HTTPSystem) Close() error {
	h.cancel()
	h.wg.Wait()
	h.client.CloseIdleConnections()
	return nil
}

// sharer is a System that accounts the large model's share itself.
type sharer interface {
	LargeShare() (float64, bool)
}
