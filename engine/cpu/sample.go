package cpu

import (
	"math"
	"slices"

	"github.com/tokenrouter/tokenrouter/engine"
)

// splitmix64 is a 64-bit mixing function (Steele, Lea and Flood).
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// uniform returns the draw in [0, 1) for the token at position pos of a
// sequence sampled with seed. It depends on nothing else, so a sequence
// samples the same tokens whatever it is batched with.
func uniform(seed uint64, pos int) float64 {
	return float64(splitmix64(seed^splitmix64(uint64(pos)))>>11) / (1 << 53)
}

// argmax returns the index of the largest value (the first on ties).
func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// sample draws the next token from logits: greedy when Temperature is 0,
// otherwise from the softmax of logits/Temperature restricted to the TopK
// most likely tokens and then to the smallest prefix reaching TopP.
func (e *Engine) sample(logits []float32, sp engine.Sampling, pos int) int32 {
	if !(sp.Temperature > 0) || sp.TopK == 1 {
		return argmax(logits)
	}
	V := len(logits)
	e.order = grow(e.order, V)
	e.probs = grow(e.probs, V)
	order := e.order
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
	probs := e.probs[:k]
	sum := 0.0
	for i, id := range order {
		p := math.Exp(float64(logits[id]-mx) * inv)
		probs[i] = float32(p)
		sum += p
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
	u := uniform(sp.Seed, pos) * sum
	acc := 0.0
	for i, p := range probs {
		acc += float64(p)
		if u < acc {
			return order[i]
		}
	}
	return order[len(probs)-1]
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
