// Package route is TokenRouter's programming interface for token-level
// routing algorithms: "program per request, execute per model".
//
// An algorithm is written as one request's path between models. After every
// engine step the runtime calls Route with the step's results (batched, so a
// router network can evaluate the whole batch at once); each Decision says
// which token to keep and which model steps the request next. When a request
// moves, the runtime builds a Message (the token suffix the peer has not
// seen, a position anchor, the committed length, the algorithm's per-request
// State) and the optional Sender and Receiver hooks let an algorithm adjust
// what travels and how it is applied. Algorithms never see queues, batches,
// threads or KV memory. An algorithm whose routed positions hand exactly
// one token back (R2R-shaped) may declare it (Speculable): the runtime then
// speculates past those positions without changing the output.
package route

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tokenrouter/tokenrouter/engine"
)

// NoToken in Decision.Token drops the token sampled by this step.
const NoToken int32 = -1

// Params are a request's generation parameters; they travel with it.
type Params struct {
	// MaxTokens bounds the committed output length.
	MaxTokens int
	// Sampling is passed to every engine step of the request.
	Sampling engine.Sampling
	// IgnoreEOS keeps generating past an end-of-sequence token.
	IgnoreEOS bool
	// Seed seeds the algorithm's random decisions for this request.
	Seed uint64
	// Schema, if set, is the JSON schema the output must match
	// (constrain.Compile: `{"type":"object"}` for any JSON object); every
	// model the request visits masks its draws to it.
	Schema string
	// StopIDs end the output like an end-of-sequence token (not written,
	// finish reason "stop"), whatever IgnoreEOS says: the chat template's
	// end tokens and the request's stop_token_ids.
	StopIDs []int32
	// Stop ends the output at the token that completes any of these
	// strings (finish reason "stop"); the text is cut before the string
	// where it is rendered. A sub-server without the model's token texts
	// leaves stop strings to the front end.
	Stop []string
	// Speculate overrides the deployment's speculation depth bound for
	// this request (speculative continuation, see Speculable): 0 keeps
	// the deployment's setting, a negative value turns speculation off, n
	// > 0 lets the request run at most n tokens past its oldest unverified
	// routed position. It has no effect when the deployment turned
	// speculation off or the algorithm did not opt in.
	Speculate int
}

// State is an algorithm's per-request state. It must survive a binary
// round trip: across processes it travels inside peer messages.
type State interface {
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// Request is the algorithm's read-only view of one request on one model.
// The runtime owns it; algorithms read fields and may change only State.
type Request struct {
	// ID names the request system-wide.
	ID uint64
	// Params are the request's generation parameters.
	Params Params
	// Tokens is the sequence as this model knows it: the prompt followed by
	// the output so far, including tokens not yet committed (drafts).
	Tokens []int32
	// By[i] is the model that produced Tokens[i] (-1 for prompt tokens).
	By []int8
	// PromptLen is the number of prompt tokens at the start of Tokens.
	PromptLen int
	// Committed is the length of the final prefix of Tokens.
	Committed int
	// Appended is how many tokens the last step appended (1 for a decode).
	Appended int
	// State is the algorithm's per-request state (nil when stateless).
	State State
}

// Pieces returns a token's text as bytes (nil: unknown), for stop strings.
type Pieces func(id int32) []byte

// CommitEnd says how far a commit of r's tokens may go: up to len(Tokens),
// cut at the token limit, before an end-of-sequence token (eos < 0 or
// Params.IgnoreEOS disables that) or a stop token (Params.StopIDs), or
// after the token that completes a stop string (Params.Stop; text gives
// the tokens' bytes, nil skips stop strings). reason is "length", "stop"
// or "" when the request goes on. Every serving loop applies the same
// rule.
func (r *Request) CommitEnd(eos int32, text Pieces) (end int, reason string) {
	end = len(r.Tokens)
	if lim := r.PromptLen + r.Params.MaxTokens; r.Params.MaxTokens > 0 && end >= lim {
		end, reason = lim, "length"
	}
	for i := r.Committed; i < end; i++ {
		if t := r.Tokens[i]; (t == eos && eos >= 0 && !r.Params.IgnoreEOS) || slices.Contains(r.Params.StopIDs, t) {
			end, reason = i, "stop"
			break
		}
	}
	if k := r.stopString(end, text); k >= 0 {
		return k + 1, "stop"
	}
	return end, reason
}

// stopString returns the index of the first token in [Committed, end)
// that completes one of Params.Stop in the output's text, or -1.
func (r *Request) stopString(end int, text Pieces) int {
	if text == nil || len(r.Params.Stop) == 0 || end <= r.Committed {
		return -1
	}
	longest := 0
	for _, s := range r.Params.Stop {
		longest = max(longest, len(s))
	}
	// The text of the committed output's tail that a stop string ending
	// in a new token can reach back into.
	start, tail := r.Committed, 0
	for start > r.PromptLen && tail < longest-1 {
		start--
		tail += len(text(r.Tokens[start]))
	}
	var buf []byte
	for i := start; i < end; i++ {
		before := len(buf)
		buf = append(buf, text(r.Tokens[i])...)
		if i < r.Committed {
			continue
		}
		for _, s := range r.Params.Stop {
			// Only an occurrence that ends in token i's bytes: one that
			// ended earlier was found when its token was committed.
			if from := max(0, before-len(s)+1); s != "" && bytes.Contains(buf[from:], []byte(s)) {
				return i
			}
		}
	}
	return -1
}

// Draw returns the request's deterministic random number in [0,1) for
// sequence position pos. With a seed in Params the draws depend only on
// the seed and the position, so the same seed and prompt reproduce the
// same routing; without one (seed 0) they depend on the request id.
func (r *Request) Draw(pos int) float64 {
	if r.Params.Seed != 0 {
		return Uniform(r.Params.Seed, 0, pos)
	}
	return Uniform(0, r.ID, pos)
}

// StepSampling is the Sampling of r's next engine step: its parameters
// with the sequence as the penalties' history. Every serving loop passes
// it, so penalties apply alike on every model.
func (r *Request) StepSampling() engine.Sampling {
	sp := r.Params.Sampling
	sp.History, sp.PromptLen = r.Tokens, r.PromptLen
	return sp
}

// Output returns the number of output tokens (committed or not) in Tokens.
func (r *Request) Output() int { return len(r.Tokens) - r.PromptLen }

// Decision says what happens to one request after a step. Before Route is
// called the runtime fills every Decision with the default: keep the sampled
// token, commit, stay on this model. Algorithms change only what differs.
type Decision struct {
	// Next is the model that steps the request next; the current model's
	// index means stay.
	Next int
	// Cut, when >= 0, truncates the sequence to Cut tokens before Token is
	// appended (rolling back rejected drafts). -1 keeps everything.
	Cut int
	// Token is appended to the sequence; NoToken drops the sampled token.
	Token int32
	// Commit makes every token of the sequence final (streamed to the
	// client). Tokens kept without Commit are drafts.
	Commit bool
}

// Step is one engine step's results on one model.
type Step struct {
	// Model is the index of the model that ran the step.
	Model int
	// Requests and Outputs are parallel: Outputs[i] belongs to Requests[i].
	Requests []*Request
	Outputs  []engine.Output
	// Embed gives the token embedding of the model that ran the step; nil
	// when its engine does not implement engine.Embedder.
	Embed engine.Embedder
}

// Message is what travels when a request moves between models.
type Message struct {
	// ID names the request.
	ID uint64
	// From and To are model indices.
	From, To int
	// Anchor is the sequence position at which Tokens start: the number
	// of tokens of the current sequence the receiver already holds.
	Anchor int
	// Tokens is the suffix the receiver has not seen.
	Tokens []int32
	// By[i] is the model that produced Tokens[i] (-1 for prompt tokens).
	By []int8
	// PromptLen is the prompt length of the sequence.
	PromptLen int
	// Committed is the committed length of the sequence.
	Committed int
	// Seen[i] is how many tokens of the current sequence model i holds
	// (its replica Placed[i], when the model has replicas).
	Seen []int
	// Placed[i], set by the runtime only, is the replica of model i the
	// request is pinned to: the one holding its KV cache (−1: none yet;
	// empty: every model has one replica). See DESIGN §9.
	Placed []int
	// Finished is set when the request has ended.
	Finished bool
	// Params are the request's parameters.
	Params Params
	// Logprobs are the log-probabilities of the sequence's uncommitted
	// tokens, by position, when the request asks for them. The runtime
	// keeps them; algorithms leave them alone.
	Logprobs []engine.Logprob
	// State is the algorithm's per-request state.
	State State
	// Verify, set by the runtime only, makes the message a verify job of
	// speculative continuation (see Speculable): the sequence positions
	// whose token the receiver returns, in order. Tokens then end just
	// before the last of them. In the job's result Verify lists the
	// positions verified and Verdict holds the receiver's token at each.
	Verify, Verdict []int32
	// Epoch names the speculation round of a verify job or result: the
	// sender starts a new round at every rollback and ignores results of
	// older rounds.
	Epoch uint32
}

// Algorithm is a token-level routing algorithm. One instance runs in each
// sub-server (model); instances share nothing but what travels in messages.
type Algorithm interface {
	// Route is called after every step on this model. d[i] belongs to
	// s.Requests[i] and arrives holding the default decision.
	Route(s *Step, d []Decision)
}

// Stater is implemented by algorithms with per-request state.
type Stater interface {
	// NewState returns the initial state for a new request.
	NewState(r *Request) State
}

// Sender is implemented by algorithms that adjust outgoing messages.
type Sender interface {
	// Send is called with the message the runtime built for r before it
	// leaves; it may change algorithm fields (State) or the suffix.
	Send(r *Request, m *Message)
}

// Receiver is implemented by algorithms that override how an arriving
// message is applied.
type Receiver interface {
	// Receive is called when m arrives for r (r holds the receiver's view
	// before the message is applied; r.State already is m.State). It may
	// rewrite m.Anchor, m.Tokens or m.Committed; the runtime then truncates
	// to m.Anchor, appends m.Tokens and resumes the request.
	Receive(r *Request, m *Message)
}

// Wanter is implemented by algorithms that need optional step outputs.
type Wanter interface {
	// Want returns the outputs model needs for r's next step.
	Want(model int, r *Request) engine.Want
}

// Entrant is implemented by algorithms whose requests do not start on
// model 0 (query-level routing picks one model per request).
type Entrant interface {
	// Entry returns the model a new request starts on.
	Entry(r *Request) int
}

// Speculable is implemented by algorithms that opt into speculative
// continuation (DESIGN §6b): at a position the algorithm routes from model
// from to model to, the runtime keeps from's sampled token as an
// unverified draft and lets the request go on decoding on from, while to
// verifies the position; a disagreement rolls both models back to it and
// continues from to's token. The committed output stays the one the
// algorithm gives without speculation. Opting in declares that the
// algorithm is R2R-shaped for that pair:
//
//   - on from, a routing decision is exactly {Next: to, Token: NoToken}
//     (no cut), and decisions depend only on the sequence, the request's
//     parameters and the position (not on Committed or wall time);
//   - on to, Route hands every request back to from, keeping the token to
//     sampled, without changing State;
//   - Sender and Receiver do nothing the runtime needs for these moves:
//     the runtime builds verify jobs and results itself and does not call
//     them.
//
// The runtime snapshots State at every speculated position and restores
// it on a rollback.
type Speculable interface {
	// Speculable reports whether positions routed from model from to
	// model to may be speculated past.
	Speculable(from, to int) bool
}

// Predictable is implemented by algorithms whose routing process is known
// before they run, for the throughput model (DESIGN §6): p[i][j] is the
// probability that a request that just stepped on model i steps next on
// model j (p[i][i]: it stays), c[i][j] the tokens committed on that move.
// ok is false when this instance's process is not stationary (say, a
// parameter scheduled to change during the run). The runtime computes
// thresholds up front from it when the step latencies are known too.
type Predictable interface {
	Process() (p, c [][]float64, ok bool)
}

// Spec configures one algorithm instance.
type Spec struct {
	// Model is the index of the model this instance runs on.
	Model int
	// Models are the names of all models, in index order.
	Models []string
	// Infos are the facts of each model (its engine's Info), in index
	// order, when known; nil, or zero values, when not (an algorithm
	// checked without models).
	Infos []engine.Info
	// Params are algorithm parameters ("p" -> "0.35").
	Params map[string]string
}

// Float returns the parameter name as a float, or def when absent.
func (s Spec) Float(name string, def float64) (float64, error) {
	v, ok := s.Params[name]
	if !ok {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("route: parameter %s=%q: not a number", name, v)
	}
	return f, nil
}

// Int returns the parameter name as an integer, or def when absent.
func (s Spec) Int(name string, def int) (int, error) {
	v, ok := s.Params[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("route: parameter %s=%q: not an integer", name, v)
	}
	return n, nil
}

// Factory builds one algorithm instance.
type Factory func(Spec) (Algorithm, error)

// ErrModels is wrapped by a Factory's error when it refuses the number of
// models it is given (Spec.Models), and by nothing else: Registry.Fitting
// reads it.
var ErrModels = errors.New("unsupported number of models")

// Registry maps algorithm names to factories. Build one with NewRegistry;
// route/builtin returns the registry of built-in algorithms.
type Registry struct {
	f      map[string]Factory
	params map[string][]string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{f: map[string]Factory{}, params: map[string][]string{}}
}

// Register adds an algorithm; registering a name twice is an error.
// params, when given, are the parameter names the algorithm reads: New
// then refuses any other, naming the known ones. With none, any parameter
// is passed through.
func (r *Registry) Register(name string, f Factory, params ...string) error {
	if _, dup := r.f[name]; dup {
		return fmt.Errorf("route: algorithm %q registered twice", name)
	}
	r.f[name] = f
	if params != nil {
		r.params[name] = slices.Sorted(slices.Values(params))
	}
	return nil
}

// New builds an instance of the named algorithm.
func (r *Registry) New(name string, s Spec) (Algorithm, error) {
	f, ok := r.f[name]
	if !ok {
		return nil, fmt.Errorf("route: unknown algorithm %q (have %s)", name, strings.Join(r.Names(), ", "))
	}
	if err := r.checkParams(name, s.Params); err != nil {
		return nil, err
	}
	a, err := f(s)
	if err != nil {
		return nil, fmt.Errorf("route: algorithm %s: %w", name, err)
	}
	return a, nil
}

// checkParams refuses parameters the algorithm does not read.
func (r *Registry) checkParams(name string, params map[string]string) error {
	known, ok := r.params[name]
	if !ok {
		return nil
	}
	var unknown []string
	for k := range params {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	have := "none"
	if len(known) > 0 {
		have = strings.Join(known, ", ")
	}
	return fmt.Errorf("route: algorithm %s: unknown parameter %s (known: %s)", name, strings.Join(unknown, ", "), have)
}

// Fitting lists the registered algorithms, sorted, that serve n models:
// those whose factory, given n models and no parameters, does not refuse
// them with ErrModels (it may refuse for a missing parameter: a trained
// router's weights).
func (r *Registry) Fitting(n int) []string {
	models := make([]string, n)
	for i := range models {
		models[i] = "m" + strconv.Itoa(i)
	}
	var out []string
	for _, name := range r.Names() {
		if _, err := r.f[name](Spec{Models: models}); !errors.Is(err, ErrModels) {
			out = append(out, name)
		}
	}
	return out
}

// Names lists the registered algorithms, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.f))
	for n := range r.f {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Uniform returns a deterministic number in [0,1) drawn from (seed, id,
// pos): the same request at the same position always gets the same draw,
// wherever it runs. Algorithms use it for seeded random decisions.
func Uniform(seed, id uint64, pos int) float64 {
	x := mix(seed ^ mix(id+0x9e3779b97f4a7c15) ^ mix(uint64(pos)+0x632be59bd9b4e019))
	return float64(x>>11) / (1 << 53)
}

// mix is the splitmix64 finaliser.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Ints is a ready-made per-request State: a few integers (counters,
// positions) encoded as varints. Algorithms with simple state use it
// instead of writing their own encoding.
type Ints []int64

// MarshalBinary encodes the integers.
func (s *Ints) MarshalBinary() ([]byte, error) {
	out := binary.AppendUvarint(nil, uint64(len(*s)))
	for _, v := range *s {
		out = binary.AppendVarint(out, v)
	}
	return out, nil
}

// maxInts bounds a decoded Ints so a hostile message cannot force a huge
// allocation.
const maxInts = 1 << 12

// UnmarshalBinary decodes what MarshalBinary wrote.
func (s *Ints) UnmarshalBinary(b []byte) error {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > maxInts {
		return errors.New("route: bad Ints length")
	}
	b = b[k:]
	out := (*s)[:0]
	for range n {
		v, k := binary.Varint(b)
		if k <= 0 {
			return errors.New("route: truncated Ints")
		}
		out = append(out, v)
		b = b[k:]
	}
	if len(b) != 0 {
		return errors.New("route: trailing bytes after Ints")
	}
	*s = out
	return nil
}
