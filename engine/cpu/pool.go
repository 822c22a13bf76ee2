package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// task is a unit of parallel work split into parts: do(worker, part) runs
// part number part on worker number worker (0 is the calling goroutine).
type task interface {
	do(worker, part int)
}

// spinIters bounds how long an idle worker polls for the next job before it
// parks (tens of microseconds): kernels of one step follow each other within
// microseconds, and waking a parked goroutine costs more than that.
const spinIters = 1 << 14

// pool is a fixed set of worker goroutines owned by an engine. run splits a
// task over the workers and the caller and returns when all parts are done;
// close stops the workers and waits for them.
//
// Jobs are published through an atomic generation counter that idle workers
// poll briefly before parking on their wake channel; channel hand-off alone
// would let the Go scheduler run the woken worker on the caller's own
// processor only after the caller blocks, serialising the parts.
type pool struct {
	n        int // workers including the caller
	gen      atomic.Uint64
	pending  atomic.Int64 // workers that have not finished the current job
	t        task         // current job, written before gen is bumped
	parts    int
	quit     atomic.Bool
	sleeping []atomic.Bool
	wake     []chan struct{}
	done     sync.WaitGroup
}

func newPool(n int) *pool {
	if n < 1 {
		n = 1
	}
	p := &pool{n: n, sleeping: make([]atomic.Bool, n), wake: make([]chan struct{}, n)}
	for w := 1; w < n; w++ {
		p.wake[w] = make(chan struct{}, 1)
		p.done.Add(1)
		go p.worker(w)
	}
	return p
}

func (p *pool) worker(w int) {
	defer p.done.Done()
	seen := uint64(0)
	for {
		for i := 0; ; i++ {
			if g := p.gen.Load(); g != seen {
				seen = g
				break
			}
			if p.quit.Load() {
				return
			}
			if i < spinIters {
				if i%64 == 63 {
					runtime.Gosched()
				}
				continue
			}
			p.sleeping[w].Store(true)
			if p.gen.Load() == seen && !p.quit.Load() {
				<-p.wake[w]
			}
			p.sleeping[w].Store(false)
			i = 0
		}
		if p.quit.Load() {
			return
		}
		for part := w; part < p.parts; part += p.n {
			p.t.do(w, part)
		}
		p.pending.Add(-1)
	}
}

// run executes parts [0, parts) of t; part i goes to worker i mod n. With
// one part (or one worker) it runs inline.
func (p *pool) run(t task, parts int) {
	if parts <= 0 {
		return
	}
	if parts == 1 || p.n == 1 {
		for i := range parts {
			t.do(0, i)
		}
		return
	}
	p.t, p.parts = t, parts
	p.pending.Store(int64(p.n - 1))
	p.gen.Add(1)
	for w := 1; w < p.n; w++ {
		if p.sleeping[w].Load() {
			select {
			case p.wake[w] <- struct{}{}:
			default:
			}
		}
	}
	for part := 0; part < parts; part += p.n {
		t.do(0, part)
	}
	for i := 0; p.pending.Load() != 0; i++ {
		if i%64 == 63 {
			runtime.Gosched()
		}
	}
	p.t = nil
}

// close stops the workers; the pool must not be used afterwards.
func (p *pool) close() {
	p.quit.Store(true)
	for w := 1; w < p.n; w++ {
		select {
		case p.wake[w] <- struct{}{}:
		default:
		}
	}
	p.done.Wait()
}
