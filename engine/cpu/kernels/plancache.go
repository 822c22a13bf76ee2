package kernels

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/gguf"
)

// sources is the package's assembly: BuildHash hashes it.
//
//go:embed *.s *.h
var sources embed.FS

// BuildHash returns a hash that changes when the kernels this binary runs
// may have changed: of the Go version and architecture, the package's
// assembly as built, and the binary's version control stamp (the commit);
// for a build from a modified tree, or one without a stamp (tests, go
// run), also of the executable's size and modification time, so that every
// rebuild counts as new kernels.
func BuildHash() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", runtime.Version(), runtime.GOARCH)
	_ = fs.WalkDir(sources, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := sources.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
		return nil
	})
	var revision, modified string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				revision = st.Value
			case "vcs.modified":
				modified = st.Value
			}
		}
	}
	fmt.Fprintf(h, "revision %s modified %s\n", revision, modified)
	if revision == "" || modified == "true" {
		if exe, err := os.Executable(); err == nil {
			if st, err := os.Stat(exe); err == nil {
				fmt.Fprintf(h, "exe %d %d\n", st.Size(), st.ModTime().UnixNano())
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// CPUName returns the CPU's model name (Linux: /proc/cpuinfo's "model
// name"; elsewhere, or if it cannot be read, the architecture).
func CPUName() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			if v = strings.TrimSpace(v); v != "" {
				return v
			}
		}
	}
	return runtime.GOARCH
}

// PlanCache keeps measured plans in a file of Dir, one file per CPU model,
// CPU level and kernel build (kernels-<hash>.json), each plan under a key
// the caller makes of what it was measured on (shapes). The file is bounded
// (maxCacheBytes, maxCacheEntries: the oldest entries go) and checked on
// reading: a file that does not parse, is too large, holds a name it does
// not know, or belongs to another CPU or build is ignored, and replaced on
// the next Store. Dir keeps the maxCacheFiles newest files.
type PlanCache struct {
	Dir string
}

// CachedPlan is a plan with the timings it was chosen from.
type CachedPlan struct {
	Plan    Plan
	Timings []Timing
	// Cost is how long the measurement took.
	Cost time.Duration
	// Saved is when it was stored.
	Saved time.Time
}

const (
	cacheFormat     = 1
	maxCacheBytes   = 1 << 20
	maxCacheEntries = 64
	maxCacheFiles   = 16
)

// cacheFile is the JSON form of a cache file.
type cacheFile struct {
	Format  int          `json:"format"`
	CPU     string       `json:"cpu"`
	Level   string       `json:"level"`
	Build   string       `json:"build"`
	Entries []cacheEntry `json:"entries"`
}

type cacheEntry struct {
	Key       string                        `json:"key"`
	Saved     time.Time                     `json:"saved"`
	CostMS    float64                       `json:"cost_ms"`
	Mul       map[string][MulClasses]string `json:"mul"` // weight type: level by class
	Attention string                        `json:"attention"`
	Timings   []cacheTiming                 `json:"timings"`
}

type cacheTiming struct {
	Class   string  `json:"class"`
	Type    string  `json:"type,omitempty"`
	Level   string  `json:"level"`
	Seconds float64 `json:"seconds"`
}

// cacheID is what a cache file must match: CPU name, level and kernel
// build.
type cacheID struct{ cpu, level, build string }

func newCacheID() cacheID { return cacheID{CPUName(), Detect().String(), BuildHash()} }

// Path returns the cache file of this CPU and kernel build.
func (c PlanCache) Path() string { return c.path(newCacheID()) }

func (c PlanCache) path(id cacheID) string {
	h := sha256.Sum256([]byte(id.cpu + "\x00" + id.level + "\x00" + id.build))
	return filepath.Join(c.Dir, "kernels-"+hex.EncodeToString(h[:8])+".json")
}

// read returns the file's valid contents, or an empty file of identity id.
func (c PlanCache) read(id cacheID) cacheFile {
	empty := cacheFile{Format: cacheFormat, CPU: id.cpu, Level: id.level, Build: id.build}
	f, err := os.Open(c.path(id))
	if err != nil {
		return empty
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCacheBytes+1))
	if err != nil || len(b) > maxCacheBytes {
		return empty
	}
	var cf cacheFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if dec.Decode(&cf) != nil || cf.Format != cacheFormat || cf.CPU != id.cpu || cf.Level != id.level || cf.Build != id.build ||
		len(cf.Entries) > maxCacheEntries {
		return empty
	}
	if slices.ContainsFunc(cf.Entries, func(e cacheEntry) bool {
		_, err := e.plan()
		return err != nil
	}) {
		return empty
	}
	return cf
}

// Load returns the plan stored under key, if there is a valid one.
func (c PlanCache) Load(key string) (CachedPlan, bool) {
	if c.Dir == "" {
		return CachedPlan{}, false
	}
	for _, e := range c.read(newCacheID()).Entries {
		if e.Key == key {
			p, err := e.plan()
			return p, err == nil
		}
	}
	return CachedPlan{}, false
}

// Store saves p under key (replacing an older plan of that key), writing
// the file anew through a temporary file and a rename, so that a reader
// never sees half of it.
func (c PlanCache) Store(key string, p CachedPlan) error {
	if c.Dir == "" {
		return errors.New("kernels: plan cache without a directory")
	}
	id := newCacheID()
	cf := c.read(id)
	cf.Entries = slices.DeleteFunc(cf.Entries, func(e cacheEntry) bool { return e.Key == key })
	cf.Entries = append(cf.Entries, entryOf(key, p))
	slices.SortStableFunc(cf.Entries, func(a, b cacheEntry) int { return a.Saved.Compare(b.Saved) })
	if n := len(cf.Entries); n > maxCacheEntries {
		cf.Entries = cf.Entries[n-maxCacheEntries:]
	}
	b, err := json.MarshalIndent(cf, "", " ")
	if err != nil {
		return fmt.Errorf("kernels: plan cache: %w", err)
	}
	for len(b) > maxCacheBytes && len(cf.Entries) > 1 {
		cf.Entries = cf.Entries[1:]
		if b, err = json.MarshalIndent(cf, "", " "); err != nil {
			return fmt.Errorf("kernels: plan cache: %w", err)
		}
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("kernels: plan cache: %w", err)
	}
	tmp, err := os.CreateTemp(c.Dir, ".kernels-*.tmp")
	if err != nil {
		return fmt.Errorf("kernels: plan cache: %w", err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("kernels: plan cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), c.path(id)); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("kernels: plan cache: %w", err)
	}
	c.prune()
	return nil
}

// prune removes all but the maxCacheFiles newest cache files of Dir (each
// binary that is rebuilt, each test binary, has a file of its own) and
// temporary files an interrupted Store left an hour or more ago.
func (c PlanCache) prune() {
	type file struct {
		path string
		mod  time.Time
	}
	var files []file
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		p := filepath.Join(c.Dir, e.Name())
		switch {
		case strings.HasPrefix(e.Name(), ".kernels-") && strings.HasSuffix(e.Name(), ".tmp"):
			if time.Since(info.ModTime()) > time.Hour {
				_ = os.Remove(p)
			}
		case strings.HasPrefix(e.Name(), "kernels-") && strings.HasSuffix(e.Name(), ".json"):
			files = append(files, file{p, info.ModTime()})
		}
	}
	slices.SortFunc(files, func(a, b file) int { return b.mod.Compare(a.mod) })
	for _, f := range files[min(len(files), maxCacheFiles):] {
		_ = os.Remove(f.path)
	}
}

// entryOf is the JSON form of p under key.
func entryOf(key string, p CachedPlan) cacheEntry {
	e := cacheEntry{Key: key, Saved: p.Saved.UTC(), CostMS: float64(p.Cost) / 1e6, Mul: map[string][MulClasses]string{},
		Attention: p.Plan.Attention.String()}
	for t, ls := range p.Plan.Mul {
		var names [MulClasses]string
		for c, l := range ls {
			names[c] = l.String()
		}
		e.Mul[t.String()] = names
	}
	for _, tm := range p.Timings {
		ct := cacheTiming{Class: tm.Class.String(), Level: tm.Level.String(), Seconds: tm.Seconds}
		if tm.Class != Attention {
			ct.Type = tm.Type.String()
		}
		e.Timings = append(e.Timings, ct)
	}
	return e
}

// plan reads the entry back, checking every name and that every level
// runs on this CPU.
func (e cacheEntry) plan() (CachedPlan, error) {
	avail := Available()
	level := func(s string) (Level, error) {
		l, err := ParseLevel(s)
		if err == nil && !slices.Contains(avail, l) {
			err = fmt.Errorf("kernels: level %s does not run on this CPU", l)
		}
		return l, err
	}
	p := CachedPlan{Plan: Plan{Mul: map[gguf.TensorType][MulClasses]Level{}}, Saved: e.Saved, Cost: time.Duration(e.CostMS * 1e6)}
	var err error
	if p.Plan.Attention, err = level(e.Attention); err != nil {
		return p, err
	}
	for name, ls := range e.Mul {
		t, err := parseType(name)
		if err != nil {
			return p, err
		}
		var lv [MulClasses]Level
		for c, s := range ls {
			if lv[c], err = level(s); err != nil {
				return p, err
			}
		}
		p.Plan.Mul[t] = lv
	}
	for _, ct := range e.Timings {
		tm := Timing{Seconds: ct.Seconds}
		if tm.Class, err = ParseClass(ct.Class); err != nil {
			return p, err
		}
		if tm.Level, err = level(ct.Level); err != nil {
			return p, err
		}
		if tm.Class != Attention {
			if tm.Type, err = parseType(ct.Type); err != nil {
				return p, err
			}
		}
		p.Timings = append(p.Timings, tm)
	}
	return p, nil
}

// parseType reads the name of a weight type that has kernels.
func parseType(s string) (gguf.TensorType, error) {
	for t := range gguf.TensorType(64) {
		if t.String() == s && t.Supported() {
			return t, nil
		}
	}
	return 0, fmt.Errorf("kernels: unknown weight type %q", s)
}
