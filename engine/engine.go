// Package engine defines the seam between the TokenRouter runtime and the
// math: an Engine runs one batched forward step over many sequences, each
// appending one or more tokens (an extend or a single-token decode), and
// returns per-sequence outputs. Implementations live in subpackages:
// engine/sim (a simulated model with a wall-clock latency profile) and
// engine/cpu (a pure-Go transformer for llama-family weights).
package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"strconv"
)

// SeqID names one sequence (one request's KV state) inside an engine.
type SeqID uint64

// Want selects the optional outputs a step returns for one sequence.
type Want uint8

const (
	// WantLogits asks for the logits of the last position.
	WantLogits Want = 1 << iota
	// WantHidden asks for the last hidden state (after the final norm) of the
	// last position.
	WantHidden
	// WantAllTokens asks for the sampled token at every appended position,
	// not only the last (speculative verification needs it).
	WantAllTokens
)

// Sampling holds the per-sequence sampling parameters. The zero value is
// greedy decoding.
type Sampling struct {
	// Temperature scales logits; 0 means greedy (argmax).
	Temperature float32
	// TopK keeps the K most likely tokens; 0 disables it.
	TopK int
	// TopP keeps the smallest set of tokens whose probability reaches P;
	// 0 or 1 disables it.
	TopP float32
	// Seed makes sampling reproducible. Each sequence draws from its own
	// stream derived from Seed and the position, so results do not depend
	// on how sequences are batched.
	Seed uint64
	// MinP drops the tokens whose probability (after Temperature) is below
	// MinP times the most likely token's; 0 disables it.
	MinP float32
	// Penalties adjust the logits before sampling (see Sampler).
	Penalties Penalties
	// History is every token of the sequence, those its KV cache holds
	// followed by the ones the step appends: the penalties count the tokens
	// before each sampled position. The runtime sets it for each step; it
	// is only read during Step.
	History []int32
	// PromptLen is how many tokens at the start of History are the
	// prompt (frequency and presence penalties count only the output).
	PromptLen int
	// Logprobs asks for the log-probability of every sampled token (the
	// log-softmax of the model's own logits, before penalties and
	// temperature) and of the TopLogprobs most likely tokens, appended to
	// Record.
	Logprobs    bool
	TopLogprobs int
	// Record receives the Logprobs of the tokens the step samples, one per
	// sampled position. The runtime sets it for each step; nil records
	// nothing.
	Record *[]Logprob
}

// Logprob is what a model gave the token it sampled at a position: its
// log-probability and the most likely tokens'.
type Logprob struct {
	// Pos is the token's position in the sequence.
	Pos int32
	// Token is the sampled token, Logprob its log-probability.
	Token   int32
	Logprob float32
	// Top are the most likely tokens, most likely first.
	Top []TokenLogprob
}

// TokenLogprob is one token's log-probability.
type TokenLogprob struct {
	Token   int32
	Logprob float32
}

// Penalties are the logit adjustments of a request. The zero value
// changes nothing.
type Penalties struct {
	// Frequency is subtracted from a token's logit once per time it
	// occurs in the output so far (OpenAI's frequency_penalty).
	Frequency float32
	// Presence is subtracted from the logit of every token that occurs in
	// the output so far (OpenAI's presence_penalty).
	Presence float32
	// Repetition divides the positive logits (multiplies the negative
	// ones) of the tokens in the prompt or the output so far; 0 and 1
	// disable it.
	Repetition float32
	// Bias is added to the logits of the tokens named (OpenAI's
	// logit_bias), in token order.
	Bias []TokenBias
}

// TokenBias is a logit bias for one token.
type TokenBias struct {
	Token int32
	Bias  float32
}

// Input is one sequence's part of a batched step.
type Input struct {
	// Seq names the sequence; a new SeqID starts an empty sequence.
	Seq SeqID
	// Tokens are appended to the sequence's KV cache (len 1 is a decode,
	// more is an extend). Must not be empty.
	Tokens []int32
	// Want selects optional outputs.
	Want Want
	// Sampling selects how the next token is drawn.
	Sampling Sampling
	// Allow, if set, restricts what may be sampled: the token drawn after
	// appended position i must have its bit set in Allow[i] (bit id%64 of
	// word id/64). A nil Allow[i], or i ≥ len(Allow), leaves that draw
	// free. The caller keeps every set non-empty.
	Allow [][]uint64
}

// Allowed reports whether id's bit is set in allow.
func Allowed(allow []uint64, id int32) bool {
	return int(id/64) < len(allow) && allow[id/64]&(1<<(id%64)) != 0
}

// Restrict sets the logits of the tokens not in allow to −∞, so that the
// greedy and sampled draws both keep to allow.
func Restrict(logits []float32, allow []uint64) {
	for w := 0; w*64 < len(logits); w++ {
		var bits uint64
		if w < len(allow) {
			bits = allow[w]
		}
		if bits == ^uint64(0) {
			continue
		}
		for k := w * 64; k < min(len(logits), w*64+64); k++ {
			if bits&(1<<(k%64)) == 0 {
				logits[k] = float32(math.Inf(-1))
			}
		}
	}
}

// AllowFor returns the mask of the draw after appended position i of in
// (nil: free).
func (in *Input) AllowFor(i int) []uint64 {
	if i < len(in.Allow) {
		return in.Allow[i]
	}
	return nil
}

// Output is one sequence's result of a step. Slices are owned by the engine
// and valid until the next call to Step.
type Output struct {
	// Token is the token sampled after the last appended position.
	Token int32
	// Tokens holds the token sampled after each appended position when
	// WantAllTokens was set (Tokens[len-1] == Token); nil otherwise.
	Tokens []int32
	// Logits of the last position, when WantLogits was set.
	Logits []float32
	// Hidden is the last hidden state of the last position, when WantHidden
	// was set.
	Hidden []float32
}

// Info describes a loaded model.
type Info struct {
	// Name is a human-readable model name.
	Name string
	// Arch is the architecture ("llama", "qwen2", "sim", ...).
	Arch string
	// VocabSize is the number of token ids.
	VocabSize int
	// HiddenSize is the width of the hidden state.
	HiddenSize int
	// ContextLength is the longest sequence the engine accepts.
	ContextLength int
	// BOS and EOS are the special token ids (-1 when absent).
	BOS, EOS int32
	// Simulated is true when the engine does not run real weights.
	Simulated bool
	// VocabHash is a hash of the model's vocabulary, the token strings in
	// id order (see VocabHash); "" when the engine has no vocabulary (the
	// simulated engine) or does not know it.
	VocabHash string `json:",omitempty"`
	// Kernels is the kernel level chosen for each class of operation, by
	// class name ("decode", "batch", "prompt", "attention"), for engines
	// that choose among kernels; nil otherwise. Read-only.
	Kernels map[string]string `json:",omitempty"`
}

// VocabHash returns the hash of a vocabulary that Info.VocabHash reports:
// the hex of the first 8 bytes of the SHA-256 of the tokens in id order,
// each written as its length (an unsigned varint) followed by its bytes.
// Two models share a vocabulary when their hashes are equal; an empty
// vocabulary hashes like any other.
func VocabHash(tokens []string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, t := range tokens {
		_, _ = h.Write(n[:binary.PutUvarint(n[:], uint64(len(t)))])
		_, _ = io.WriteString(h, t)
	}
	sum := h.Sum(nil)
	return hex.EncodeToString(sum[:8])
}

// Engine runs batched forward steps. An Engine is used by one goroutine at a
// time (the sub-server loop that owns it); implementations need not be safe
// for concurrent use.
type Engine interface {
	// Info reports model facts.
	Info() Info
	// Step appends each input's tokens to its sequence and fills out[i] for
	// in[i]. len(out) must be at least len(in). A sequence appears at most
	// once per batch. On error no sequence has advanced.
	Step(ctx context.Context, in []Input, out []Output) error
	// Truncate keeps the first n tokens of seq's KV cache and drops the rest.
	Truncate(seq SeqID, n int) error
	// Release frees seq's KV cache. Releasing an unknown sequence is a no-op.
	Release(seq SeqID)
	// Close frees the engine's resources.
	Close() error
}

// Embedder is an optional Engine capability: the model's input embedding
// of a token (the row of its token-embedding table), for routers that look
// at the token a model sampled (R2R). Like Step, it is called from the
// goroutine that owns the engine.
type Embedder interface {
	// Embed writes tok's input embedding (Info().HiddenSize values) to dst.
	Embed(tok int32, dst []float32)
}

// Pooling is how a Pooler combines the final hidden states of a
// sequence's positions into one vector. The values are llama.cpp's
// (llama_pooling_type), as GGUF files declare them in <arch>.pooling_type.
type Pooling int32

const (
	// PoolingNone keeps one vector per position; it has no one-vector
	// form, and Poolers pool such models by PoolingMean.
	PoolingNone Pooling = 0
	// PoolingMean averages every position's hidden state.
	PoolingMean Pooling = 1
	// PoolingCLS takes the first position's hidden state.
	PoolingCLS Pooling = 2
	// PoolingLast takes the last position's hidden state.
	PoolingLast Pooling = 3
	// PoolingRank marks a reranker, whose output is a relevance score
	// rather than an embedding; Pool refuses it.
	PoolingRank Pooling = 4
)

// String names p as llama.cpp's --pooling option does.
func (p Pooling) String() string {
	switch p {
	case PoolingNone:
		return "none"
	case PoolingMean:
		return "mean"
	case PoolingCLS:
		return "cls"
	case PoolingLast:
		return "last"
	case PoolingRank:
		return "rank"
	}
	return "pooling(" + strconv.Itoa(int(p)) + ")"
}

// Embeds reports whether Pool computes embeddings with p (mean, cls or
// last).
func (p Pooling) Embeds() bool {
	return p == PoolingMean || p == PoolingCLS || p == PoolingLast
}

// Pooler is an optional Engine capability: one vector for a whole token
// sequence (an embedding, for /v1/embeddings), the model's final hidden
// states (after the final norm, as WantHidden gives the last one) at every
// position, pooled by Pooling. Unlike the other capabilities it may be
// called from any goroutine, also while Step runs: it holds no sequence of
// the engine's and leaves their KV untouched. Close waits for a Pool in
// progress to stop.
type Pooler interface {
	// Pooling is how Pool pools (PoolingMean, PoolingCLS or PoolingLast;
	// another value means Pool refuses every input).
	Pooling() Pooling
	// Pool runs tokens through the model as a sequence of its own and
	// writes the pooled hidden state, Info().HiddenSize values, not
	// normalised, to dst. Tokens must hold 1 to Info().ContextLength ids
	// of the vocabulary (errors wrap ErrBadInput or ErrContextFull). It
	// returns ctx's error, soon, when ctx ends first.
	Pool(ctx context.Context, tokens []int32, dst []float32) error
}

// Turner is an optional Engine capability: an engine that takes turns
// with other engines on shared cores (time-shared placement), so that its
// steps run only inside a turn. Turn blocks until the engine's turn comes
// (or ctx ends) and returns the function that ends it; the steps taken
// between the two run without waiting again. A sub-server takes the turn
// before it forms its batch, so that what arrives while it waits joins the
// step. Like Step, it is called from the goroutine that owns the engine.
type Turner interface {
	Turn(ctx context.Context) (end func(), err error)
}

// KVPager is an optional Engine capability: an engine whose KV cache is
// held in fixed-size blocks (pages) reports how many sequences hold now,
// for metrics. Like Step, it is called from the goroutine that owns the
// engine.
type KVPager interface {
	KVBlocksInUse() int
}

// PrefixCacher is an optional Engine capability: an engine that shares the
// KV cache of common prompt prefixes between sequences reports, for
// metrics, the tokens of the sequences that looked the cache up and the
// tokens found there. Like Step, it is called from the goroutine that owns
// the engine.
type PrefixCacher interface {
	PrefixCacheStats() (looked, hit uint64, idleBlocks int)
}

// Capability returns e's optional capability T, looking through engines
// that wrap another (a method Unwrap() Engine), so that a wrapper need not
// forward every capability: the innermost engine that has it answers.
func Capability[T any](e Engine) (T, bool) {
	for e != nil {
		if c, ok := e.(T); ok {
			return c, true
		}
		u, ok := e.(interface{ Unwrap() Engine })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	var zero T
	return zero, false
}

// Errors shared by engines; wrap them with %w so callers can match.
var (
	// ErrContextFull reports a sequence that would exceed the context length.
	ErrContextFull = errors.New("engine: sequence exceeds context length")
	// ErrOutOfMemory reports a KV cache budget that is exhausted.
	ErrOutOfMemory = errors.New("engine: KV cache budget exceeded")
	// ErrBadInput reports a malformed step input.
	ErrBadInput = errors.New("engine: bad step input")
)
