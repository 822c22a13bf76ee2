package lab

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestPinThread(t *testing.T) {
	cpus, err := allowedCPUs()
	if err != nil || len(cpus) == 0 {
		t.Fatalf("CPUs %v, %v", cpus, err)
	}
	c := cpus[len(cpus)-1]
	undo, err := pinThread(c)
	if err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() != 1 || !set.IsSet(c) {
		undo()
		t.Fatalf("pinned to %d: the thread may run on %d CPUs (%v)", c, set.Count(), err)
	}
	undo()
	if after, _ := allowedCPUs(); len(after) != len(cpus) {
		t.Fatalf("after undo the thread may use %v, before %v", after, cpus)
	}
}
