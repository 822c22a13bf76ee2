package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/lab"
	"github.com/tokenrouter/tokenrouter/perfmodel"
)

// calibrateGridFlags are the --calibrate-* flags of the grid a
// calibration measures.
type calibrateGridFlags struct {
	repeats                   int
	batches, tokens, contexts []int
	promptBatches             []int
}

// options returns the calibration options the flags give; promptLen is
// bench's --prompt-len, the tokens a sequence appends in the prompt-sized
// steps.
func (c calibrateGridFlags) options(promptLen int) lab.CalibrateOptions {
	return lab.CalibrateOptions{Batches: c.batches, Tokens: c.tokens, Contexts: c.contexts, Repeats: c.repeats,
		PromptBatches: c.promptBatches, PromptTokens: promptLen}
}

// addCalibrateGridFlags registers the grid's flags, their help starting
// with prefix.
func addCalibrateGridFlags(fl *pflag.FlagSet, c *calibrateGridFlags, prefix string) {
	fl.IntSliceVar(&c.batches, "calibrate-batches", []int{1, 2, 4, 5, 8, 9, 16, 17}, prefix+"batch sizes to measure (the powers of two and one past them: engines' steps jump where a tile of rows fills)")
	fl.IntSliceVar(&c.tokens, "calibrate-tokens", []int{1, 2, 4}, prefix+"tokens each sequence appends in a measured step (1: decode)")
	fl.IntSliceVar(&c.contexts, "calibrate-contexts", []int{16, 128}, prefix+"tokens each sequence holds before a measured step (the first with every batch and token count, the others with decodes)")
	fl.IntSliceVar(&c.promptBatches, "calibrate-prompt-batches", []int{1, 8, 16}, prefix+"batch sizes of the prompt-sized steps measured (each sequence appending --prompt-len tokens: requests that start together send their prompts in one step)")
	fl.IntVar(&c.repeats, "calibrate-repeats", 5, prefix+"repeats per point (their median counts, times the mean over median of all of them)")
}

// benchCalibrateLong is the bench calibrate command's help text.
const benchCalibrateLong = `bench calibrate fits the step-time curves of the --model files on the CPU
engine, under each placement (--calibrate-placement), and writes them as
profile files, which plan --profile, bench run --profile (the sim engine),
bench compare --predict and bench validate --profile read. With two models it
also prints the throughput model's best thresholds per concurrency
(--calibrate-plan) for r2r at --p, with --prompt-len and --max-tokens as the
workload.

  tokenrouter bench calibrate --model slm=A.gguf --model llm=B.gguf --out pair.json`

// newBenchCalibrateCmd builds "bench calibrate": lab.RunCalibrate.
func newBenchCalibrateCmd() *cobra.Command {
	var m benchModelFlags
	var grid calibrateGridFlags
	var promptLen, maxTokens int
	var plan string
	var c lab.CalibrateRun
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Fit real models' step-time curves on the CPU engine and write profile files",
		Long:  benchCalibrateLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if plan != "" {
				ns, err := parseConcurrency(plan)
				if err != nil {
					return fmt.Errorf("--calibrate-plan: %w", err)
				}
				c.Plan = ns
			}
			cores := c.Options.Cores
			c.Options = grid.options(promptLen)
			c.Options.Cores, c.Models = cores, namedModels(m)
			c.Workload = perfmodel.Workload{PromptLen: promptLen, OutputLen: maxTokens}
			c.Out, c.Progress = cmd.OutOrStdout(), cmd.ErrOrStderr()
			return lab.RunCalibrate(cmd.Context(), c)
		},
	}
	fl := cmd.Flags()
	addModelFileFlags(fl, &m)
	addKVReserveFlag(fl, &c.KVReserveMB)
	addCalibrateGridFlags(fl, &grid, "")
	fl.StringVar(&c.File, "out", "", "the profile file to write (default: stdout); with both placements, FILE.partitioned.json and FILE.time-shared.json")
	fl.IntVar(&c.Options.Cores, "calibrate-cores", 0, "cores the models share (0: all); time-shared steps use all, partitioned ones an even share")
	fl.StringVar(&c.Placement, "calibrate-placement", "both", "partitioned, time-shared or both")
	fl.StringVar(&plan, "calibrate-plan", "2-8", "with two models: print the model's best B per N at these concurrencies for r2r at --p, with --prompt-len and --max-tokens as the workload (empty: none)")
	fl.Float64Var(&c.P, "p", 0.35, "r2r's routing probability in --calibrate-plan")
	fl.IntVar(&promptLen, "prompt-len", 16, "prompt tokens per request: each sequence's tokens in the prompt-sized steps, and the plan's prompts")
	fl.IntVar(&maxTokens, "max-tokens", 4096, "output tokens per request in the plan")
	return cmd
}
