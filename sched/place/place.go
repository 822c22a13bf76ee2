// Package place decides which replica of a model a request runs on
// (DESIGN §9). A model may run as several replicas, each a sub-server with
// its own loop, scheduler, KV cache and launch thresholds. A new request
// goes to one of its entry model's replicas chosen by the power of two
// choices (Entry). A request's first hand-off to a model goes to that
// model's least-loaded replica, which it is then pinned to; later hand-offs
// to the model return to the pinned replica, which holds the request's KV
// cache, unless it is gone or loaded past a bound: then the request moves
// to the least-loaded replica and is re-prefilled there (HandOff).
//
// Both decisions are pure functions of the replicas' loads and a random
// number the caller draws (Mix derives one from a seed and the request), so
// a placement can be replayed and tested.
package place

// Load is what placement knows of one replica.
type Load struct {
	// Up says whether the replica may take the request (it runs, and it
	// knows the request: it joined before the request was admitted).
	Up bool
	// Queued counts the requests that arrived and wait to be taken in;
	// Runnable those waiting for or in its next step; KV the sequences
	// holding KV cache there.
	Queued, Runnable, KV int
}

// Score is the load placements compare: queued + runnable + KV in use.
func (l Load) Score() int { return l.Queued + l.Runnable + l.KV }

// DefaultSlack is the slack of the overload bound (Overloaded) the runtime
// uses.
const DefaultSlack = 16

// Overloaded reports whether a pinned replica is loaded past the bound
// that makes a request leave its KV cache: its score exceeds twice the
// least-loaded replica's plus slack. Moving costs a re-prefill, so only a
// clear imbalance moves a request.
func Overloaded(pinned, least Load, slack int) bool {
	return pinned.Score() > 2*least.Score()+slack
}

// Outcome says how a hand-off was placed.
type Outcome uint8

const (
	// NoReplica: no replica of the model is up.
	NoReplica Outcome = iota
	// Placed: the request's first hand-off to the model, to its
	// least-loaded replica (now pinned).
	Placed
	// Affine: back to the pinned replica, which holds the request's KV.
	Affine
	// Replaced: the pinned replica is gone or overloaded; the request
	// moves to the least-loaded replica and is re-prefilled there.
	Replaced
)

// String names the outcome as metrics label it.
func (o Outcome) String() string {
	switch o {
	case Placed:
		return "placed"
	case Affine:
		return "affine"
	case Replaced:
		return "replaced"
	}
	return "none"
}

// Entry picks the replica a new request starts on by the power of two
// choices: r chooses two distinct replicas that are up, uniformly, and the
// one with the lower score wins (the first drawn on a tie). It returns −1
// when none is up, and the only one when one is.
func Entry(loads []Load, r uint64) int {
	n := up(loads)
	switch n {
	case 0:
		return -1
	case 1:
		return nthUp(loads, 0)
	}
	a := int(r % uint64(n))
	b := int((r / uint64(n)) % uint64(n-1))
	if b >= a {
		b++
	}
	ia, ib := nthUp(loads, a), nthUp(loads, b)
	if loads[ib].Score() < loads[ia].Score() {
		return ib
	}
	return ia
}

// HandOff picks the replica a hand-off goes to. pinned is the replica the
// request is pinned to on this model (−1: none yet). The pinned replica,
// when it is up and not overloaded against the least-loaded one, keeps
// the request (Affine); otherwise the least-loaded replica that is up
// takes it (Placed for a first visit, Replaced for a move), r choosing
// among equally loaded ones. It returns −1 and NoReplica when none is up.
func HandOff(loads []Load, pinned int, r uint64, slack int) (int, Outcome) {
	least := LeastLoaded(loads, r)
	switch {
	case least < 0:
		return -1, NoReplica
	case pinned >= 0 && pinned < len(loads) && loads[pinned].Up && !Overloaded(loads[pinned], loads[least], slack):
		return pinned, Affine
	case pinned >= 0:
		return least, Replaced
	}
	return least, Placed
}

// LeastLoaded returns the up replica with the lowest score, r choosing
// among ties, or −1 when none is up.
func LeastLoaded(loads []Load, r uint64) int {
	best, ties := -1, 0
	for i, l := range loads {
		switch {
		case !l.Up:
		case best < 0 || l.Score() < loads[best].Score():
			best, ties = i, 1
		case l.Score() == loads[best].Score():
			ties++
		}
	}
	if ties <= 1 {
		return best
	}
	k := int(r % uint64(ties))
	for i, l := range loads {
		if l.Up && l.Score() == loads[best].Score() {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return best
}

// Mix derives a placement's random number from a seed and a request (and,
// for hand-offs, the request's position): the same inputs place the same
// way wherever they are placed. It is SplitMix64 over the inputs.
func Mix(seed, id, pos uint64) uint64 {
	x := seed ^ id*0x9e3779b97f4a7c15 ^ pos*0xbf58476d1ce4e5b9
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// up counts the replicas that are up.
func up(loads []Load) int {
	n := 0
	for _, l := range loads {
		if l.Up {
			n++
		}
	}
	return n
}

// nthUp returns the index of the k-th replica that is up.
func nthUp(loads []Load, k int) int {
	for i, l := range loads {
		if l.Up {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return -1
}
