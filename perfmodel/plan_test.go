package perfmodel

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tokenrouter/tokenrouter/sched"
)

// TestPlanTablesRoundTrip plans N = 2, 4, 5 for the paper's pair, writes
// the rows as `plan --format json` does and reads back one table per model
// that holds each planned N's best B.
func TestPlanTablesRoundTrip(t *testing.T) {
	rows, err := NewPlanner(Options{}).Plan(context.Background(), paperR2R(), []int{2, 4, 5}, map[int]int{0: 1})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.json")
	b, _ := json.MarshalIndent(rows, "", "  ")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := ReadPlan(path)
	if err != nil {
		t.Fatal(err)
	}
	tabs, err := PlanTables(back, 2)
	if err != nil {
		t.Fatal(err)
	}
	// DESIGN §6's check: B1* = 2 at N = 2, 3 at N = 4, 4 at N = 5; N = 3
	// takes N = 2's, N = 0 and 1 the smallest planned N's.
	want := []sched.Table{{1, 1, 1, 1, 1, 1}, {2, 2, 2, 2, 3, 4}}
	if !slices.Equal(tabs[0], want[0]) || !slices.Equal(tabs[1], want[1]) {
		t.Fatalf("tables %v, want %v", tabs, want)
	}
	if _, err := PlanTables(back, 3); err == nil {
		t.Fatal("a plan for 2 models accepted for 3")
	}
	if _, err := PlanTables(nil, 2); err == nil {
		t.Fatal("an empty plan accepted")
	}
}
