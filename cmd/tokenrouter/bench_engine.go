package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/engine/cpu/cpubench"
)

// benchEngineLong is the bench engine command's help text.
const benchEngineLong = `bench engine measures the CPU engine on model files (GGUF or llama2.c), per
file and thread count: decode tok/s of one sequence, prompt tok/s of one
--prompt-token extend, aggregate decode tok/s of each --sequences count (each
sequence first holds a prompt), and peak resident memory (the engine without
its prefix cache: the prompts are random); and in the same run the machine's
read bandwidth and the decode bound it gives (bytes of weights read per token
/ bandwidth). Each figure is the median of --repeat runs. The decode runs are
paired with the bandwidth: each follows a bandwidth measurement at its thread
count, the thread counts take turns round after round, and "of bound" and
"speed-up" (over the first thread count) are medians of per-round ratios.
Without --kernels, each file's kernel plan is measured afresh at each thread
count (the engine's start-up measurement: every kernel level the CPU runs,
timed per class of operation on the model's own shapes) and printed as a
table: the level chosen per class and weight type, each level's time, and
what the measurement cost. --kernels forces one level for every class.

  tokenrouter bench engine model.gguf --threads 1,2 --sequences 4,16 --format json`

// newBenchEngineCmd builds "bench engine": flags to cpubench.Options, the
// report to text or JSON.
func newBenchEngineCmd() *cobra.Command {
	var o cpubench.Options
	var format string
	var bandwidthMiB int
	cmd := &cobra.Command{
		Use:   "engine FILE...",
		Short: "Measure the CPU engine on model files: decode, prompt and batched tok/s, peak RSS, the bandwidth bound",
		Long:  benchEngineLong,
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q: want text or json", format)
			}
			o.Files, o.BandwidthBytes = args, bandwidthMiB<<20
			rep, err := cpubench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(rep)
			}
			return cpubench.WriteText(cmd.OutOrStdout(), rep)
		},
	}
	fl := cmd.Flags()
	fl.IntSliceVar(&o.Threads, "threads", nil, "thread counts (default 1 and GOMAXPROCS)")
	fl.IntSliceVar(&o.Seqs, "sequences", []int{4, 16}, "sequence counts of the aggregate decode measurements")
	fl.IntVar(&o.Prompt, "prompt", 128, "prompt length (tokens)")
	fl.IntVar(&o.Decode, "decode", 32, "decode steps timed per run")
	fl.IntVar(&o.Repeat, "repeat", 3, "runs per measurement (the median is reported)")
	fl.StringVar(&o.Kernels, "kernels", "", "one kernel level for every class: generic, avx2, avx512, avx512ng, neon, neondot (default: measured per class)")
	fl.IntVar(&bandwidthMiB, "bandwidth-mib", 1024, "buffer the read-bandwidth measurement streams over (MiB)")
	fl.StringVar(&format, "format", "text", "output: text or json")
	return cmd
}
