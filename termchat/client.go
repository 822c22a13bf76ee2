package termchat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Bounds on what a server sends back: one streamed event, an error body,
// the model list.
const (
	maxEventBytes  = 1 << 20
	maxErrorBytes  = 64 << 10
	maxModelsBytes = 4 << 20
)

// client speaks a server's OpenAI API: the model list and streamed chat
// completions.
type client struct {
	base, key string
	http      *http.Client
}

// preset is one entry of /v1/models: a name clients put in "model", and,
// from a TokenRouter server, the models behind it in routing order.
type preset struct {
	ID          string `json:"id"`
	Algorithm   string `json:"algorithm"`
	Description string `json:"description"`
	Context     int    `json:"context_length"`
	Models      []struct {
		Name string `json:"name"`
	} `json:"models"`
}

// modelNames are the names of the models behind p.
func (p preset) modelNames() []string {
	out := make([]string, 0, len(p.Models))
	for _, m := range p.Models {
		out = append(out, clean(m.Name))
	}
	return out
}

// message is one turn of the conversation.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatRequest is the body of a streamed chat completion. Logprobs is
// always asked for: each token's entry names the model that produced it.
type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []message     `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
	Logprobs      bool          `json:"logprobs"`
	Temperature   *float64      `json:"temperature,omitempty"`
	TopP          *float64      `json:"top_p,omitempty"`
	MaxTokens     *int          `json:"max_tokens,omitempty"`
	Seed          *uint64       `json:"seed,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// chunk is one streamed event: text with the models of its tokens, or
// the end's usage and routing counts, or an error.
type chunk struct {
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		Logprobs *struct {
			Content []struct {
				Model string `json:"model"`
			} `json:"content"`
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Routing *struct {
		TokensByModel map[string]int `json:"tokens_by_model"`
	} `json:"routing"`
	Error *apiError `json:"error"`
}

// apiError is an OpenAI error object, with the HTTP status that brought
// it (0 in a stream).
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param"`
	status  int
}

// tooLong reports whether err is the server refusing a conversation that
// does not fit the model's context (400 on messages or max_tokens).
func tooLong(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.status == http.StatusBadRequest && (ae.Param == "messages" || ae.Param == "max_tokens")
}

func (e *apiError) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%s (%s)", e.Message, e.Param)
	}
	return e.Message
}

// piece is what the stream delivers to its caller: text and the model
// of each token that wrote it (several for one piece are possible).
type piece struct {
	text   string
	models []string
}

// result is what a finished stream reports at its end.
type result struct {
	finish        string
	promptTokens  int
	outputTokens  int
	tokensByModel map[string]int // nil when the server sent no routing counts
}

// do sends a request with the key and returns a 200 response; any other
// status becomes an error holding the server's message.
func (c *client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encoding the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	var eb struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(raw, &eb) == nil && eb.Error != nil && eb.Error.Message != "" {
		eb.Error.status = resp.StatusCode
		return nil, fmt.Errorf("%s: %w", resp.Status, eb.Error)
	}
	return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(raw)))
}

// presets lists the server's presets.
func (c *client) presets(ctx context.Context) ([]preset, error) {
	resp, err := c.do(ctx, http.MethodGet, "/v1/models", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list struct {
		Data []preset `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxModelsBytes)).Decode(&list); err != nil {
		return nil, fmt.Errorf("GET /v1/models: %w", err)
	}
	return list.Data, nil
}

// stream runs one streamed chat completion, calling on for each piece of
// text as it arrives. Cancelling ctx closes the connection, which ends the
// request on the server.
func (c *client) stream(ctx context.Context, req chatRequest, on func(piece)) (result, error) {
	req.Stream, req.StreamOptions.IncludeUsage, req.Logprobs = true, true, true
	resp, err := c.do(ctx, http.MethodPost, "/v1/chat/completions", req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	var res result
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue // blank separators, comments, other fields
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			return res, nil
		}
		var ch chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return res, fmt.Errorf("a streamed event: %w", err)
		}
		if ch.Error != nil {
			return res, ch.Error
		}
		res.add(&ch, on)
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("reading the stream: %w", err)
	}
	return res, errors.New("the stream ended without its end marker")
}

// add takes in one chunk: its text goes to on, its counts to r.
func (r *result) add(ch *chunk, on func(piece)) {
	for _, c := range ch.Choices {
		var p piece
		p.text = c.Delta.Content
		if c.Logprobs != nil {
			for _, lp := range c.Logprobs.Content {
				p.models = append(p.models, lp.Model)
			}
		}
		if p.text != "" || len(p.models) > 0 {
			on(p)
		}
		if c.FinishReason != nil {
			r.finish = *c.FinishReason
		}
	}
	if ch.Usage != nil {
		r.promptTokens, r.outputTokens = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
	}
	if ch.Routing != nil && ch.Routing.TokensByModel != nil {
		r.tokensByModel = ch.Routing.TokensByModel
	}
}

// newHTTPClient is the chat's HTTP client: its own transport, so that
// closing the session closes its connections.
func newHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.IdleConnTimeout = time.Minute
	return &http.Client{Transport: tr}
}
