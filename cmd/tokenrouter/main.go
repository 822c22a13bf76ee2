// Command tokenrouter is TokenRouter's single binary: serve, bench, plan,
// generate and the other subcommands. Flags become a configuration and the
// configuration is wired to the packages; no logic lives here.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "tokenrouter:", err)
		stop()
		os.Exit(1)
	}
}

// newRootCmd builds the command tree. Each subcommand lives in its own file.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "tokenrouter",
		Short:         "Serve token-level LLM routing: program per request, execute per model",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Read().String(),
	}
	root.SetVersionTemplate("tokenrouter {{.Version}}\n")
	root.PersistentFlags().String("log-level", "info", "log level: debug, info, warn, error")
	root.PersistentFlags().String("log-format", "text", "log format: text (key=value) or json (one object per line)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		lvl, _ := cmd.Flags().GetString("log-level")
		format, _ := cmd.Flags().GetString("log-format")
		h, err := logHandler(os.Stderr, lvl, format)
		if err != nil {
			return err
		}
		slog.SetDefault(slog.New(h))
		return nil
	}
	root.AddCommand(
		newGenerateCmd(),
		newBenchCmd(),
		newEvalCmd(),
		newPlanCmd(),
		newServeCmd(),
		newSubserverCmd(),
		newQuantizeCmd(), newGenModelCmd(),
	// one line per subcommand constructor (newXxxCmd), each in its own file
	)
	return root
}

// logHandler is the log handler --log-level and --log-format ask for.
func logHandler(w io.Writer, level, format string) (slog.Handler, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}
