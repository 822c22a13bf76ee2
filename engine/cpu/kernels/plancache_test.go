package kernels

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tokenrouter/tokenrouter/gguf"
)

func testPlan() CachedPlan {
	return CachedPlan{
		Plan: Plan{Mul: map[gguf.TensorType][MulClasses]Level{
			gguf.Q8_0: {Generic, Generic, Generic},
			gguf.Q6_K: {Detect(), Generic, Detect()},
		}, Attention: Detect()},
		Timings: []Timing{
			{Class: Decode, Type: gguf.Q8_0, Level: Generic, Seconds: 0.001},
			{Class: Attention, Level: Detect(), Seconds: 0.0002},
		},
		Cost:  1500 * time.Millisecond,
		Saved: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestPlanCacheRoundTrip(t *testing.T) {
	c := PlanCache{Dir: t.TempDir()}
	if _, ok := c.Load("k"); ok {
		t.Fatal("empty cache loaded a plan")
	}
	want := testPlan()
	if err := c.Store("k", want); err != nil {
		t.Fatal(err)
	}
	got, ok := c.Load("k")
	if !ok {
		t.Fatal("stored plan not loaded")
	}
	if fmt.Sprint(got.Plan) != fmt.Sprint(want.Plan) || fmt.Sprint(got.Timings) != fmt.Sprint(want.Timings) ||
		got.Cost != want.Cost || !got.Saved.Equal(want.Saved) {
		t.Fatalf("loaded %+v, stored %+v", got, want)
	}
	if _, ok := c.Load("other"); ok {
		t.Fatal("a plan loaded under another key")
	}
	if !strings.HasPrefix(c.Path(), c.Dir) || !strings.Contains(c.Path(), "kernels-") {
		t.Fatalf("path %s", c.Path())
	}
	if _, ok := (PlanCache{}).Load("k"); ok {
		t.Fatal("a cache without a directory loaded a plan")
	}
}

// TestPlanCacheRejectsBadFiles writes corrupt, foreign and oversized files
// where the cache file goes: each is ignored, and the next Store replaces
// it with a valid file.
func TestPlanCacheRejectsBadFiles(t *testing.T) {
	c := PlanCache{Dir: t.TempDir()}
	if err := c.Store("k", testPlan()); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(c.Path())
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*cacheFile)) []byte {
		var cf cacheFile
		if err := json.Unmarshal(good, &cf); err != nil {
			t.Fatal(err)
		}
		f(&cf)
		b, err := json.Marshal(cf)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bad := map[string][]byte{
		"truncated":     good[:len(good)/2],
		"not json":      []byte("\x00\x01garbage"),
		"other cpu":     edit(func(cf *cacheFile) { cf.CPU = "another CPU" }),
		"other build":   edit(func(cf *cacheFile) { cf.Build = "0000" }),
		"other format":  edit(func(cf *cacheFile) { cf.Format = 99 }),
		"unknown level": edit(func(cf *cacheFile) { cf.Entries[0].Attention = "avx1024" }),
		"unknown type":  edit(func(cf *cacheFile) { cf.Entries[0].Mul["Q9_9"] = cf.Entries[0].Mul["Q8_0"] }),
		"unknown field": []byte(strings.Replace(string(good), `"format"`, `"extra": 1, "format"`, 1)),
		"oversized":     append(append([]byte(nil), good...), make([]byte, maxCacheBytes)...),
		"too many entries": edit(func(cf *cacheFile) {
			for len(cf.Entries) <= maxCacheEntries {
				cf.Entries = append(cf.Entries, cf.Entries[0])
			}
		}),
	}
	for name, b := range bad {
		if err := os.WriteFile(c.Path(), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Load("k"); ok {
			t.Errorf("%s: plan loaded", name)
		}
		if err := c.Store("k2", testPlan()); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Load("k2"); !ok {
			t.Errorf("%s: the file was not replaced by a valid one", name)
		}
		if _, ok := c.Load("k"); ok {
			t.Errorf("%s: an entry of the bad file survived", name)
		}
	}
}

func TestPlanCacheBounded(t *testing.T) {
	c := PlanCache{Dir: t.TempDir()}
	p := testPlan()
	for i := range maxCacheEntries + 5 {
		p.Saved = p.Saved.Add(time.Second)
		if err := c.Store(fmt.Sprintf("k%d", i), p); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := c.Load("k0"); ok {
		t.Error("the oldest entry was kept past the bound")
	}
	if _, ok := c.Load(fmt.Sprintf("k%d", maxCacheEntries+4)); !ok {
		t.Error("the newest entry is missing")
	}
	st, err := os.Stat(c.Path())
	if err != nil || st.Size() > maxCacheBytes {
		t.Fatalf("cache file %v, %v", st, err)
	}
	entries, err := os.ReadDir(c.Dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("cache directory holds %v (%v): temporary files left behind?", entries, err)
	}
}

func TestBuildHashAndCPUName(t *testing.T) {
	h := BuildHash()
	if len(h) != 16 || h != BuildHash() {
		t.Fatalf("BuildHash %q, then %q", h, BuildHash())
	}
	if CPUName() == "" {
		t.Fatal("no CPU name")
	}
}

// TestPlanCachePrunesOldFiles leaves the files of other builds and a stale
// temporary file in the directory: Store keeps the newest files only.
func TestPlanCachePrunesOldFiles(t *testing.T) {
	c := PlanCache{Dir: t.TempDir()}
	old := time.Now().Add(-48 * time.Hour)
	for i := range maxCacheFiles + 3 {
		p := fmt.Sprintf("%s/kernels-%016d.json", c.Dir, i)
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	tmp := c.Dir + "/.kernels-123.tmp"
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	if err := c.Store("k", testPlan()); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != maxCacheFiles {
		t.Fatalf("%d files left, want %d", len(entries), maxCacheFiles)
	}
	if _, err := os.Stat(c.Path()); err != nil {
		t.Fatalf("the new file was pruned: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("%s/kernels-%016d.json", c.Dir, 0)); err == nil {
		t.Fatal("the oldest file was kept")
	}
	if _, err := os.Stat(tmp); err == nil {
		t.Fatal("the stale temporary file was kept")
	}
}
