package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// Spec is a bench run as its command line describes it: the models, the
// algorithm over them, the closed loop's workload and where the output
// goes. Prepare builds the systems' Setup and the loop's Options from it.
type Spec struct {
	// Models are the models, small first (simulated, or on the cpu
	// engine), with their threads and CPUs.
	Models []config.Model
	// Label names the models in reports ("profile paper-r2r",
	// "cpu engine: slm, llm").
	Label string
	// Algorithm and Params are the routing algorithm under test.
	Algorithm string
	// Params are its parameters.
	Params map[string]string
	// Thresholds are the launch thresholds as config.ParseLaunch reads
	// them ("auto", "1,3", "@plan.json"); MaxWait is the max-wait guard.
	Thresholds string
	// MaxWait launches a waiting step anyway after this wait (0: never).
	MaxWait time.Duration
	// Placement is how the models share the cores (auto measures and
	// picks).
	Placement config.Placement
	// Speculate and BusDelay configure the routed systems (Setup).
	Speculate subserver.Speculation
	// BusDelay delays every event between sub-servers (Setup.BusDelay).
	BusDelay time.Duration
	// HTTP configures the systems named by a server's URL.
	HTTP HTTPOptions
	// Deploy and Deployed, if set, start the routed deployment elsewhere
	// (Setup.Deploy); Deployed says where, for reports.
	Deploy   Deployer
	Deployed string
	// KVReserveMB is the KV memory (MB) the cpu engines warm before the
	// first measurement (Kinds).
	KVReserveMB int
	// Loop holds the closed loop's workload and timing: PromptLen,
	// MaxTokens, RangeRatio, Vocab (0: the models'), KeepEOS, Warmup,
	// Duration, Seed and ClientProcs. Prepare sets its BOS, its Vocab
	// when 0, and its Prompts from PromptsFile.
	Loop Options
	// PromptsFile, if set, holds the prompts (ReadPrompts), tokenised with
	// the models' tokenizer.
	PromptsFile string
	// Concurrency lists the concurrencies measured, in order.
	Concurrency []int
	// Format is the output's format: table or json.
	Format string
	// Out receives the report, Progress the lines that say what the run
	// chose or met on the way; Loop.Progress is told how each run goes.
	Out, Progress io.Writer
}

// checkFormat checks Spec.Format.
func (s Spec) checkFormat() error {
	if s.Format != "table" && s.Format != "json" {
		return fmt.Errorf("--format %q: want table or json", s.Format)
	}
	return nil
}

// Prepared is a run built from a Spec: the systems' setup, the closed
// loop's options and how the models were placed.
type Prepared struct {
	// Spec is what the run was built from.
	Spec Spec
	// Setup builds the systems.
	Setup Setup
	// Options are the closed loop's options (Concurrency unset).
	Options Options
	// Placed is the models' placement (empty when no system runs in this
	// process).
	Placed loader.Placed
}

// Prepare builds a run: it checks that the models share a vocabulary
// (opening each in turn), reads the prompts, and places the models when
// a system runs in this process (inProcess), saying on s.Progress what
// auto chose. The Prepared Spec's Out and Progress are never nil
// (io.Discard when unset).
func Prepare(ctx context.Context, s Spec, inProcess bool) (Prepared, error) {
	if s.Out == nil {
		s.Out = io.Discard
	}
	if s.Progress == nil {
		s.Progress = io.Discard
	}
	launch, err := config.ParseLaunch(s.Thresholds, len(s.Models), s.MaxWait)
	if err != nil {
		return Prepared{}, fmt.Errorf("--thresholds: %w", err)
	}
	ks, err := Kinds(ctx, s.KVReserveMB, s.Models, inProcess)
	if err != nil {
		return Prepared{}, err
	}
	voc, err := ks.SharedVocabulary(ctx, s.Models)
	if err != nil {
		return Prepared{}, fmt.Errorf("bench: %w", err)
	}
	if s.Loop.ClientProcs < 0 {
		return Prepared{}, fmt.Errorf("--client-procs %d: want 0 (all) or more", s.Loop.ClientProcs)
	}
	r := Prepared{Spec: s, Options: s.Loop}
	r.Options.BOS = voc.BOS
	if r.Options.Vocab <= 0 {
		r.Options.Vocab = voc.Size
	}
	if err := r.readPrompts(voc, inProcess); err != nil {
		return r, err
	}
	if p, o := r.Options.Longest(); inProcess && p+o > voc.ContextLength {
		return r, fmt.Errorf("the longest request (a %d-token prompt and %d output tokens) exceeds the models' context of %d tokens: lower --max-tokens or --prompt-len", p, o, voc.ContextLength)
	}
	r.Setup = Setup{Models: s.Models, Algorithm: s.Algorithm, Params: s.Params, Registry: builtin.Registry(), Launch: launch, BusDelay: s.BusDelay,
		HTTP: s.HTTP, Speculate: s.Speculate, Kinds: ks, Deploy: s.Deploy}
	if !inProcess {
		return r, nil
	}
	if r.Placed, err = ks.Place(ctx, s.Models, s.Placement, loader.PlaceOptions{}); err != nil {
		return r, err
	}
	r.Setup.Models, r.Setup.TimeShared = r.Placed.Models, r.Placed.TimeShared()
	if r.Placed.Reason != "" {
		fmt.Fprintf(s.Progress, "placement: %s (%s)\n", r.Placed.Placement, r.Placed.Reason)
	}
	return r, nil
}

// readPrompts checks the range ratio and reads the prompts file, if any.
func (r *Prepared) readPrompts(voc loader.Vocabulary, inProcess bool) error {
	if rr := r.Options.RangeRatio; rr < 0 || rr >= 1 {
		return fmt.Errorf("--range-ratio %g: want 0 ≤ r < 1", rr)
	}
	if r.Spec.PromptsFile == "" {
		return nil
	}
	var enc func(string) []int32
	if voc.Tokenizer != nil {
		enc = func(s string) []int32 { return voc.Tokenizer.Encode(s, true) }
	} else if inProcess {
		return errors.New("--prompts: the models have no tokenizer (simulated models): give --model files, or measure only servers (--url)")
	}
	var err error
	r.Options.Prompts, err = ReadPrompts(r.Spec.PromptsFile, enc)
	return err
}

// Placement describes the run's placement for reports ("" when no system
// runs in this process).
func (r Prepared) Placement() string {
	if r.Placed.Placement == "" {
		return ""
	}
	var th []string
	for _, m := range r.Placed.Models {
		if m.Threads > 0 {
			th = append(th, fmt.Sprintf("%s %d", m.Name, m.Threads))
		}
	}
	s := string(r.Placed.Placement)
	if r.Spec.Placement == config.PlacementAuto {
		s += " (auto)"
	}
	if len(th) > 0 {
		s += ", threads " + strings.Join(th, ", ")
	}
	return s
}

// Kinds returns the engine kinds one bench command opens its models
// with: the cpu engines share one arena of KV memory (cpu.Arena), warmed
// with kvWarmBytes before anything is measured, so that the engines bench
// opens for each measurement step on warm memory like a server's that has
// run a while, not on memory they fault in as their caches grow. The
// caches keep the blocks of finished sequences (prefix caching), so a
// slice's engines grow with the tokens it runs: the fast pair's caches
// hold 46 and 82 KB per token, and its engines grew some 560 MB (page
// faults counted) in the first round's 20-s slice at N = 8, beyond the
// 256 MB this reserve used to be; the later rounds reused that memory.
// kvReserveMB is the reserve asked for (--kv-reserve-mb); stepsHere says
// whether any engine steps in this process (not when bench only drives
// servers given by URL and opens the models for their vocabulary).
func Kinds(ctx context.Context, kvReserveMB int, ms []config.Model, stepsHere bool) (loader.Kinds, error) {
	ks := loader.Builtin()
	if !slices.ContainsFunc(ms, func(m config.Model) bool { return m.Engine == loader.KindCPU }) {
		return ks, nil
	}
	warm, err := kvWarmBytes(kvReserveMB, ms, stepsHere)
	if err != nil {
		return nil, err
	}
	arena := cpu.NewArena()
	if err := arena.Reserve(ctx, warm); err != nil {
		return nil, err
	}
	return ks.WithKVArena(arena), nil
}

// kvWarmBytes is the KV memory bench warms before it measures: mb
// (--kv-reserve-mb) megabytes, at most twice the cpu models' files
// together (tiny models, with a few MB of weights and of KV per slice, do
// not warm 1 GiB for every run), and none when no engine steps in this
// process (stepsHere false).
func kvWarmBytes(mb int, ms []config.Model, stepsHere bool) (int64, error) {
	if mb < 0 {
		return 0, fmt.Errorf("--kv-reserve-mb %d: want 0 or more", mb)
	}
	if !stepsHere {
		return 0, nil
	}
	files := int64(0)
	for _, m := range ms {
		if fi, err := os.Stat(m.Path); err == nil && m.Engine == loader.KindCPU {
			files += fi.Size()
		}
	}
	return min(int64(mb)<<20, 2*files), nil
}
