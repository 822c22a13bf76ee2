package main

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/route/nn"
)

// newConvertRouterCmd builds `tokenrouter convert-router IN.pt --out OUT.safetensors`.
func newConvertRouterCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "convert-router IN.pt [--out OUT.safetensors]",
		Short: "Convert a router file R2R saved with torch.save to safetensors",
		Long: "convert-router reads a router R2R's save_model wrote (a torch.save archive: its state dict,\n" +
			"model_type, init_args and common_args) and writes the same tensors (F32) and fields (as\n" +
			"safetensors metadata) to --out (default: IN with the extension .safetensors). The r2r\n" +
			"algorithm reads either file; the torch file is read without running Python or any code it names.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				out = strings.TrimSuffix(args[0], filepath.Ext(args[0])) + ".safetensors"
			}
			if filepath.Clean(out) == filepath.Clean(args[0]) {
				return fmt.Errorf("--out %s would overwrite the input", out)
			}
			w, err := nn.ConvertTorch(args[0], out)
			if err != nil {
				return err
			}
			return describeRouter(cmd, out, w)
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "output safetensors file (default: IN with the extension .safetensors)")
	return cmd
}

// describeRouter prints what convert-router wrote: the file, its
// classifier and threshold, and each tensor's shape.
func describeRouter(cmd *cobra.Command, out string, w *nn.Weights) error {
	thr := "none (r2r takes its parameter threshold, else 0.5)"
	if t, ok, err := w.CommonThreshold(); err != nil {
		return err
	} else if ok {
		thr = fmt.Sprint(t)
	}
	names := make([]string, 0, len(w.Tensors))
	values := 0
	for n, t := range w.Tensors {
		names = append(names, n)
		values += len(t.Data)
	}
	sort.Strings(names)
	mt := w.Meta["model_type"]
	if mt == "" {
		mt = "(no model_type)"
	}
	o := cmd.OutOrStdout()
	fmt.Fprintf(o, "%s: %s, %d tensors (%d values), threshold %s\n", out, mt, len(names), values, thr)
	for _, n := range names {
		fmt.Fprintf(o, "  %-48s %v\n", n, w.Tensors[n].Shape)
	}
	return nil
}
