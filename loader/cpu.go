package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/engine/cpu"
	"github.com/tokenrouter/tokenrouter/engine/cpu/kernels"
	"github.com/tokenrouter/tokenrouter/gguf"
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
			if m.Profile != "" || m.Latency != nil || m.Agree != 0 {
				return errors.New("profile, latency and agree apply to engine sim only")
			}
			if m.Threads < 0 || m.KVBudgetMB < 0 || m.KVReserveMB < 0 || m.ContextLength < 0 {
				return errors.New("threads, kv_budget_mb, kv_reserve_mb and context_length must not be negative")
			}
			if m.Kernels != "" {
				if _, err := kernels.ParseLevel(m.Kernels); err != nil {
					return fmt.Errorf("kernels: %w", err)
				}
			}
			return checkCPUs(m.CPUs)
		},
		Engine: func(ctx context.Context, m config.Model) (engine.Engine, error) {
			return cpu.OpenContext(ctx, m.Path, cpu.Options{Threads: m.Threads, CPUs: m.CPUs, KVBudgetBytes: int64(m.KVBudgetMB) << 20,
				KVReserveBytes: int64(m.KVReserveMB) << 20, ContextLength: m.ContextLength, NoPrefixCache: m.NoPrefixCache, Kernels: m.Kernels, Arena: arena,
				Tokenizer: m.Tokenizer})
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
	if _, err := os.Stat(m.Path); err != nil {
		return Text{}, fmt.Errorf("model file: %w", err)
	}
	var t Text
	shipped := ""
	if gguf.IsFile(m.Path) {
		f, err := gguf.OpenMeta(m.Path)
		if err != nil {
			return Text{}, err
		}
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
		var err error
		if t.Tokenizer, err = tokenizer.Open(m.Tokenizer, vocab); err != nil {
			return Text{}, err
		}
		if shipped == "" && tokenizer.IsHF(m.Tokenizer) {
			if shipped, err = tokenizer.HFChatTemplate(m.Tokenizer); err != nil {
				return Text{}, err
			}
		}
	}
	err := t.setTemplate(m, shipped)
	return t, err
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
