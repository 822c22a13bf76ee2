package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/gguf"
	"github.com/tokenrouter/tokenrouter/gguf/quantize"
	"github.com/tokenrouter/tokenrouter/gguf/synth"
	"github.com/tokenrouter/tokenrouter/internal/progress"
)

// newGenModelCmd builds `tokenrouter gen-model --shape S --type T --out F`.
func newGenModelCmd() *cobra.Command {
	var (
		shape, typ, out string
		pure            bool
		opts            synth.Options
	)
	var names []string
	for _, s := range synth.Shapes() {
		names = append(names, s.Name)
	}
	cmd := &cobra.Command{
		Use:   "gen-model --shape NAME --type TYPE --out FILE",
		Short: "Write a GGUF model of a real model's shape with random weights",
		Long: "gen-model writes a model with the shape of a real one (--shape " + strings.Join(names, ", ") + ")\n" +
			"and random weights (N(0, 0.02), norms 1.0, a synthetic byte-level BPE vocabulary), typed like\n" +
			"`tokenrouter quantize --type` would type it. Generation streams; the file depends on --seed only.\n" +
			"On a terminal, a bar on stderr shows the bytes written.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := synth.Lookup(shape)
			if err != nil {
				return err
			}
			m, err := parseMix(typ, pure)
			if err != nil {
				return err
			}
			if opts.Threads <= 0 {
				opts.Threads = runtime.GOMAXPROCS(0)
			}
			start := time.Now()
			if err := writeModel(cmd, out, s, m, opts); err != nil {
				return err
			}
			st, err := os.Stat(out)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s %s, %s in %.1fs\n", out, s.Name, m.Name, mib(st.Size()), time.Since(start).Seconds())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&shape, "shape", "", "model shape: "+strings.Join(names, ", "))
	f.StringVar(&typ, "type", "Q8_0", "preset (as for quantize) or, with --pure, a tensor type")
	f.BoolVar(&pure, "pure", false, "put every weight matrix in --type (a tensor type), no per-tensor rules")
	f.StringVar(&out, "out", "", "output file")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the weights")
	f.IntVar(&opts.Threads, "threads", 0, "threads generating rows (0: all cores)")
	_ = cmd.MarkFlagRequired("shape")
	_ = cmd.MarkFlagRequired("out")
	return cmd
}

// writeModel writes the model to out (synth.WriteFile), with a bar of the
// bytes written.
func writeModel(cmd *cobra.Command, out string, s synth.Shape, m quantize.Mix, opts synth.Options) error {
	if err := s.Check(); err != nil {
		return err
	}
	total, err := ggufSize(s.Header(m))
	if err != nil {
		return err
	}
	bar := newBar(cmd, filepath.Base(out), total, progress.Bytes)
	defer bar.Done()
	return gguf.WriteFile(out, func(w io.Writer) error {
		return synth.Write(cmd.Context(), bar.CountWriter(w), s, m, opts)
	})
}
