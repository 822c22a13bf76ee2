package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/llama2c"
	"github.com/tokenrouter/tokenrouter/models/tiny"
	"github.com/tokenrouter/tokenrouter/tokenizer"
)

// KindCPU names the pure-Go CPU engine (engine/cpu): llama-family weights
// from a GGUF file or a llama2.c checkpoint.
const KindCPU = "cpu"

// cpuKind opens engine/cpu models: Path, Tokenizer, Threads, CPUs,
// KVBudgetMB, KVReserveMB and ContextLength; with arena, their KV caches
// take and return their memory there.
func cpuKind(arena *cpu.Arena) Kind {
	return Kind{
		Name:  KindCPU,
		Cores: true,
		Check: func(m config.Model) error {
			if m.Path == "" {
				return errors.New("engine cpu needs path")
			}
			if m.Profile != "" || m.Latency != nil || m.Agree != 0 || m.NoSpin {
				return errors.New("profile, latency, agree and no_spin apply to engine sim only")
			}
			if m.Threads < 0 || m.KVBudgetMB < 0 || m.KVReserveMB < 0 || m.ContextLength < 0 {
				return errors.New("threads, kv_budget_mb, kv_reserve_mb and context_length must not be negative")
			}
			for _, p := range []string{m.Path, m.Tokenizer} {
				if name, ok := config.Embedded(p); ok && !tiny.Known(name) {
					return fmt.Errorf("%s: no such embedded file (have %s)", p, strings.Join(tiny.Names(), ", "))
				}
			}
			if m.Kernels != "" {
				if _, err := kernels.ParseLevel(m.Kernels); err != nil {
					return fmt.Errorf("kernels: %w", err)
				}
			}
			return checkCPUs(m.CPUs)
		},
		Engine: func(ctx context.Context, m config.Model) (engine.Engine, error) {
			return openCPU(ctx, m, cpu.Options{Threads: m.Threads, CPUs: m.CPUs, KVBudgetBytes: int64(m.KVBudgetMB) << 20,
				KVReserveBytes: int64(m.KVReserveMB) << 20, ContextLength: m.ContextLength, NoPrefixCache: m.NoPrefixCache, Kernels: m.Kernels, Arena: arena,
				Tokenizer: m.Tokenizer, LoadProgress: loadProgress(ctx, m.Name)})
		},
		Text: cpuText,
	}
}

// WithKVArena returns ks with its cpu kind opening every engine on arena
// (cpu.Options.Arena): engines opened one after another, as a benchmark
// opens them for each measurement, reuse the KV memory of those closed
// before them.
func (ks Kinds) WithKVArena(arena *cpu.Arena) Kinds {
	out := slices.Clone(ks)
	for i := range out {
		if out[i].Name == KindCPU {
			out[i] = cpuKind(arena)
		}
	}
	return out
}

// cpuText reads a cpu model's tokenizer and chat template without its
// weights (a GGUF file is parsed for its metadata only): the Tokenizer
// file when given, else the GGUF file's own. A llama2.c checkpoint carries
// no tokenizer. The template is the configured one, else the GGUF file's,
// else a Hugging Face tokenizer's.
func cpuText(m config.Model, vocab int) (Text, error) {
	f, err := modelMeta(m.Path)
	if err != nil {
		return Text{}, err
	}
	var t Text
	shipped := ""
	if f != nil {
		shipped, _ = f.String("tokenizer.chat_template")
		if m.Tokenizer == "" {
			if t.Tokenizer, err = tokenizer.FromGGUF(f); err != nil {
				return Text{}, err
			}
		}
	}
	if t.Tokenizer == nil {
		if m.Tokenizer == "" {
			return Text{}, fmt.Errorf("%s is not a GGUF file; a llama2.c checkpoint needs tokenizer", m.Path)
		}
		if t.Tokenizer, err = openTokenizer(m.Tokenizer, vocab); err != nil {
			return Text{}, err
		}
		if shipped == "" && tokenizer.IsHF(m.Tokenizer) {
			if shipped, err = tokenizer.HFChatTemplate(m.Tokenizer); err != nil {
				return Text{}, err
			}
		}
	}
	err = t.setTemplate(m, shipped)
	return t, err
}

// embeddedFile returns the bytes of an embedded path (config.Embedded),
// read in place from the binary; ok is false for a path on disk.
func embeddedFile(path string) (b []byte, ok bool, err error) {
	name, ok := config.Embedded(path)
	if !ok {
		return nil, false, nil
	}
	if b, found := tiny.File(name); found {
		return b, true, nil
	}
	return nil, true, fmt.Errorf("%s: no such embedded file (have %s)", path, strings.Join(tiny.Names(), ", "))
}

// openCPU opens a cpu model's engine: a file on disk (a GGUF file is
// mapped), or an embedded file read in place, with its embedded tokenizer
// read from memory too.
func openCPU(ctx context.Context, m config.Model, opts cpu.Options) (engine.Engine, error) {
	if _, ok := config.Embedded(opts.Tokenizer); ok {
		t, err := openTokenizer(opts.Tokenizer, 0)
		if err != nil {
			return nil, err
		}
		opts.Vocab = make([]string, t.VocabSize())
		for i := range opts.Vocab {
			opts.Vocab[i] = t.Token(int32(i))
		}
	}
	b, ok, err := embeddedFile(m.Path)
	switch {
	case err != nil:
		return nil, err
	case ok:
		name, _ := config.Embedded(m.Path)
		return cpu.OpenBytes(ctx, name, b, opts)
	}
	return cpu.OpenContext(ctx, m.Path, opts)
}

// modelMeta returns a model file's GGUF metadata, nil for a llama2.c
// checkpoint: the header of a file on disk (not its weights), or an
// embedded file parsed in place.
func modelMeta(path string) (*gguf.File, error) {
	b, ok, err := embeddedFile(path)
	switch {
	case err != nil:
		return nil, err
	case ok && isGGUF(b):
		f, err := gguf.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return f, nil
	case ok:
		return nil, nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("model file: %w", err)
	}
	if !gguf.IsFile(path) {
		return nil, nil
	}
	return gguf.OpenMeta(path)
}

// openTokenizer opens a tokenizer file (tokenizer.Open), or an embedded one
// from memory: GGUF, or a llama2.c tokenizer.bin of vocab tokens (0: all).
func openTokenizer(path string, vocab int) (*tokenizer.Tokenizer, error) {
	b, ok, err := embeddedFile(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("tokenizer: %w", err)
	case !ok:
		return tokenizer.Open(path, vocab)
	case isGGUF(b):
		f, err := gguf.Parse(b)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
		}
		return tokenizer.FromGGUF(f)
	}
	v, err := llama2c.ParseTokenizer(b, vocab)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return tokenizer.FromLlama2c(v)
}

// isGGUF reports whether b starts with the GGUF magic.
func isGGUF(b []byte) bool {
	return len(b) >= len(gguf.Magic) && string(b[:len(gguf.Magic)]) == gguf.Magic
}

// checkCPUs validates a cpu model's CPU set. Pinning needs Linux; a CPU set
// elsewhere is refused rather than ignored.
func checkCPUs(cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	for _, c := range cpus {
		if c < 0 {
			return fmt.Errorf("cpus: CPU %d is negative", c)
		}
	}
	if runtime.GOOS != "linux" {
		return fmt.Errorf("cpus: pinning threads to CPUs works on Linux only (this is %s)", runtime.GOOS)
	}
	return nil
}
