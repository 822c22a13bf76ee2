package place

import "sync"

// Board is what one process knows of replicas that run elsewhere (in other
// processes or on other machines): per model, whether each replica is up,
// the last request admitted before it joined, and its load as its last
// heartbeat reported, plus the placements made here since that report
// (heartbeats are periodic: without them, every placement between two
// reports would go to the replica that looked least loaded at the last
// one). It is safe for concurrent use.
type Board struct {
	seed uint64
	mu   sync.Mutex
	reps [][]boardReplica
}

// boardReplica is one replica on a Board.
type boardReplica struct {
	up     bool
	drain  bool   // draining: it finishes what it holds and takes nothing new
	since  uint64 // the last request admitted before it joined
	load   Load
	placed int // placements made here since load was reported
}

// NewBoard returns a board of counts[m] replicas for each model m (at
// least one each), every one down; seed draws the placements' random
// numbers (Mix).
func NewBoard(counts []int, seed uint64) *Board {
	b := &Board{seed: seed, reps: make([][]boardReplica, len(counts))}
	for m, n := range counts {
		b.reps[m] = make([]boardReplica, max(n, 1))
	}
	return b
}

// Replicas returns how many replicas model runs.
func (b *Board) Replicas(model int) int {
	if model < 0 || model >= len(b.reps) {
		return 1
	}
	return len(b.reps[model])
}

// valid reports whether replica rep of model is on the board.
func (b *Board) valid(model, rep int) bool {
	return model >= 0 && model < len(b.reps) && rep >= 0 && rep < len(b.reps[model])
}

// SetUp marks replica rep of model up; since is the last request admitted
// before it joined (it takes only later ones). It reports whether the
// replica was down.
func (b *Board) SetUp(model, rep int, since uint64) bool {
	if !b.valid(model, rep) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := &b.reps[model][rep]
	was := r.up
	r.up, r.since = true, since
	return !was
}

// SetDown marks replica rep of model down and reports whether it was up.
func (b *Board) SetDown(model, rep int) bool {
	if !b.valid(model, rep) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := &b.reps[model][rep]
	was := r.up
	*r = boardReplica{}
	return was
}

// SetDraining marks replica rep of model draining (or not): while it
// drains it keeps the requests it holds but takes no placement, so a
// request pinned there moves on its next hand-off to the model.
func (b *Board) SetDraining(model, rep int, drain bool) {
	if !b.valid(model, rep) {
		return
	}
	b.mu.Lock()
	b.reps[model][rep].drain = drain
	b.mu.Unlock()
}

// Draining reports whether replica rep of model drains.
func (b *Board) Draining(model, rep int) bool {
	if !b.valid(model, rep) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reps[model][rep].drain
}

// Report records the load replica rep of model reported; the placements
// made here before it are in it.
func (b *Board) Report(model, rep int, l Load) {
	if !b.valid(model, rep) {
		return
	}
	b.mu.Lock()
	r := &b.reps[model][rep]
	r.load, r.placed = l, 0
	b.mu.Unlock()
}

// State returns replica rep of model as the board has it: up, the last
// request admitted before it joined, and its load with the placements made
// here since its report counted as queued.
func (b *Board) State(model, rep int) (up bool, since uint64, load Load) {
	if !b.valid(model, rep) {
		return false, 0, Load{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.reps[model][rep]
	l := r.load
	l.Up, l.Queued = r.up, l.Queued+r.placed
	return r.up, r.since, l
}

// Up returns how many of model's replicas are up.
func (b *Board) Up(model int) int {
	if model < 0 || model >= len(b.reps) {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, r := range b.reps[model] {
		if r.up {
			n++
		}
	}
	return n
}

// Loads appends the loads of model's replicas for request id: a replica
// that is down, draining, or joined after id was admitted, is not up for
// it.
func (b *Board) Loads(dst []Load, model int, id uint64) []Load {
	if model < 0 || model >= len(b.reps) {
		return dst
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.reps[model] {
		if !r.up || r.drain || id <= r.since {
			dst = append(dst, Load{})
			continue
		}
		l := r.load
		l.Up, l.Queued = true, l.Queued+r.placed
		dst = append(dst, l)
	}
	return dst
}

// placed counts a placement on replica rep of model until its next report.
func (b *Board) placed(model, rep int) {
	if !b.valid(model, rep) {
		return
	}
	b.mu.Lock()
	b.reps[model][rep].placed++
	b.mu.Unlock()
}

// Entry places new request id on a replica of model by the power of two
// choices (Entry); −1 when none is up.
func (b *Board) Entry(model int, id uint64) int {
	var buf [8]Load
	rep := Entry(b.Loads(buf[:0], model, id), Mix(b.seed, id, 0))
	b.placed(model, rep)
	return rep
}

// HandOff places request id's hand-off at sequence position pos to model,
// pinned there to replica pinned (−1: none), as HandOff does.
func (b *Board) HandOff(model, pinned int, id uint64, pos int) (int, Outcome) {
	var buf [8]Load
	rep, o := HandOff(b.Loads(buf[:0], model, id), pinned, Mix(b.seed, id, uint64(pos)), DefaultSlack)
	if o != Affine {
		b.placed(model, rep)
	}
	return rep, o
}
