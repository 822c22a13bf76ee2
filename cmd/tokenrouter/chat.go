package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/termchat"
)

// chatFlags are the chat command's flags: serve's, for the deployment it
// starts, and the chat's own.
type chatFlags struct {
	serve       serveFlags
	url, system string
	noColor     bool
	temperature float64
	maxTokens   int
}

const chatLong = `chat is an interactive chat in the terminal. Each token of an answer is
coloured by the model that wrote it, and a line after the answer gives its
tokens, tokens per second and each model's share.

With --url it talks to a running server (--api-key, --preset to pick one of
its presets; /model switches). Without it, it starts the deployment that
serve's flags describe (the same flags as tokenrouter serve: --engine sim,
--model NAME=PATH, --algorithm, --config, ...) in this process, on a free
loopback port:

  tokenrouter chat --engine sim
  tokenrouter chat --url http://127.0.0.1:30000 --preset r-stitch

Commands: /set temperature 0.7 (also top_p, max_tokens, seed, system),
/model NAME, /clear, /stats, /help, /exit. A line ending in \ continues,
""" opens a block that """ closes. Ctrl-C stops the answer being written;
at an empty prompt it leaves, as Ctrl-D does. Lines are edited (with
history) when input and output are a terminal, and read as they come
otherwise; output that is not a terminal is plain text, without colours
(as with --no-color or NO_COLOR set).`

func newChatCmd() *cobra.Command {
	var f chatFlags
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Chat in the terminal with local models or a running server",
		Long:  chatLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runChat(cmd, &f) },
	}
	addServeFlags(cmd, &f.serve)
	fl := cmd.Flags()
	fl.StringVar(&f.url, "url", "", "chat with the server at this URL (http://HOST:PORT) instead of starting the models here")
	fl.StringVar(&f.system, "system", "", "system message at the start of the conversation")
	fl.Float64Var(&f.temperature, "temperature", 0, "sampling temperature (default: the server's)")
	fl.IntVar(&f.maxTokens, "max-tokens", 0, "output limit per answer (default: the server's)")
	fl.BoolVar(&f.noColor, "no-color", false, "no colours (also: NO_COLOR set)")
	fl.Lookup("api-key").Usage = "the key sent as \"Authorization: Bearer <key>\", which the models chat starts require " +
		"(default: $TOKENROUTER_API_KEY, else one made up per run)"
	fl.Lookup("preset").Usage = "the preset to chat with: one of --url's (default: the first listed), or the name of the one chat starts " +
		"(default: the algorithm's name)"
	for _, n := range append(chatRefusedFlags(), "cors-origin", "allow-no-key", "max-connections", "max-conns-per-client",
		"read-header-timeout", "body-timeout", "idle-timeout", "write-timeout") {
		_ = fl.MarkHidden(n) // the listener's: chat's server serves only it, on loopback
	}
	return cmd
}

// chatRefusedFlags are serve's flags of the listener and of scale-out,
// which chat refuses: it serves its models in this process, on a free
// loopback port.
func chatRefusedFlags() []string {
	return []string{"host", "port", "processes", "nats", "nats-prefix", "join-timeout", "bus-delay",
		"nats-creds", "nats-nkey", "nats-ca", "nats-cert", "nats-key", "bus-key-file"}
}

func runChat(cmd *cobra.Command, f *chatFlags) error {
	o := termchat.Options{URL: f.url, Model: f.serve.preset, System: f.system, In: os.Stdin, Out: os.Stdout,
		NoColor: f.noColor || os.Getenv("NO_COLOR") != ""}
	changed := cmd.Flags().Changed
	if changed("temperature") {
		o.Temperature = &f.temperature
	}
	if changed("max-tokens") {
		if f.maxTokens < 1 {
			return fmt.Errorf("--max-tokens %d: want a positive integer", f.maxTokens)
		}
		o.MaxTokens = &f.maxTokens
	}
	if err := chatTarget(cmd, f, &o); err != nil {
		return err
	}
	// Ctrl-C belongs to the chat (it stops an answer), not to the root
	// command's context; SIGTERM still ends the session.
	ctx, stop := signal.NotifyContext(context.WithoutCancel(cmd.Context()), syscall.SIGTERM)
	defer stop()
	sigint := make(chan os.Signal, 1)
	signal.Notify(sigint, os.Interrupt)
	defer signal.Stop(sigint)
	o.Interrupts = sigint
	return termchat.Run(ctx, o)
}

// chatTarget sets the server of the session: --url (serve's flags but
// --api-key and --preset refused), or the deployment serve's flags
// describe, and its log.
func chatTarget(cmd *cobra.Command, f *chatFlags, o *termchat.Options) error {
	var err error
	if f.url != "" {
		o.APIKey = cmp.Or(f.serve.apiKey, os.Getenv("TOKENROUTER_API_KEY"))
		probe := &cobra.Command{}
		addServeFlags(probe, &serveFlags{})
		cmd.Flags().Visit(func(fl *pflag.Flag) {
			if probe.Flags().Lookup(fl.Name) != nil && fl.Name != "api-key" && fl.Name != "preset" && err == nil {
				err = fmt.Errorf("--%s describes the models chat starts; with --url the server has its own", fl.Name)
			}
		})
		return err
	}
	for _, n := range chatRefusedFlags() {
		if cmd.Flags().Changed(n) {
			return fmt.Errorf("--%s: chat serves its models in this process on a free loopback port; "+
				"for more, run tokenrouter serve and chat --url", n)
		}
	}
	cfg, err := serveConfig(cmd, f.serve)
	if err != nil {
		return err
	}
	o.Local, o.APIKey = &cfg, cfg.APIKey
	// The log (the engines' too, through the default logger) shows
	// warnings unless --log-level says otherwise.
	level, _ := cmd.Flags().GetString("log-level")
	if !cmd.Flags().Changed("log-level") {
		level = "warn"
	}
	format, _ := cmd.Flags().GetString("log-format")
	o.LogOutput = termchat.NewLogOutput(os.Stderr)
	h, err := logHandler(o.LogOutput, level, format)
	if err != nil {
		return err
	}
	o.Logger = slog.New(h)
	slog.SetDefault(o.Logger)
	return nil
}
