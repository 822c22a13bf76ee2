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
//
// Neither the workers nor the caller yield their processor while they poll
// (runtime.Gosched): a worker woken by the caller becomes runnable on the
// caller's processor, and a caller that yielded it would hand it the
// processor and wait for another one itself, so the two would run one
// after the other. The caller yields only after waiting yieldIters polls
// (a worker the system runs late), so a pool with fewer processors than
// workers still makes progress.
const spinIters, yieldIters = 1 << 16, 1 << 18

// maxParts bounds the parts of one job (they are counted in 16 bits).
const maxParts = 1<<16 - 1

// cacheLine is the padding that keeps each worker's claim word on a cache
// line of its own (two lines: adjacent-line prefetchers pair them).
const cacheLine = 128

// slot is a worker's share of the current job: the parts [next, end) it
// has not yet claimed, with the job's generation, in one atomic word.
type slot struct {
	claim atomic.Uint64
	_     [cacheLine - 8]byte
}

// pool is a fixed set of worker goroutines owned by an engine. run splits a
// task into parts and returns when all are done; close stops the workers
// and waits for them.
//
// Each worker (the caller is worker 0) owns a contiguous range of the
// parts, published in its slot, and claims them front to back, so it
// streams through one region of the weights and its claims touch only its
// own cache line. A worker whose range is empty steals the others' parts
// from the back, one at a time, so a worker the operating system has
// descheduled delays nothing: the others do its share. A worker reads the
// task only after claiming a part, and the caller does not publish the
// next job before every claimed part is done.
type pool struct {
	n        int   // workers including the caller
	cpus     []int // worker w's OS thread runs on cpus[w%len(cpus)] (none: anywhere)
	slots    []slot
	gen      atomic.Uint64 // generation of the current job (workers poll it)
	_        [cacheLine - 8]byte
	done     atomic.Int64 // parts finished in the current job
	_        [cacheLine - 8]byte
	t        task // current job, written before gen is published
	quit     atomic.Bool
	sleeping []atomic.Bool
	wake     []chan struct{}
	wg       sync.WaitGroup
}

func packClaim(gen uint64, next, end int) uint64 {
	return gen<<32 | uint64(next)<<16 | uint64(end)
}

func unpackClaim(c uint64) (gen uint64, next, end int) {
	return c >> 32, int(c>>16) & maxParts, int(c) & maxParts
}

// newPool starts n-1 worker goroutines. With cpus, each worker locks its
// goroutine to an OS thread pinned to cpus[w%len(cpus)] (the caller's
// thread is pinned for each step, see Engine.Step); if a worker cannot pin
// its thread, newPool stops the others and returns the error.
func newPool(n int, cpus []int) (*pool, error) {
	if n < 1 {
		n = 1
	}
	p := &pool{n: n, cpus: cpus, slots: make([]slot, n), sleeping: make([]atomic.Bool, n), wake: make([]chan struct{}, n)}
	started := make(chan error, n)
	for w := 1; w < n; w++ {
		p.wake[w] = make(chan struct{}, 1)
		p.wg.Add(1)
		go p.worker(w, started)
	}
	var err error
	for w := 1; w < n; w++ {
		if e := <-started; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// work runs the parts of the job of generation gen that worker w claims:
// its own range front to back, then the other workers' from the back.
func (p *pool) work(w int, gen uint64) {
	ran := 0
	s := &p.slots[w].claim
	for {
		c := s.Load()
		g, next, end := unpackClaim(c)
		if g != gen || next >= end {
			break
		}
		if s.CompareAndSwap(c, packClaim(g, next+1, end)) {
			p.t.do(w, next)
			ran++
		}
	}
	for i := 1; i < p.n; i++ {
		s := &p.slots[(w+i)%p.n].claim
		for {
			c := s.Load()
			g, next, end := unpackClaim(c)
			if g != gen || next >= end {
				break
			}
			if s.CompareAndSwap(c, packClaim(g, next, end-1)) {
				p.t.do(w, end-1)
				ran++
			}
		}
	}
	if ran > 0 {
		p.done.Add(int64(ran))
	}
}

func (p *pool) worker(w int, started chan<- error) {
	defer p.wg.Done()
	if len(p.cpus) > 0 {
		// The goroutine keeps the thread locked until it exits, which
		// ends the thread: no other goroutine inherits its CPU set.
		runtime.LockOSThread()
		if err := pinThread(p.cpus[w%len(p.cpus)]); err != nil {
			started <- err
			return
		}
	}
	started <- nil
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
		p.work(w, seen)
	}
}

// run executes parts [0, parts) of t on the caller and the workers. With
// one part (or one worker) it runs inline.
func (p *pool) run(t task, parts int) {
	if parts <= 0 {
		return
	}
	if parts == 1 || p.n == 1 || parts > maxParts {
		for i := range parts {
			t.do(0, i)
		}
		return
	}
	gen := (p.gen.Load() + 1) & (1<<32 - 1)
	if gen == 0 {
		gen = 1 // workers start having seen generation 0
	}
	p.t = t
	p.done.Store(0)
	for w := range p.n {
		p.slots[w].claim.Store(packClaim(gen, w*parts/p.n, (w+1)*parts/p.n))
	}
	p.gen.Store(gen)
	for w := 1; w < p.n; w++ {
		if p.sleeping[w].Load() {
			select {
			case p.wake[w] <- struct{}{}:
			default:
			}
		}
	}
	p.work(0, gen)
	for i := 0; p.done.Load() != int64(parts); i++ {
		if i >= yieldIters && i%64 == 63 {
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
	p.wg.Wait()
}
