package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/engine/sim"
	"github.com/tokenrouter/tokenrouter/internal/faults"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/route/builtin"
	"github.com/tokenrouter/tokenrouter/route/single"
	"github.com/tokenrouter/tokenrouter/server"
)

// serveFlags are the serve command's flags.
type serveFlags struct {
	configPath, host, apiKey, profile, algorithm, thresholds, preset, tokenizer string
	placement, chatTemplate, kernels, engine                                    string
	port, maxInFlight, defaultMaxTokens, kvReserveMB                            int
	maxBody                                                                     int64
	p                                                                           float64
	params, models, threads, cpus, corsOrigins                                  []string
	maxWait, shutdownTimeout, stallTimeout                                      time.Duration
	// Client-facing limits: timeouts, the connection cap, open listening.
	writeTimeout, readHeaderTimeout, bodyTimeout, idleTimeout time.Duration
	maxConns, maxConnsPerClient                               int
	allowNoKey                                                bool
	// Scale out: --processes, --nats, --nats-prefix, --join-timeout.
	processes       bool
	natsURL, prefix string
	// busDelay delays events between in-process sub-servers (experiments).
	busDelay    time.Duration
	joinTimeout time.Duration
	natsAuth    natsAuthFlags
	speculate   speculateFlags
	replicas    []string
}

// serveLong is the serve command's help text.
const serveLong = `serve starts the HTTP server. With no arguments it serves the tiny trained pair
built into the binary (TinyStories models of 260K and 280K parameters, about
2.2 MB: their text is childish stories) on the CPU engine, slm and llm, under
r-stitch routing on 127.0.0.1:30000, as the preset "r-stitch":

  tokenrouter serve
  curl -N localhost:30000/v1/chat/completions -H 'Content-Type: application/json' \
    -d '{"model":"r-stitch","messages":[{"role":"user","content":"Tell me a story"}],"stream":true,"max_tokens":64}'

--engine sim serves two simulated models instead (no weights, pseudo-word
text; the paper-r2r latency profile: slm 6.0 ms, llm 27.9 ms per step) under
r2r-random (p = 0.35), as the preset "r2r-random".

Your own models run on the CPU engine: --model NAME=PATH (GGUF, or a llama2.c
checkpoint with --tokenizer), in routing order (small model first). One
--model alone is served without routing (algorithm single); two or more need
--algorithm:

  tokenrouter serve --model slm=stories260K.bin --model llm=llama2xs-model.bin --tokenizer tok512.bin \
    --algorithm r-stitch

A PATH (or --tokenizer) embedded:FILE names a file built into the binary:
embedded:stories260K.bin, embedded:llama2xs-model.bin, embedded:tok512.bin.

Chat requests are laid out by the model's own chat template (GGUF
tokenizer.chat_template, run as Jinja); --chat-template FILE, or a built-in
layout (plain, chatml, llama2, llama3), overrides it.

--placement says how a deployment's models share the cores: partitioned (each
model on threads of its own, an even share of the cores unless --threads says;
--cpus pins them), time-shared (every model on every core, one step at a time;
scheduling stays asynchronous) or auto (the default: measured at start-up for
models on the cpu engine, and logged).

--config FILE reads a YAML configuration (models, presets, thresholds, limits);
the listener and limit flags override it. Endpoints: POST /v1/completions,
POST /v1/chat/completions, GET /v1/models, POST /generate, GET /health,
GET /metrics, and the web console at GET / (http://127.0.0.1:30000/: a
playground that colours each token by its model, and a live dashboard).
SIGTERM or Ctrl-C drains requests in flight (up to
--shutdown-timeout) before exiting.

Scale out: --processes runs each model's sub-server in its own OS process
(tokenrouter subserver, this binary), connected to an embedded NATS server on
loopback; the HTTP front end stays in this process. A child that dies ends its
requests in flight with a 503 (an error event mid-stream) within about 1.5 s
and is restarted; shutdown stops every child. Each preset gets its own set of
children. Thresholds "auto" across processes need step times known up front
(--engine sim); give others explicit ones:

  tokenrouter serve --processes --thresholds 1

--nats nats://HOST:PORT joins an external NATS server whose sub-servers run
elsewhere, started by hand with "tokenrouter subserver" (one preset per front
end; the sub-servers own their thresholds and max-wait):

  tokenrouter serve --nats nats://10.0.0.1:4222

With both flags, the child processes connect to that server instead of an
embedded one.

The embedded server listens on loopback only and requires credentials
generated per run; --processes also generates the deployment's message key per
run and hands both to its children on their standard input. With --nats:

` + natsAuthHelp + `
With --processes --nats the key is generated per run; only the NATS credentials
are needed.`

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the OpenAI-compatible and native HTTP API",
		Long:  serveLong,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return runServe(cmd, f) },
	}
	addServeFlags(cmd, &f)
	return cmd
}

// addServeFlags registers serve's flags on cmd, bound to f (chat takes the
// same ones for the deployment it starts).
func addServeFlags(cmd *cobra.Command, f *serveFlags) {
	fl := cmd.Flags()
	fl.StringVar(&f.configPath, "config", "", "YAML configuration file")
	fl.StringVar(&f.host, "host", config.DefaultHost, "listen host")
	fl.IntVar(&f.port, "port", config.DefaultPort, "listen port (0 picks a free port)")
	fl.StringVar(&f.apiKey, "api-key", "", "require this key as \"Authorization: Bearer <key>\" (default: $TOKENROUTER_API_KEY)")
	fl.IntVar(&f.maxInFlight, "max-in-flight", config.DefaultMaxInFlight, "generation requests admitted at once; beyond it: 429")
	fl.Int64Var(&f.maxBody, "max-body-bytes", config.DefaultMaxBodyBytes, "largest request body; beyond it: 413")
	fl.IntVar(&f.defaultMaxTokens, "default-max-tokens", config.DefaultMaxTokens, "output limit when a request gives none")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", config.DefaultShutdownTimeout, "how long requests in flight may finish after SIGTERM")
	fl.DurationVar(&f.writeTimeout, "write-timeout", config.DefaultWriteTimeout, "disconnect a client that accepts no response data for this long (its request is cancelled)")
	fl.DurationVar(&f.readHeaderTimeout, "read-header-timeout", config.DefaultReadHeaderTimeout, "longest time to read a request's headers")
	fl.DurationVar(&f.bodyTimeout, "body-timeout", config.DefaultBodyTimeout, "longest time to read a request's body; beyond it: 408")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", config.DefaultIdleTimeout, "close a kept-alive connection idle this long")
	fl.IntVar(&f.maxConns, "max-connections", 0, "connections served at once (0: the descriptor limit less a margin); past it /health still answers and other requests get 503")
	fl.IntVar(&f.maxConnsPerClient, "max-conns-per-client", 0, "idle or half-sent connections one client address may hold (0: a quarter of the connection cap); past it, or at the cap, the oldest such connections are closed to make room")
	fl.DurationVar(&f.stallTimeout, "stall-timeout", 0, "report a model down and restart it when its loop makes no progress for this long, e.g. an engine step that never returns (0: five of its longest steps, at least 10s)")
	fl.BoolVar(&f.allowNoKey, "allow-no-key", false, "allow a non-loopback --host without --api-key")
	fl.StringArrayVar(&f.corsOrigins, "cors-origin", nil, "allow browser calls from this origin (scheme://host[:port], or * for any; repeatable; default: no CORS)")
	fl.StringVar(&f.engine, "engine", loader.KindCPU, "cpu: --model files, or with none the tiny pair built into the binary; sim: two simulated models (no weights, pseudo-words)")
	fl.StringVar(&f.profile, "profile", "", "--engine sim: latency profile of the simulated models (default "+config.DefaultProfile+")")
	fl.StringArrayVar(&f.models, "model", nil, "real model NAME=PATH on the CPU engine (repeatable, small model first; PATH may be embedded:FILE, a file built into the binary)")
	fl.StringVar(&f.tokenizer, "tokenizer", "", "tokenizer file: for llama2.c checkpoints (tokenizer.bin or .model), or a Hugging Face tokenizer.json (or its folder)")
	fl.StringVar(&f.chatTemplate, "chat-template", "", "chat template of every model: a Jinja file, or a built-in layout (plain, chatml, llama2, llama3); default: the one the model file ships")
	fl.StringArrayVar(&f.threads, "threads", nil, "cpu engine threads: N for every model, or NAME=N (repeatable; default: as --placement says)")
	fl.StringArrayVar(&f.cpus, "cpus", nil, "pin a model's threads (Linux): CPU list such as 0-1 for every model, or NAME=LIST (repeatable)")
	fl.IntVar(&f.kvReserveMB, "kv-reserve-mb", 0, "cpu engine: KV cache memory (MiB per model, at most its budget) written at start-up, so that the cache does not fault in new memory while it grows during the first minutes (0: none)")
	fl.StringVar(&f.kernels, "kernels", "", "cpu engine: one kernel level for every class of operation (generic, avx2, avx512, avx512ng, neon, neondot; default: the fastest measured per class at start-up, cached per CPU)")
	fl.StringVar(&f.placement, "placement", string(config.PlacementAuto), "how the models share the cores: partitioned (threads of their own), time-shared (one step at a time on every core) or auto (measure and pick, logged)")
	fl.StringVar(&f.algorithm, "algorithm", "", "routing algorithm (default: "+config.TinyAlgorithm+" over the built-in pair, "+config.DefaultAlgorithm+" over --engine sim, single for one --model; two or more --model files need one)")
	fl.StringVar(&f.preset, "preset", "", "the name clients put in \"model\" (default: the algorithm's name)")
	fl.Float64Var(&f.p, "p", 0.35, "routing probability (r2r-random)")
	fl.StringArrayVar(&f.params, "param", nil, "algorithm parameter name=value (repeatable)")
	fl.StringVar(&f.thresholds, "thresholds", "auto", "batching thresholds B: \"auto\" (estimated at run time), one value, or one per model (\"1,3\")")
	fl.DurationVar(&f.maxWait, "max-wait", config.DefaultMaxWait, "launch a step anyway after this wait (0: launch only at the thresholds)")
	fl.BoolVar(&f.processes, "processes", false, "run each model's sub-server in its own process over an embedded NATS server (loopback)")
	fl.StringVar(&f.natsURL, "nats", "", "join this NATS server (nats://HOST:PORT); the sub-servers run elsewhere (tokenrouter subserver)")
	fl.StringVar(&f.prefix, "nats-prefix", busnats.DefaultPrefix, "--nats: the deployment's subject prefix (the sub-servers' --prefix)")
	fl.DurationVar(&f.joinTimeout, "join-timeout", 30*time.Second, "--processes, --nats: how long to wait for every sub-server to join")
	fl.DurationVar(&f.busDelay, "bus-delay", 0, "delay every event between the sub-servers by this much, one way (an experiment: a split deployment's network; 0: none)")
	f.natsAuth.register(fl)
	addSpeculateFlags(fl, &f.speculate)
	addReplicasFlag(fl, &f.replicas)
}

// serveConfig turns flags (and the config file) into a configuration.
func serveConfig(cmd *cobra.Command, f serveFlags) (config.Config, error) {
	cfg, err := loadServeConfig(cmd, f)
	if err != nil {
		return cfg, err
	}
	cfg.FillDefaults() // before the overrides: an explicit --port 0 picks a free port
	if err := applyServeFlags(cmd, f, &cfg); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// loadServeConfig reads the --config file, refusing the model and preset
// flags beside it, or builds the configuration from those flags.
func loadServeConfig(cmd *cobra.Command, f serveFlags) (config.Config, error) {
	if f.configPath == "" {
		return flagsConfig(f)
	}
	for _, n := range []string{"profile", "model", "tokenizer", "chat-template", "threads", "cpus", "kv-reserve-mb", "placement", "algorithm", "preset", "p", "param", "thresholds", "max-wait", "speculate", "speculate-depth", "replicas"} {
		if cmd.Flags().Changed(n) {
			return config.Config{}, fmt.Errorf("--%s: describe models and presets in the --config file", n)
		}
	}
	return config.Load(f.configPath)
}

// applyServeFlags sets the server settings from the flags: every one
// without a --config file, the ones given with it.
func applyServeFlags(cmd *cobra.Command, f serveFlags, cfg *config.Config) error {
	changed := cmd.Flags().Changed
	override := func(name string) bool { return f.configPath == "" || changed(name) }
	if override("host") {
		cfg.Host = f.host
	}
	if override("port") {
		cfg.Port = f.port
	}
	if changed("api-key") {
		cfg.APIKey = f.apiKey
	} else if cfg.APIKey == "" {
		cfg.APIKey = os.Getenv("TOKENROUTER_API_KEY")
	}
	if override("max-in-flight") {
		cfg.MaxInFlight = f.maxInFlight
	}
	if override("max-body-bytes") {
		cfg.MaxBodyBytes = f.maxBody
	}
	if override("default-max-tokens") {
		cfg.DefaultMaxTokens = f.defaultMaxTokens
	}
	if override("shutdown-timeout") {
		cfg.ShutdownTimeout = f.shutdownTimeout
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		f    time.Duration
	}{{"write-timeout", &cfg.WriteTimeout, f.writeTimeout}, {"read-header-timeout", &cfg.ReadHeaderTimeout, f.readHeaderTimeout},
		{"body-timeout", &cfg.BodyTimeout, f.bodyTimeout}, {"idle-timeout", &cfg.IdleTimeout, f.idleTimeout}} {
		if !override(d.name) {
			continue
		}
		if d.f <= 0 {
			return fmt.Errorf("--%s %v: must be positive", d.name, d.f)
		}
		*d.v = d.f
	}
	if override("max-connections") {
		cfg.MaxConnections = f.maxConns
	}
	if override("stall-timeout") {
		cfg.StallTimeout = f.stallTimeout
	}
	if override("max-conns-per-client") {
		cfg.MaxConnsPerClient = f.maxConnsPerClient
	}
	if changed("allow-no-key") {
		cfg.AllowNoKey = f.allowNoKey
	}
	if changed("cors-origin") {
		cfg.CORSOrigins = f.corsOrigins
	}
	return nil
}

// flagsConfig is the configuration the model and preset flags describe:
// --model files on the CPU engine, with none the tiny pair built into the
// binary, or --engine sim's simulated models, under one preset.
func flagsConfig(f serveFlags) (config.Config, error) {
	cfg := config.Default()
	if f.maxWait < 0 {
		return cfg, fmt.Errorf("--max-wait %v is negative: give a wait, or 0 to launch only at the thresholds", f.maxWait)
	}
	params, err := parseParams(f.params)
	if err != nil {
		return cfg, err
	}
	var algorithm string
	if cfg.Models, algorithm, err = serveModels(f); err != nil {
		return cfg, err
	}
	if f.algorithm != "" {
		algorithm = f.algorithm
	}
	if _, ok := params["p"]; !ok && algorithm == config.DefaultAlgorithm {
		params["p"] = strconv.FormatFloat(f.p, 'g', -1, 64)
	}
	if _, ok := params["tau"]; !ok && algorithm == config.TinyAlgorithm && len(f.models) == 0 {
		params["tau"] = config.TinyTau
	}
	for i := range cfg.Models {
		cfg.Models[i].ChatTemplate = f.chatTemplate
	}
	if err := applyReplicas(cfg.Models, f.replicas); err != nil {
		return cfg, err
	}
	if err := applyPlacementFlags(cfg.Models, f.threads, f.cpus); err != nil {
		return cfg, err
	}
	placement, err := config.ParsePlacement(f.placement)
	if err != nil {
		return cfg, fmt.Errorf("--placement: %w", err)
	}
	name := cmp.Or(f.preset, algorithm)
	cfg.Presets = []config.Preset{{Name: name, Algorithm: algorithm, Models: modelNames(cfg.Models), Params: params,
		Thresholds: f.thresholds, MaxWait: f.maxWait, Placement: placement, Speculate: f.speculate.mode, SpeculateDepth: f.speculate.depth}}
	if f.maxWait == 0 {
		cfg.Presets[0].MaxWait = -1 // explicit 0 disables the guard
	}
	return cfg, nil
}

// serveModels returns the models the flags describe and the algorithm that
// routes them when --algorithm names none: r2r-random over --engine sim's
// simulated pair, r-stitch over the pair built into the binary (no
// --model), single for one --model file; two or more files need
// --algorithm, and the error lists the algorithms that serve that many.
func serveModels(f serveFlags) ([]config.Model, string, error) {
	switch {
	case f.kvReserveMB < 0:
		return nil, "", fmt.Errorf("--kv-reserve-mb %d: must not be negative", f.kvReserveMB)
	case f.engine == loader.KindSim:
		models, err := simModels(f)
		return models, config.DefaultAlgorithm, err
	case f.engine != loader.KindCPU:
		return nil, "", fmt.Errorf("--engine %q: want cpu or sim", f.engine)
	case f.profile != "":
		return nil, "", errors.New("--profile is the simulated models' latency profile: add --engine sim")
	case len(f.models) == 0 && f.tokenizer != "":
		return nil, "", errors.New("--tokenizer applies to --model files (the built-in pair has its own)")
	case len(f.models) == 0:
		models := config.Tiny().Models
		for i := range models {
			models[i].KVReserveMB, models[i].Kernels = f.kvReserveMB, f.kernels
		}
		return models, config.TinyAlgorithm, nil
	}
	var models []config.Model
	for i, v := range f.models {
		m := cpuModel(parseModelSpec(v), i, f.tokenizer, 0)
		m.KVReserveMB, m.Kernels = f.kvReserveMB, f.kernels
		models = append(models, m)
	}
	if len(models) == 1 {
		return models, single.Name, nil
	}
	if f.algorithm == "" {
		return nil, "", fmt.Errorf("%d models need a routing algorithm: give --algorithm, one of %s (r-stitch needs no trained router; a single --model is served alone)",
			len(models), strings.Join(builtin.Registry().Fitting(len(models)), ", "))
	}
	return models, "", nil
}

// simModels are --engine sim's models: those of the --profile preset. The
// flags of models with weights are refused.
func simModels(f serveFlags) ([]config.Model, error) {
	if len(f.models) > 0 {
		return nil, errors.New("--model files run on the cpu engine; --engine sim serves two simulated models (--profile)")
	}
	for _, c := range []struct {
		flag string
		set  bool
	}{{"--tokenizer", f.tokenizer != ""}, {"--kv-reserve-mb", f.kvReserveMB > 0}, {"--kernels", f.kernels != ""}} {
		if c.set {
			return nil, fmt.Errorf("%s applies to the cpu engine (the simulated models hold no weights)", c.flag)
		}
	}
	preset, err := sim.LookupPreset(cmp.Or(f.profile, config.DefaultProfile))
	if err != nil {
		return nil, fmt.Errorf("--profile: %w", err)
	}
	var models []config.Model
	for i, n := range preset.Models {
		models = append(models, config.Model{Name: n, Engine: loader.KindSim, Profile: preset.Name + "/" + n, Seed: uint64(i + 1)})
	}
	return models, nil
}

// logModels says what serve serves where the flags left the choice to it:
// one --model file alone, the pair built into the binary, or the simulated
// pair.
func logModels(log *slog.Logger, f serveFlags, cfg config.Config) {
	if f.configPath != "" || len(cfg.Presets) != 1 {
		return
	}
	p := cfg.Presets[0]
	switch {
	case len(f.models) == 1 && f.algorithm == "":
		log.Info("one model: serving it alone, without routing (algorithm single); routing takes a second --model and --algorithm",
			"model", cfg.Models[0].Name, "path", cfg.Models[0].Path)
	case len(f.models) > 0:
	case f.engine == loader.KindSim:
		log.Info("serving two simulated models: no weights, pseudo-word text (without --engine sim: real models)", "models", p.Models, "algorithm", p.Algorithm)
	default:
		log.Info("serving the tiny trained pair built into the binary (TinyStories, 260K and 280K parameters: childish stories); "+
			"--model NAME=PATH serves your own, --engine sim two simulated models", "models", p.Models, "algorithm", p.Algorithm)
	}
}

func runServe(cmd *cobra.Command, f serveFlags) error {
	cfg, err := serveConfig(cmd, f)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	log := slog.Default()
	logModels(log, f, cfg)
	inject, err := faults.Parse(os.Getenv(faults.Env))
	if err != nil {
		return err
	}
	if inject.Active() {
		log.Warn("faults injected", "faults", inject.String())
	}
	opts := server.Options{Logger: log, BusDelay: f.busDelay, Faults: inject}
	if f.busDelay < 0 {
		return fmt.Errorf("--bus-delay %v: must not be negative", f.busDelay)
	}
	if f.processes || f.natsURL != "" {
		if f.busDelay > 0 {
			return errors.New("--bus-delay delays the in-process bus; it does not go with --processes or --nats")
		}
		if !f.processes && len(cfg.Presets) > 1 {
			return fmt.Errorf("--nats: a front end joining sub-servers started elsewhere serves one preset; "+
				"this configuration has %d (run one serve per preset, each with its own --nats-prefix, or use --processes)", len(cfg.Presets))
		}
		secrets := cluster.Secrets{Auth: f.natsAuth.auth(os.Getenv)}
		if !f.processes {
			if secrets, err = f.natsAuth.secrets(os.Getenv); err != nil {
				return err
			}
		}
		lvl, _ := cmd.Flags().GetString("log-level")
		format, _ := cmd.Flags().GetString("log-format")
		opts.Deploy = clusterDeploy{processes: f.processes, nats: f.natsURL, prefix: f.prefix, logLevel: lvl, logFormat: format,
			joinTimeout: f.joinTimeout, secrets: secrets, log: log}.deploy
		log.Info("scale out", "processes", f.processes, "nats", f.natsURL)
	}
	srv, err := server.New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr())
	if err != nil {
		return errors.Join(fmt.Errorf("serve: %w", err), srv.Close())
	}
	for _, p := range cfg.Presets {
		log.Info("preset", "model", p.Name, "algorithm", p.Algorithm, "models", p.Models, "thresholds", p.Thresholds, "placement", p.Placement)
	}
	log.Info("serving", "url", "http://"+ln.Addr().String(), "auth", cfg.APIKey != "")
	if cfg.APIKey == "" && !config.IsLoopback(cfg.Host) {
		log.Warn("listening beyond loopback without an API key (--allow-no-key): anyone who can reach this port can use it", "host", cfg.Host)
	}
	serr := srv.Serve(ctx, ln)
	cerr := srv.Close()
	log.Info("stopped")
	return errors.Join(serr, cerr)
}
