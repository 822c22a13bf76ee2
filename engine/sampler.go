package engine

import (
	"math"
	"slices"
)

// Sampler draws the next token from a row of logits by a request's
// Sampling, identically in every engine, so a routed request is sampled
// by the same rule whichever model produces a token. In order:
//
//  1. Penalties: Bias is added; Repetition scales the logits of the
//     tokens in History before the position; Frequency and Presence
//     lower those of the output tokens before it. The row itself is left
//     as is (routers and logprobs read the model's own logits): the
//     adjusted copy lives in the Sampler's buffers.
//  2. Greedy (Temperature 0 or TopK 1): the argmax, lowest id on ties.
//  3. Otherwise the TopK best tokens, sorted, their softmax at
//     Temperature, cut by MinP, then by TopP, and one draw from what is
//     left with the uniform number of (Seed, position).
//
// Its buffers are reused from call to call; the zero value is ready. A
// Sampler is used by one goroutine at a time.
type Sampler struct {
	// Order and Probs are the buffers, exported so an engine can keep
	// them in fields of its own between calls.
	Order []int32
	Probs []float32
}

// Adjusts reports whether sp has penalties or biases to apply.
func (sp *Sampling) Adjusts() bool {
	p := &sp.Penalties
	return p.Frequency != 0 || p.Presence != 0 || (p.Repetition != 0 && p.Repetition != 1) || len(p.Bias) > 0
}

// Sample returns the token to place at position pos of the sequence
// (pos tokens precede it) after logits.
func (s *Sampler) Sample(logits []float32, sp *Sampling, pos int) int32 {
	tok := s.sample(logits, sp, pos)
	s.Record(logits, tok, sp, pos)
	return tok
}

// Records reports whether sp asks for log-probabilities to be recorded.
func (sp *Sampling) Records() bool { return sp.Logprobs && sp.Record != nil }

// Record appends tok's Logprob after logits to sp.Record when sp asks
// for them (Sample does it for the token it draws; an engine that picks
// its token otherwise calls it itself).
func (s *Sampler) Record(logits []float32, tok int32, sp *Sampling, pos int) {
	if sp.Records() {
		s.Order = growTo(s.Order, len(logits))
		*sp.Record = append(*sp.Record, s.logprob(logits, tok, sp.TopLogprobs, pos))
	}
}

// logprob is the Logprob of tok after logits, with the top most likely
// tokens.
func (s *Sampler) logprob(logits []float32, tok int32, top, pos int) Logprob {
	mx := logits[Argmax(logits)]
	sum := 0.0
	for _, v := range logits {
		sum += math.Exp(float64(v - mx))
	}
	norm := float64(mx) + math.Log(sum)
	lp := Logprob{Pos: int32(pos), Token: tok, Logprob: float32(float64(logits[tok]) - norm)}
	if top = min(top, len(logits)); top > 0 {
		order := s.Order[:top]
		topK(logits, s.Order, top)
		slices.SortFunc(order, func(a, b int32) int { return cmpLogit(logits, a, b) })
		lp.Top = make([]TokenLogprob, top)
		for i, id := range order {
			lp.Top[i] = TokenLogprob{Token: id, Logprob: float32(float64(logits[id]) - norm)}
		}
	}
	return lp
}

// sample is Sample without the log-probabilities.
func (s *Sampler) sample(logits []float32, sp *Sampling, pos int) int32 {
	V := len(logits)
	s.Order = growTo(s.Order, V)
	if sp.Adjusts() {
		s.Probs = growTo(s.Probs, 2*V)
		adj := s.Probs[V : 2*V]
		copy(adj, logits)
		s.penalize(adj, sp, pos)
		logits = adj
	} else {
		s.Probs = growTo(s.Probs, V)
	}
	if !(sp.Temperature > 0) || sp.TopK == 1 {
		return Argmax(logits)
	}
	order := s.Order
	k := V
	if sp.TopK > 0 && sp.TopK < V {
		k = sp.TopK
		topK(logits, order, k)
	} else {
		for i := range order {
			order[i] = int32(i)
		}
	}
	order = order[:k]
	slices.SortFunc(order, func(a, b int32) int { return cmpLogit(logits, a, b) })
	mx := logits[order[0]]
	inv := 1 / float64(sp.Temperature)
	probs := s.Probs[:k]
	sum := 0.0
	for i, id := range order {
		p := math.Exp(float64(logits[id]-mx) * inv)
		probs[i] = float32(p)
		sum += p
	}
	if sp.MinP > 0 {
		// Sorted, so probs[0] = 1 is the most likely token's weight and
		// the tokens below MinP of it form the tail.
		cut := len(probs)
		for i := 1; i < len(probs); i++ {
			if probs[i] < sp.MinP {
				cut = i
				break
			}
		}
		probs, sum = probs[:cut], 0
		for _, p := range probs {
			sum += float64(p)
		}
	}
	if sp.TopP > 0 && sp.TopP < 1 {
		cum := 0.0
		for i := range probs {
			cum += float64(probs[i])
			if cum >= float64(sp.TopP)*sum {
				probs = probs[:i+1]
				sum = cum
				break
			}
		}
	}
	u := Uniform(sp.Seed, pos) * sum
	acc := 0.0
	for i, p := range probs {
		acc += float64(p)
		if u < acc {
			return order[i]
		}
	}
	return order[len(probs)-1]
}

// penalize applies sp's penalties to logits for the token at pos. It uses
// s.Order as marks: a token's entry is set to 0 for every token of the
// history, then to 1 once its once-per-token penalties are applied.
func (s *Sampler) penalize(logits []float32, sp *Sampling, pos int) {
	p := &sp.Penalties
	for _, b := range p.Bias {
		if b.Token >= 0 && int(b.Token) < len(logits) {
			logits[b.Token] += b.Bias
		}
	}
	hist := sp.History[:min(pos, len(sp.History))]
	start := min(sp.PromptLen, len(hist))
	mark := s.Order
	valid := func(t int32) bool { return t >= 0 && int(t) < len(logits) }
	if p.Repetition != 0 && p.Repetition != 1 {
		for _, t := range hist {
			if valid(t) {
				mark[t] = 0
			}
		}
		for _, t := range hist {
			if !valid(t) || mark[t] != 0 {
				continue
			}
			mark[t] = 1
			if logits[t] > 0 {
				logits[t] /= p.Repetition
			} else {
				logits[t] *= p.Repetition
			}
		}
	}
	if p.Frequency == 0 && p.Presence == 0 {
		return
	}
	out := hist[start:]
	for _, t := range out {
		if valid(t) {
			mark[t] = 0
		}
	}
	for _, t := range out {
		if !valid(t) {
			continue
		}
		logits[t] -= p.Frequency
		if mark[t] == 0 {
			mark[t] = 1
			logits[t] -= p.Presence
		}
	}
}

// growTo returns s with length n, reallocating when its capacity is short.
func growTo[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// Argmax returns the index of the largest value (the first on ties).
func Argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// splitmix64 is a 64-bit mixing function (Steele, Lea and Flood).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Uniform returns the draw in [0, 1) for the token at position pos of a
// sequence sampled with seed. It depends on nothing else, so a sequence
// samples the same tokens whatever it is batched with.
func Uniform(seed uint64, pos int) float64 {
	return float64(splitmix64(seed^splitmix64(uint64(pos)))>>11) / (1 << 53)
}

// cmpLogit orders token ids by descending logit, then ascending id.
func cmpLogit(logits []float32, a, b int32) int {
	switch {
	case logits[a] > logits[b]:
		return -1
	case logits[a] < logits[b]:
		return 1
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// topK leaves the k best token ids (by cmpLogit) in order[:k], unsorted.
func topK(logits []float32, order []int32, k int) {
	h := order[:k]
	for i := range h {
		h[i] = int32(i)
	}
	// min-heap on "goodness": the root is the worst kept id
	worse := func(a, b int32) bool { return cmpLogit(logits, a, b) > 0 }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= k {
				return
			}
			m := l
			if r := l + 1; r < k && worse(h[r], h[l]) {
				m = r
			}
			if !worse(h[m], h[i]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for id := int32(k); int(id) < len(logits); id++ {
		if worse(h[0], id) {
			h[0] = id
			down(0)
		}
	}
}

// LogProb is log softmax(logits)[tok] in float64 (−∞ for a token outside
// logits): the log-probability a model with these logits gives tok.
func LogProb(logits []float32, tok int32) float64 {
	if tok < 0 || int(tok) >= len(logits) {
		return math.Inf(-1)
	}
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = max(mx, float64(v))
	}
	sum := 0.0
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	return float64(logits[tok]) - mx - math.Log(sum)
}
