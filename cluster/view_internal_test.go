package cluster

import (
	"testing"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/sched/place"
)

// TestViewLostStaysLost: a member's view takes every replica as up until
// the front end's first list; a replica whose loss was announced stays
// down when a list composed before the loss still names its incarnation,
// and comes back up as a new incarnation; a replica the list leaves out is
// down.
func TestViewLostStaysLost(t *testing.T) {
	v := newView([]int{2, 1}, 1)
	if v.Up(0) != 2 || v.Up(1) != 1 {
		t.Fatalf("before any list: up %d, %d; want 2, 1", v.Up(0), v.Up(1))
	}
	list := []UpReplica{{Model: 0, Replica: 0, Incarnation: 10}, {Model: 0, Replica: 1, Incarnation: 11, Since: 4},
		{Model: 1, Replica: 0, Incarnation: 12}}
	v.apply(list)
	if up, since, _ := v.State(0, 1); !up || since != 4 {
		t.Fatalf("replica 1 of model 0: up %v since %d", up, since)
	}
	v.Lost(bus.Endpoint(0, 1))
	v.apply(list) // composed before the loss
	if up, _, _ := v.State(0, 1); up {
		t.Fatal("a stale list brought the lost incarnation back up")
	}
	list[1].Incarnation = 21
	list[1].Load = place.Load{Runnable: 2}
	v.apply(list)
	if up, _, l := v.State(0, 1); !up || l.Runnable != 2 {
		t.Fatalf("the restarted replica: up %v, load %+v", up, l)
	}
	v.apply(list[1:])
	if up, _, _ := v.State(0, 0); up {
		t.Fatal("a replica the list leaves out is still up")
	}
}
