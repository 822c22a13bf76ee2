package eval

import (
	"context"
	"errors"
	"fmt"

	"github.com/tokenrouter/tokenrouter/engine"
)

// Score is the large model's view of one response, teacher-forced: the
// large model reads the prompt and the response, and at every response
// position its greedy token and its log-probability of the token the
// response has there are compared with that token.
type Score struct {
	// Positions is the number of response tokens scored.
	Positions int `json:"positions"`
	// Agree counts the positions whose token is the large model's greedy
	// token (the argmax of its logits, lowest id on ties) after the same
	// prefix.
	Agree int `json:"agree"`
	// LogLik is the sum over the positions of the large model's natural
	// log-probability of the response's token.
	LogLik float64 `json:"loglik"`
}

// Measures summarise Scores over a set of responses.
type Measures struct {
	// Agreement is the mean over responses of each response's share of
	// positions where its token is the large model's greedy token.
	Agreement float64 `json:"agreement"`
	// LogLik is the mean over responses of each response's mean
	// log-probability per token under the large model, in nats.
	LogLik float64 `json:"llm_loglik"`
	// Responses is how many responses had at least one token (empty ones
	// are not scored).
	Responses int `json:"responses"`
}

// Summarize averages scores per response. Responses without tokens are
// left out; with none left, Responses is 0 and the measures are 0.
func Summarize(scores []Score) Measures {
	var m Measures
	for _, s := range scores {
		if s.Positions == 0 {
			continue
		}
		m.Agreement += float64(s.Agree) / float64(s.Positions)
		m.LogLik += s.LogLik / float64(s.Positions)
		m.Responses++
	}
	if m.Responses == 0 {
		return Measures{}
	}
	m.Agreement /= float64(m.Responses)
	m.LogLik /= float64(m.Responses)
	return m
}

// Judge scores responses with the large model's engine. It owns the
// engine's sequences while it runs; the engine is the caller's (Judge does
// not close it) and must not be stepping elsewhere at the same time.
type Judge struct {
	// Engine is the large model.
	Engine engine.Engine
	// Batch bounds how many responses are scored in one engine step (0:
	// 16).
	Batch int
	// next is the next sequence id to use.
	next engine.SeqID
}

// Score teacher-forces every response after its prompt through the large
// model, the responses of a batch side by side: one extend of the prompts,
// then one decode step per response position, each asking for the logits
// that predict the next response token. outputs[i] is the response to
// prompts[i]; every prompt must be non-empty.
func (j *Judge) Score(ctx context.Context, prompts, outputs [][]int32) ([]Score, error) {
	if len(prompts) != len(outputs) {
		return nil, fmt.Errorf("eval: judge: %d prompts for %d outputs", len(prompts), len(outputs))
	}
	vocab := j.Engine.Info().VocabSize
	for i := range prompts {
		if len(prompts[i]) == 0 {
			return nil, fmt.Errorf("eval: judge: prompt %d is empty", i)
		}
		for _, t := range outputs[i] {
			if t < 0 || int(t) >= vocab {
				return nil, fmt.Errorf("eval: judge: response %d has token %d outside the vocabulary (%d)", i, t, vocab)
			}
		}
	}
	batch := j.Batch
	if batch <= 0 {
		batch = 16
	}
	scores := make([]Score, len(prompts))
	for lo := 0; lo < len(prompts); lo += batch {
		hi := min(lo+batch, len(prompts))
		if err := j.scoreBatch(ctx, prompts[lo:hi], outputs[lo:hi], scores[lo:hi]); err != nil {
			return nil, err
		}
	}
	return scores, nil
}

// scoreBatch scores one batch of responses into scores.
func (j *Judge) scoreBatch(ctx context.Context, prompts, outputs [][]int32, scores []Score) error {
	seqs := make([]engine.SeqID, len(prompts))
	for i := range seqs {
		j.next++
		seqs[i] = j.next
	}
	defer func() {
		for _, s := range seqs {
			j.Engine.Release(s)
		}
	}()
	in := make([]engine.Input, 0, len(prompts))
	idx := make([]int, 0, len(prompts))
	out := make([]engine.Output, len(prompts))
	// Step k appends what precedes response position k: the prompt at
	// k = 0, response token k-1 after; the logits it returns predict
	// position k.
	for k := 0; ; k++ {
		in, idx = in[:0], idx[:0]
		for i, o := range outputs {
			if k >= len(o) {
				continue
			}
			toks := prompts[i]
			if k > 0 {
				toks = o[k-1 : k]
			}
			in = append(in, engine.Input{Seq: seqs[i], Tokens: toks, Want: engine.WantLogits})
			idx = append(idx, i)
		}
		if len(in) == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("eval: judge: %w", err)
		}
		if err := j.Engine.Step(ctx, in, out); err != nil {
			return fmt.Errorf("eval: judge: position %d: %w", k, err)
		}
		for n, i := range idx {
			lg := out[n].Logits
			if len(lg) == 0 {
				return errors.New("eval: judge: the engine returned no logits")
			}
			tok := outputs[i][k]
			if int(tok) >= len(lg) {
				return fmt.Errorf("eval: judge: token %d outside the engine's %d logits", tok, len(lg))
			}
			s := &scores[i]
			s.Positions++
			if engine.Argmax(lg) == tok {
				s.Agree++
			}
			s.LogLik += engine.LogProb(lg, tok)
		}
	}
}
