package place

import "testing"

// TestBoard: replicas start down; one up takes only requests admitted
// after it came up; placements made since a replica's last report count as
// queued there until the next report (so entries between two heartbeats
// spread instead of piling on the replica that looked least loaded); a
// replica set down takes nothing; affine hand-offs are not counted again.
func TestBoard(t *testing.T) {
	b := NewBoard([]int{2, 1}, 7)
	if b.Replicas(0) != 2 || b.Replicas(1) != 1 || b.Up(0) != 0 {
		t.Fatalf("new board: replicas %d, %d; up %d", b.Replicas(0), b.Replicas(1), b.Up(0))
	}
	if rep := b.Entry(0, 1); rep != -1 {
		t.Fatalf("entry with no replica up: %d", rep)
	}
	b.SetUp(0, 0, 0)
	b.SetUp(0, 1, 10) // joined after request 10
	if rep := b.Entry(0, 5); rep != 0 {
		t.Fatalf("request 5 on replica %d; replica 1 joined after it", rep)
	}
	b.Report(0, 0, Load{})
	b.Report(0, 1, Load{})
	counts := [2]int{}
	for id := uint64(11); id < 51; id++ {
		counts[b.Entry(0, id)]++
	}
	if counts[0] < 15 || counts[1] < 15 {
		t.Fatalf("40 entries between two reports: %v, want them spread", counts)
	}
	if _, _, l := b.State(0, 1); l.Queued != counts[1] {
		t.Fatalf("replica 1 queued %d, want the %d placements since its report", l.Queued, counts[1])
	}
	b.Report(0, 1, Load{Runnable: 3})
	if _, _, l := b.State(0, 1); l.Queued != 0 || l.Runnable != 3 {
		t.Fatalf("after a report: %+v", l)
	}
	if rep, o := b.HandOff(0, 1, 20, 5); rep != 1 || o != Affine {
		t.Fatalf("hand-off pinned to 1: %d %v", rep, o)
	}
	if _, _, l := b.State(0, 1); l.Queued != 0 {
		t.Fatalf("an affine hand-off counted as a placement: %+v", l)
	}
	if !b.SetDown(0, 1) || b.SetDown(0, 1) || b.Up(0) != 1 {
		t.Fatal("set down twice, or up count wrong")
	}
	if rep, o := b.HandOff(0, 1, 20, 6); rep != 0 || o != Replaced {
		t.Fatalf("hand-off pinned to a replica down: %d %v, want 0 replaced", rep, o)
	}
	if b.SetUp(3, 0, 0) || b.SetDown(0, 5) {
		t.Fatal("a replica not on the board was set")
	}
}
