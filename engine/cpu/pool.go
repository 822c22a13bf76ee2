package cpu

import "sync"

// task is a unit of parallel work split into parts: do(worker, part) runs
// part number part on worker number worker (0 is the calling goroutine).
type task interface {
	do(worker, part int)
}

type job struct {
	t     task
	part  int
	parts int
}

// pool is a fixed set of worker goroutines owned by an engine. run splits a
// task over the workers and the caller and returns when all parts are done;
// close stops the workers and waits for them.
type pool struct {
	n    int // workers including the caller
	jobs []chan job
	wg   sync.WaitGroup // parts in flight
	done sync.WaitGroup // worker goroutines
}

func newPool(n int) *pool {
	if n < 1 {
		n = 1
	}
	p := &pool{n: n}
	for w := 1; w < n; w++ {
		ch := make(chan job, 1)
		p.jobs = append(p.jobs, ch)
		p.done.Add(1)
		go p.worker(w, ch)
	}
	return p
}

func (p *pool) worker(w int, ch chan job) {
	defer p.done.Done()
	for j := range ch {
		for part := j.part; part < j.parts; part += p.n {
			j.t.do(w, part)
		}
		p.wg.Done()
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
	used := min(p.n, parts)
	p.wg.Add(used - 1)
	for w := 1; w < used; w++ {
		p.jobs[w-1] <- job{t: t, part: w, parts: parts}
	}
	for part := 0; part < parts; part += p.n {
		t.do(0, part)
	}
	p.wg.Wait()
}

// close stops the workers; the pool must not be used afterwards.
func (p *pool) close() {
	for _, ch := range p.jobs {
		close(ch)
	}
	p.jobs = nil
	p.done.Wait()
}
