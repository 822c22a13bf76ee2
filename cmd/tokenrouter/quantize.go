package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/gguf/quantize"
	"github.com/tokenrouter/tokenrouter/internal/progress"
)

// newQuantizeCmd builds `tokenrouter quantize IN.gguf OUT.gguf --type T`.
func newQuantizeCmd() *cobra.Command {
	var (
		typ  string
		pure bool
		opts quantize.Options
	)
	cmd := &cobra.Command{
		Use:   "quantize IN.gguf OUT.gguf",
		Short: "Write a GGUF model with quantised weights (Q4_K_M, Q5_K_M, Q6_K, Q8_0, Q4_0, …)",
		Long: "quantize copies IN to OUT with its weight matrices in the types of a llama.cpp preset\n" +
			"(--type " + strings.Join(quantize.Names(), ", ") + "),\n" +
			"or all in one tensor type with --pure. All metadata are kept and general.file_type is set.\n" +
			"Tensors stream one at a time, rows quantised on --threads cores. On a terminal, a bar on\n" +
			"stderr shows the bytes written.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := parseMix(typ, pure)
			if err != nil {
				return err
			}
			src, err := gguf.Open(args[0])
			if err != nil {
				return err
			}
			defer src.Close()
			start := time.Now()
			sum, err := quantizeFile(cmd, args[1], src, m, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s, %s of tensor data (%s) in %.1fs\n",
				args[1], m.Name, mib(sum.Bytes), typeCounts(sum.Tensors), time.Since(start).Seconds())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", "Q4_K_M", "preset ("+strings.Join(quantize.Names(), ", ")+") or, with --pure, a tensor type")
	f.BoolVar(&pure, "pure", false, "put every weight matrix in --type (a tensor type such as Q4_K), no per-tensor rules")
	f.IntVar(&opts.Threads, "threads", 0, "threads quantising rows (0: all cores)")
	f.BoolVar(&opts.AllowRequantize, "allow-requantize", false, "decode already quantised tensors and quantise them again")
	return cmd
}

// quantizeFile writes src quantised with m to out (quantize.File), with a
// bar of the bytes written.
func quantizeFile(cmd *cobra.Command, out string, src *gguf.File, m quantize.Mix, opts quantize.Options) (quantize.Summary, error) {
	total, err := ggufSize(quantize.Header(src, m))
	if err != nil {
		return quantize.Summary{}, err
	}
	bar := newBar(cmd, filepath.Base(out), total, progress.Bytes)
	defer bar.Done()
	var sum quantize.Summary
	err = gguf.WriteFile(out, func(w io.Writer) error {
		sum, err = quantize.File(cmd.Context(), bar.CountWriter(w), src, m, opts)
		return err
	})
	return sum, err
}

// parseMix turns --type and --pure into a mix.
func parseMix(typ string, pure bool) (quantize.Mix, error) {
	if !pure {
		return quantize.Lookup(typ)
	}
	for t := range gguf.TensorType(64) {
		if strings.EqualFold(t.String(), typ) && t.Supported() {
			return quantize.Pure(t)
		}
	}
	return quantize.Mix{}, fmt.Errorf("--pure --type %q: not a tensor type", typ)
}

// typeCounts lists tensor counts by type, e.g. "Q4_K×120 Q6_K×25 F32×61".
func typeCounts(m map[gguf.TensorType]int) string {
	types := make([]gguf.TensorType, 0, len(m))
	for t := range m {
		types = append(types, t)
	}
	slices.Sort(types)
	parts := make([]string, len(types))
	for i, t := range types {
		parts[i] = fmt.Sprintf("%s×%d", t, m[t])
	}
	return strings.Join(parts, " ")
}

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
