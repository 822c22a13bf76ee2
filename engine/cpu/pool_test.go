package cpu

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/internal/testkit"
)

type countTask struct {
	hits    []atomic.Int32
	workers [8]atomic.Int32
}

func (t *countTask) do(w, p int) {
	t.hits[p].Add(1)
	t.workers[w].Add(1)
}

func TestPoolRunsEveryPartOnceAndStops(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, n := range []int{1, 2, 3, 5} {
		p, err := newPool(n, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, parts := range []int{1, 2, 3, 7, 16} {
			for round := range 50 {
				task := &countTask{hits: make([]atomic.Int32, parts)}
				p.run(task, parts)
				for i := range task.hits {
					if h := task.hits[i].Load(); h != 1 {
						t.Fatalf("n=%d parts=%d round %d: part %d ran %d times", n, parts, round, i, h)
					}
				}
			}
			time.Sleep(time.Millisecond) // deliberate: let workers park between batches
		}
		p.close()
	}
	testkit.Until(t, 2*time.Second, func() error {
		if g := runtime.NumGoroutine(); g > before {
			return fmt.Errorf("%d goroutines left after close (had %d)", g, before)
		}
		return nil
	})
}

type slowTask struct{ workers [8]atomic.Int32 }

func (t *slowTask) do(w, p int) {
	time.Sleep(200 * time.Microsecond) // deliberately slow, so both workers get parts
	t.workers[w].Add(1)
}

func TestPoolWorkersShareTheWork(t *testing.T) {
	p, err := newPool(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	task := &slowTask{}
	for range 50 {
		p.run(task, 8)
	}
	if task.workers[1].Load() == 0 || task.workers[0].Load() == 0 {
		t.Fatalf("parts per worker: %d %d", task.workers[0].Load(), task.workers[1].Load())
	}
}

type lateTask struct{ workers [2]atomic.Int32 }

func (t *lateTask) do(w, p int) {
	if w == 1 {
		time.Sleep(5 * time.Millisecond) // deliberate: worker 1 runs late
	}
	t.workers[w].Add(1)
}

// TestPoolStealsFromALateWorker checks that the caller takes the parts of
// a worker that is slow to run them instead of waiting for it.
func TestPoolStealsFromALateWorker(t *testing.T) {
	p, err := newPool(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	task := &lateTask{}
	const parts = 8
	p.run(task, parts)
	w0, w1 := task.workers[0].Load(), task.workers[1].Load()
	if w0+w1 != parts || w0 <= parts/2 {
		t.Fatalf("parts run by the caller %d, by the late worker %d: want all %d, the caller more than its own %d", w0, w1, parts, parts/2)
	}
}
