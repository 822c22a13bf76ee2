package server

import (
	"math"
	"strings"

	"github.com/tokenrouter/tokenrouter/engine"
)

// Log-probabilities: every output token's, by the model that produced it
// (the log-softmax of that model's own logits at that step, before
// penalties and temperature), with the most likely tokens at the
// position. Each entry also names the model.

// maxTopLogprobs bounds the most likely tokens reported per position.
const maxTopLogprobs = 20

// unknownLogprob stands for a token the runtime has no log-probability
// of (an algorithm placed a token no step sampled there), as OpenAI
// writes the log-probability of an impossible token.
const unknownLogprob = -9999.0

// askLogprobs validates the native log-probability fields into g.
func (g *genRequest) askLogprobs(nr *NativeRequest, names paramNames) *apiError {
	k := nr.TopLogprobsNum
	if pn := names.name("top_logprobs_num"); k < 0 || k > maxTopLogprobs {
		return badRequest(pn, "invalid_value", "%s must be between 0 and %d, got %d", pn, maxTopLogprobs, k)
	}
	if k > 0 && !nr.ReturnLogprob {
		pn := names.name("top_logprobs_num")
		return badRequest(pn, "invalid_value", "%s needs %s", pn, names.name("return_logprob"))
	}
	g.params.Sampling.Logprobs, g.params.Sampling.TopLogprobs = nr.ReturnLogprob, k
	return nil
}

// logprobValue is a log-probability for JSON (NaN: unknownLogprob).
func logprobValue(v float32) float64 {
	if math.IsNaN(float64(v)) {
		return unknownLogprob
	}
	return float64(v)
}

// tokenText is a token's text and bytes for log-probability entries.
func (g *genRequest) tokenText(id int32) (string, []int) {
	b := g.dep.text.piece(nil, id)
	bs := make([]int, len(b))
	for i, c := range b {
		bs[i] = int(c)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), bs
}

// modelName names model index i of g's preset.
func (g *genRequest) modelName(i int8) string {
	if int(i) >= 0 && int(i) < len(g.dep.models) {
		return g.dep.models[i].name
	}
	return ""
}

// nativeLogprob is one output token's entry of output_token_logprobs.
type nativeLogprob struct {
	ID      int32         `json:"id"`
	Logprob float64       `json:"logprob"`
	Model   string        `json:"model"`
	Top     []nativeTopLP `json:"top_logprobs,omitempty"`
}

type nativeTopLP struct {
	ID      int32   `json:"id"`
	Logprob float64 `json:"logprob"`
}

// nativeLogprobs are the entries of lps (produced by the models by).
func (g *genRequest) nativeLogprobs(lps []engine.Logprob, by []int8) []nativeLogprob {
	if lps == nil {
		return nil
	}
	out := make([]nativeLogprob, len(lps))
	for i, lp := range lps {
		out[i] = nativeLogprob{ID: lp.Token, Logprob: logprobValue(lp.Logprob), Model: g.modelName(by[i])}
		for _, t := range lp.Top {
			out[i].Top = append(out[i].Top, nativeTopLP{ID: t.Token, Logprob: logprobValue(t.Logprob)})
		}
	}
	return out
}

// chatLogprobs is OpenAI's chat choice logprobs object.
type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
	Refusal []chatLogprob `json:"refusal"`
}

// chatLogprob is one token of chatLogprobs; Model names the model that
// produced it (an extension).
type chatLogprob struct {
	Token       string      `json:"token"`
	Logprob     float64     `json:"logprob"`
	Bytes       []int       `json:"bytes"`
	TopLogprobs []chatTopLP `json:"top_logprobs"`
	Model       string      `json:"model,omitempty"`
}

type chatTopLP struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// chatLogprobs returns the logprobs object of lps, nil when the request
// did not ask for them.
func (g *genRequest) chatLogprobs(lps []engine.Logprob, by []int8) *chatLogprobs {
	if !g.params.Sampling.Logprobs {
		return nil
	}
	out := &chatLogprobs{Content: make([]chatLogprob, len(lps))}
	for i, lp := range lps {
		text, bs := g.tokenText(lp.Token)
		c := chatLogprob{Token: text, Logprob: logprobValue(lp.Logprob), Bytes: bs, TopLogprobs: []chatTopLP{}, Model: g.modelName(by[i])}
		for _, t := range lp.Top {
			tt, tb := g.tokenText(t.Token)
			c.TopLogprobs = append(c.TopLogprobs, chatTopLP{Token: tt, Logprob: logprobValue(t.Logprob), Bytes: tb})
		}
		out.Content[i] = c
	}
	return out
}

// completionLogprobs is the legacy completions logprobs object; Models
// names the model that produced each token (an extension).
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
	Models        []string             `json:"models"`
}

// completionLogprobs returns the logprobs object of lps whose text starts
// at offset, nil when the request did not ask for them.
func (g *genRequest) completionLogprobs(lps []engine.Logprob, by []int8, offset int) *completionLogprobs {
	if !g.params.Sampling.Logprobs {
		return nil
	}
	out := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}, Models: []string{}}
	for i, lp := range lps {
		text, _ := g.tokenText(lp.Token)
		out.Tokens = append(out.Tokens, text)
		out.TokenLogprobs = append(out.TokenLogprobs, logprobValue(lp.Logprob))
		top := map[string]float64{}
		for _, t := range lp.Top {
			tt, _ := g.tokenText(t.Token)
			if _, dup := top[tt]; !dup {
				top[tt] = logprobValue(t.Logprob)
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, offset)
		out.Models = append(out.Models, g.modelName(by[i]))
		offset += len(text)
	}
	return out
}
