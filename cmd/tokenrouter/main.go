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
	"runtime/pprof"
	"runtime/trace"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, prof := newRoot()
	err := root.ExecuteContext(ctx)
	if perr := prof.stop(); err == nil {
		err = perr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tokenrouter:", err)
		stop()
		os.Exit(1)
	}
}

// newRootCmd builds the command tree. Each subcommand lives in its own file.
func newRootCmd() *cobra.Command {
	root, _ := newRoot()
	return root
}

// newRoot builds the command tree and the profiler its --cpuprofile and
// --trace flags start; the caller stops it when the command returns.
func newRoot() (*cobra.Command, *profiler) {
	prof := &profiler{}
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
	root.PersistentFlags().StringVar(&prof.cpuPath, "cpuprofile", "", "write a CPU profile of the whole command to this file (go tool pprof)")
	root.PersistentFlags().StringVar(&prof.tracePath, "trace", "", "write an execution trace of the whole command to this file (go tool trace): scheduling, GC and blocking")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		lvl, _ := cmd.Flags().GetString("log-level")
		format, _ := cmd.Flags().GetString("log-format")
		h, err := logHandler(os.Stderr, lvl, format)
		if err != nil {
			return err
		}
		slog.SetDefault(slog.New(h))
		return prof.start()
	}
	root.AddCommand(
		newGenerateCmd(),
		newBenchCmd(),
		newEvalCmd(),
		newPlanCmd(),
		newServeCmd(),
		newSubserverCmd(),
		newQuantizeCmd(), newGenModelCmd(),
		newTrainRouterCmd(),
		newConvertRouterCmd(),
		newChatCmd(),
	// one line per subcommand constructor (newXxxCmd), each in its own file
	)
	return root, prof
}

// profiler writes the CPU profile and execution trace the root flags ask
// for, from the start of a command to its end.
type profiler struct {
	cpuPath, tracePath string
	files              []*os.File
	stops              []func()
}

// start opens the files and starts what they ask for.
func (p *profiler) start() error {
	for _, w := range []struct {
		flag, path string
		start      func(io.Writer) error
		stop       func()
	}{
		{"--cpuprofile", p.cpuPath, pprof.StartCPUProfile, pprof.StopCPUProfile},
		{"--trace", p.tracePath, trace.Start, trace.Stop},
	} {
		if w.path == "" {
			continue
		}
		f, err := os.Create(w.path)
		if err != nil {
			return fmt.Errorf("%s: %w", w.flag, err)
		}
		p.files = append(p.files, f)
		if err := w.start(f); err != nil {
			return fmt.Errorf("%s: %w", w.flag, err)
		}
		p.stops = append(p.stops, w.stop)
	}
	return nil
}

// stop ends the profiles and closes their files; a second call does
// nothing.
func (p *profiler) stop() error {
	for _, s := range p.stops {
		s()
	}
	var err error
	for _, f := range p.files {
		if e := f.Close(); e != nil && err == nil {
			err = fmt.Errorf("closing %s: %w", f.Name(), e)
		}
	}
	p.stops, p.files = nil, nil
	return err
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
