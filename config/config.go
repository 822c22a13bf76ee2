// Package config is the serving configuration of TokenRouter: the HTTP
// listener and its limits, the models (simulated or real weights on the CPU
// engine, with their tokenizers) and the algorithm presets clients choose
// by name in the request's "model" field. It is read from YAML (Load, Parse)
// or built in code (Tiny: the pair of tiny trained models built into the
// binary; Default: two simulated models), and Validate checks it as a whole
// before anything is started.
//
// A preset runs one routing algorithm over its models; the server builds
// one deployment per preset, each with its own engines, so two presets over the
// same model definitions load that model twice. A preset's launch policy
// (ParseLaunch, the one place thresholds are read) is explicit ("1,3", or
// one value for every model), a plan file ("@plan.json", as `tokenrouter
// plan --format json` writes it) or "auto" (the default): in one process
// the runtime estimates the routing probabilities and step latencies from
// what it observes and applies the throughput model's best table B*(n)
// (autotune); for sub-servers in other processes the table is computed up
// front, which needs known inputs (an algorithm that states its routing
// process, route.Predictable, over simulated engines). A preset's placement
// says how its models share the machine's cores: partitioned (each model on
// its own threads, Model.Threads and Model.CPUs), time-shared (every model on
// every core, one step at a time) or auto. A model may run as several
// replicas (Model.Replicas, Preset.Replicas), each with its own engine,
// loop, scheduler, KV cache and thresholds.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tokenrouter/tokenrouter/bus"
	"github.com/tokenrouter/tokenrouter/models/tiny"
	"github.com/tokenrouter/tokenrouter/perfmodel"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/steptime"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// DefaultEngine is the engine kind of a model that names none: the
// simulated engine. Package loader knows the kinds and checks each model's
// fields against its kind.
const DefaultEngine = "sim"

// AutoThresholds in Preset.Thresholds asks the throughput model for B.
const AutoThresholds = "auto"

// Defaults: the listener, the simulated pair (Default) and its algorithm,
// the limits, the max-wait guard, the size of "auto" tables and of
// simulated models.
const (
	DefaultHost            = "127.0.0.1"
	DefaultPort            = 30000
	DefaultProfile         = "paper-r2r"
	DefaultAlgorithm       = "r2r-random"
	DefaultP               = "0.35"
	DefaultMaxBodyBytes    = 1 << 20
	DefaultMaxInFlight     = 1024
	DefaultMaxTokens       = 256
	DefaultShutdownTimeout = 30 * time.Second
	DefaultMaxWait         = 50 * time.Millisecond
	DefaultAutoConcurrency = 16
	// DefaultWriteTimeout is how long a response write may wait for a
	// client that does not accept data before the client is disconnected.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultReadHeaderTimeout bounds reading a request's headers.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultBodyTimeout bounds reading a request's body.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a kept-alive connection idle this long.
	DefaultIdleTimeout = 60 * time.Second
)

// ClientShareDivisor sets the default of Config.MaxConnsPerClient: the
// connection cap divided by it.
const ClientShareDivisor = 4

// Config is the whole serving configuration.
type Config struct {
	// Host and Port are the listen address (port 0 in a file means the
	// default 30000; the --port 0 flag picks a free port).
	Host string `yaml:"host"`
	Port int    `yaml:"port"`
	// APIKey, when set, is required as "Authorization: Bearer <key>" on the
	// API endpoints and /metrics; /health stays open but then says only
	// whether the server is up.
	APIKey string `yaml:"api_key"`
	// AllowNoKey lets the server listen on a non-loopback host without an
	// APIKey (refused otherwise).
	AllowNoKey bool `yaml:"allow_no_key"`
	// MaxBodyBytes bounds a request body; larger bodies get 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxInFlight bounds the generation requests admitted at once over all
	// presets; requests beyond it get 429.
	MaxInFlight int `yaml:"max_in_flight"`
	// DefaultMaxTokens is the output limit when a request gives none
	// (clamped to what the context leaves).
	DefaultMaxTokens int `yaml:"default_max_tokens"`
	// ShutdownTimeout bounds how long in-flight requests may run after a
	// shutdown signal before they are cancelled.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// WriteTimeout is the longest a response write (a streamed event, a
	// body) may wait for the client to accept data; a client that stalls
	// longer is disconnected and its request cancelled.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// ReadHeaderTimeout bounds reading a request's headers.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	// BodyTimeout bounds reading a request's body; slower bodies get 408.
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// IdleTimeout closes a kept-alive connection that sends no request for
	// this long.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// MaxConnections caps the connections served at once (0: derived from
	// the process's descriptor limit). Past it, a small reserved lane still
	// answers /health and gives every other request 503.
	MaxConnections int `yaml:"max_connections"`
	// MaxConnsPerClient bounds the connections one client address may hold
	// idle or half-open (accepted, or kept alive, without a complete request
	// in progress); past it that address's oldest such connection is closed
	// to make room (0: the connection cap divided by ClientShareDivisor).
	// Connections serving a request do not count.
	MaxConnsPerClient int `yaml:"max_conns_per_client"`
	// StallTimeout is the stall watchdog's timeout: a model whose loop
	// spends longer in one iteration (an engine step that never returns)
	// is reported down, its requests end with an error, and it is
	// restarted (0: automatic, subserver.StallTimeout: StallSteps of its
	// longest step, at least MinStallTimeout).
	StallTimeout time.Duration `yaml:"stall_timeout"`
	// CORSOrigins are the browser origins allowed to call the API
	// ("https://app.example", or "*" for any); empty disables CORS.
	CORSOrigins []string `yaml:"cors_origins"`
	// Models are the model definitions presets refer to.
	Models []Model `yaml:"models"`
	// Presets are the names clients put in "model"; the first one also
	// serves requests that name no model.
	Presets []Preset `yaml:"presets"`
}

// Model describes one model: its engine kind and the fields that kind
// reads (package loader opens it). The same description comes from a
// configuration file's models entry or from command-line flags, and
// travels to a sub-server in another process as YAML.
type Model struct {
	// Name identifies the model in presets, metrics and responses.
	Name string `yaml:"name"`
	// Engine is the engine kind: "sim" (the default) or "cpu".
	Engine string `yaml:"engine"`
	// Profile (sim) is a latency preset and model, "paper-r2r/slm"; a bare
	// preset name picks the preset's model of the same name. A preset may
	// be a profile file ending in .json (bench calibrate writes one).
	Profile string `yaml:"profile,omitempty"`
	// Latency (sim) gives an explicit latency profile instead of Profile.
	Latency *Latency `yaml:"latency,omitempty"`
	// Seed (sim) makes this model's tokens differ from another's.
	Seed uint64 `yaml:"seed,omitempty"`
	// Agree (sim) is the probability that this model samples the token a
	// model with seed AgreeSeed would (a small model tracking its large
	// one, for speculative decoding).
	Agree     float64 `yaml:"agree,omitempty"`
	AgreeSeed uint64  `yaml:"agree_seed,omitempty"`
	// VocabSize and ContextLength (sim) size the simulated model (0: the
	// engine's defaults); for cpu ContextLength caps the model's own.
	VocabSize     int `yaml:"vocab_size,omitempty"`
	ContextLength int `yaml:"context_length,omitempty"`
	// NoSpin (sim) makes the simulated engine sleep until each step's
	// deadline instead of spinning the last stretch before it: its steps
	// end later by a timer's lateness, but it keeps no core busy while it
	// waits (many simulated models on few cores, as bench run --processes
	// runs them).
	NoSpin bool `yaml:"no_spin,omitempty"`
	// Path (cpu) is a GGUF file or a llama2.c checkpoint, or a file built
	// into the binary ("embedded:stories260K.bin", see EmbeddedPrefix).
	Path string `yaml:"path,omitempty"`
	// Tokenizer (cpu) is a tokenizer file (llama2.c tokenizer.bin,
	// SentencePiece .model, GGUF, or a Hugging Face tokenizer.json or the
	// folder holding one), or an embedded one ("embedded:tok512.bin");
	// default: the GGUF's own.
	Tokenizer string `yaml:"tokenizer,omitempty"`
	// ChatTemplate overrides the model's chat template: a Jinja template
	// file (a path holding a "/" or a ".") or the name of a built-in
	// layout (plain, chatml, llama2, llama3). Default: the template the
	// GGUF file (or a Hugging Face tokenizer's tokenizer_config.json)
	// ships, else plain.
	ChatTemplate string `yaml:"chat_template,omitempty"`
	// Threads (cpu) is the kernel thread count (0: the preset's placement
	// decides: all cores when time-shared, an even share when partitioned).
	Threads int `yaml:"threads,omitempty"`
	// CPUs (cpu, Linux) pins the engine's threads to these logical CPUs
	// ([0, 1] in a file; "0-3,6" on the command line, see ParseCPUList).
	// Empty: the operating system places them.
	CPUs []int `yaml:"cpus,omitempty,flow"`
	// KVBudgetMB (cpu) bounds the KV cache (0: the engine default).
	KVBudgetMB int `yaml:"kv_budget_mb,omitempty"`
	// KVReserveMB (cpu) is KV cache memory written once at start-up (at
	// most the budget), so that the cache does not fault in new memory as
	// it grows during the first minutes of serving (0: none).
	KVReserveMB int `yaml:"kv_reserve_mb,omitempty"`
	// NoPrefixCache (cpu) turns off the sharing of KV blocks between
	// requests whose prompts begin alike (on by default).
	NoPrefixCache bool `yaml:"no_prefix_cache,omitempty"`
	// Kernels (cpu) forces one kernel level for every class of operation
	// ("generic", "avx2", "avx512", "avx512ng", "neon", "neondot"); empty: each class
	// gets the fastest level measured on this CPU at start-up (cached).
	Kernels string `yaml:"kernels,omitempty"`
	// Replicas is how many replicas of the model a deployment runs (0 or
	// 1: one; at most MaxReplicas), each with its own engine, loop,
	// scheduler, KV cache and launch thresholds; requests are placed among
	// them (DESIGN §9). A preset may say otherwise (Preset.Replicas).
	Replicas int `yaml:"replicas,omitempty"`
}

// MaxReplicas bounds Model.Replicas.
const MaxReplicas = bus.MaxReplicas

// IsTemplateFile reports whether a ChatTemplate value names a file
// (it holds a "/" or a ".") rather than a built-in layout.
func IsTemplateFile(v string) bool { return strings.ContainsAny(v, "/.") }

// Latency is an explicit sim latency profile: a step over b sequences
// appending t tokens beyond one each takes Base + PerSeq·b + PerToken·t,
// or, when Curve is set, the curve's time (steptime.Curve).
type Latency struct {
	// Base is the fixed cost of a step.
	Base time.Duration `yaml:"base"`
	// PerSeq is the cost per sequence in the batch.
	PerSeq time.Duration `yaml:"per_seq,omitempty"`
	// PerToken is the cost per extended token beyond one per sequence.
	PerToken time.Duration `yaml:"per_token,omitempty"`
	// Curve, if set, is the step time instead of Base, PerSeq and PerToken.
	Curve *steptime.Curve `yaml:"curve,omitempty"`
	// Interference is the slowdown while another model steps at once
	// (sim.Profile.Interference).
	Interference float64 `yaml:"interference,omitempty"`
}

// Preset maps a client-facing name to an algorithm over models.
type Preset struct {
	// Name is what a client puts in "model".
	Name string `yaml:"name"`
	// Algorithm names a built-in routing algorithm.
	Algorithm string `yaml:"algorithm"`
	// Models names the models, in the algorithm's order (small first).
	Models []string `yaml:"models"`
	// Params are the algorithm's parameters.
	Params map[string]string `yaml:"params"`
	// Thresholds is "auto", one B for every model ("1") or one per model
	// ("1,3"). Empty means "auto".
	Thresholds string `yaml:"thresholds"`
	// MaxWait launches a step anyway after this wait (0: the default;
	// negative disables the guard).
	MaxWait time.Duration `yaml:"max_wait"`
	// AutoConcurrency is the largest concurrency the "auto" table is
	// computed for (beyond it the last entry applies).
	AutoConcurrency int `yaml:"auto_concurrency"`
	// MaxBatch bounds each step's batch (0: the runtime default).
	MaxBatch int `yaml:"max_batch"`
	// Placement says how the preset's models share the machine's cores:
	// "partitioned", "time-shared" or "auto" (the default; see Placement).
	Placement Placement `yaml:"placement"`
	// Speculate is "off", "on" or "auto" (the default: on for algorithms
	// that opted in): speculative continuation past routed positions
	// (subserver.Speculation).
	Speculate string `yaml:"speculate"`
	// SpeculateDepth bounds how far a request runs past its oldest
	// unverified routed position (0: chosen from measurements).
	SpeculateDepth int `yaml:"speculate_depth"`
	// Replicas sets the replicas of some of the preset's models, by name
	// ({slm: 2}), over their definitions' Model.Replicas.
	Replicas map[string]int `yaml:"replicas,omitempty"`
}

// ReplicasOf returns how many replicas the preset runs of model m: its
// Replicas entry, else m's own, at least one.
func (p *Preset) ReplicasOf(m Model) int {
	if n, ok := p.Replicas[m.Name]; ok {
		return max(n, 1)
	}
	return max(m.Replicas, 1)
}

// ParseReplicas reads replica counts given as NAME=N (the --replicas flag
// of serve and bench, repeatable; a value may list several, comma
// separated): each model named at most once, N from 1 to MaxReplicas.
func ParseReplicas(vals []string) (map[string]int, error) {
	out := map[string]int{}
	for _, v := range vals {
		for kv := range strings.SplitSeq(v, ",") {
			name, num, ok := strings.Cut(strings.TrimSpace(kv), "=")
			n, err := strconv.Atoi(num)
			switch {
			case !ok || name == "" || err != nil:
				return nil, fmt.Errorf("replicas %q: want NAME=N, such as slm=2", kv)
			case n < 1 || n > MaxReplicas:
				return nil, fmt.Errorf("replicas %q: want 1 to %d replicas", kv, MaxReplicas)
			}
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("replicas: model %q given twice", name)
			}
			out[name] = n
		}
	}
	return out, nil
}

// Placement is how the models of one deployment share the machine's cores.
type Placement string

// Placements.
const (
	// PlacementAuto picks partitioned or time-shared for the models and the
	// machine when the deployment starts, and says which.
	PlacementAuto Placement = "auto"
	// Partitioned gives each model its own threads (Model.Threads, by
	// default an even share of the cores; Model.CPUs pins them): the models'
	// steps overlap.
	Partitioned Placement = "partitioned"
	// TimeShared lets every model use every core (Model.Threads 0) and run
	// one step at a time: the sub-servers still schedule asynchronously
	// (each decides its own launches), only their steps take turns.
	TimeShared Placement = "time-shared"
)

// ParsePlacement reads a placement; "" is auto.
func ParsePlacement(s string) (Placement, error) {
	switch p := Placement(strings.TrimSpace(s)); p {
	case "":
		return PlacementAuto, nil
	case PlacementAuto, Partitioned, TimeShared:
		return p, nil
	}
	return "", fmt.Errorf("placement %q: want %s, %s or %s", s, Partitioned, TimeShared, PlacementAuto)
}

// ParseCPUList reads a Linux CPU list such as "0-3,6" (the format of
// /sys/devices/system/cpu/online and taskset -c) into sorted, distinct CPU
// numbers.
func ParseCPUList(s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(strings.TrimSpace(s), ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a {
			return nil, fmt.Errorf("cpus %q: want CPU numbers and ranges such as 0-3,6", s)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// EmbeddedPrefix begins a model's Path or Tokenizer that names a file built
// into the binary (package models/tiny) rather than a file on disk:
// "embedded:stories260K.bin". Package loader reads such files from memory.
const EmbeddedPrefix = "embedded:"

// Embedded returns the file name an embedded path names, and false for a
// path on disk.
func Embedded(path string) (string, bool) { return strings.CutPrefix(path, EmbeddedPrefix) }

// The first-run deployment (Tiny): the pair built into the binary under a
// training-free algorithm.
const (
	// TinyAlgorithm routes the embedded pair: R-Stitch (entropy-guided
	// switching), which needs no trained router.
	TinyAlgorithm = "r-stitch"
	// TinyTau is R-Stitch's normalised-entropy threshold for the pair: the
	// large model writes about a quarter of the tokens (0.237 of them over
	// testdata/eval/heldout.jsonl, greedy, 64 tokens each; 0.066 at 0.5).
	TinyTau = "0.45"
)

// Tiny returns the first-run deployment, what `tokenrouter serve` serves
// with no model flags and what a configuration without models and presets
// means: the tiny trained pair built into the binary (package models/tiny:
// slm stories260K and llm llama2xs, sharing the tok512 vocabulary) on the
// CPU engine, under r-stitch, on 127.0.0.1:30000. Its text is real, if
// childish, stories.
func Tiny() Config {
	c := Config{}
	c.fillServer()
	tok := EmbeddedPrefix + tiny.Tokenizer
	c.Models = []Model{
		{Name: "slm", Engine: "cpu", Path: EmbeddedPrefix + tiny.SLM, Tokenizer: tok},
		{Name: "llm", Engine: "cpu", Path: EmbeddedPrefix + tiny.LLM, Tokenizer: tok},
	}
	c.Presets = []Preset{{
		Name: TinyAlgorithm, Algorithm: TinyAlgorithm, Models: []string{"slm", "llm"},
		Params: map[string]string{"tau": TinyTau}, Thresholds: AutoThresholds,
	}}
	c.FillDefaults()
	return c
}

// Default returns the simulated deployment: two simulated models with the
// paper-r2r profile (no weights; their text is pseudo-words) under
// r2r-random (p = 0.35) on 127.0.0.1:30000. `tokenrouter serve --engine
// sim` serves it; tests and benchmarks start from it for its known step
// times.
func Default() Config {
	c := Config{}
	c.fillServer()
	c.Models = []Model{
		{Name: "slm", Engine: DefaultEngine, Profile: DefaultProfile + "/slm", Seed: 1},
		{Name: "llm", Engine: DefaultEngine, Profile: DefaultProfile + "/llm", Seed: 2},
	}
	c.Presets = []Preset{{
		Name: DefaultAlgorithm, Algorithm: DefaultAlgorithm, Models: []string{"slm", "llm"},
		Params: map[string]string{"p": DefaultP}, Thresholds: AutoThresholds,
	}}
	c.FillDefaults()
	return c
}

// fillServer sets the listener defaults.
func (c *Config) fillServer() {
	if c.Host == "" {
		c.Host = DefaultHost
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.DefaultMaxTokens == 0 {
		c.DefaultMaxTokens = DefaultMaxTokens
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&c.WriteTimeout, DefaultWriteTimeout}, {&c.ReadHeaderTimeout, DefaultReadHeaderTimeout},
		{&c.BodyTimeout, DefaultBodyTimeout}, {&c.IdleTimeout, DefaultIdleTimeout}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
}

// FillDefaults sets every zero field that has a default (Default, Load and
// Parse call it; call it after building or changing a Config in code).
func (c *Config) FillDefaults() {
	c.fillServer()
	for i := range c.Models {
		m := &c.Models[i]
		if m.Engine == "" {
			m.Engine = DefaultEngine
		}
	}
	for i := range c.Presets {
		p := &c.Presets[i]
		if p.Thresholds == "" {
			p.Thresholds = AutoThresholds
		}
		if p.MaxWait == 0 {
			p.MaxWait = DefaultMaxWait
		}
		if p.AutoConcurrency == 0 {
			p.AutoConcurrency = DefaultAutoConcurrency
		}
		if p.Placement == "" {
			p.Placement = PlacementAuto
		}
	}
}

// Load reads a YAML configuration file, fills defaults and validates it.
// Relative model and tokenizer paths are taken from the file's directory.
func Load(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	c, err := decode(b)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if _, embedded := Embedded(p); p != "" && !embedded && !filepath.IsAbs(p) {
			return filepath.Join(dir, p)
		}
		return p
	}
	for i := range c.Models {
		m := &c.Models[i]
		m.Path, m.Tokenizer = rel(m.Path), rel(m.Tokenizer)
		if IsTemplateFile(m.ChatTemplate) {
			m.ChatTemplate = rel(m.ChatTemplate)
		}
	}
	for i := range c.Presets {
		if f, ok := strings.CutPrefix(strings.TrimSpace(c.Presets[i].Thresholds), "@"); ok {
			c.Presets[i].Thresholds = "@" + rel(f)
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes YAML (unknown keys are errors), fills defaults and
// validates. Missing models and presets mean Tiny's.
func Parse(b []byte) (Config, error) {
	c, err := decode(b)
	if err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// decode reads YAML (unknown keys are errors) and fills defaults.
func decode(b []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if len(c.Models) == 0 && len(c.Presets) == 0 {
		d := Tiny()
		c.Models, c.Presets = d.Models, d.Presets
	}
	c.FillDefaults()
	return c, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`)

// Validate checks the configuration as a whole, apart from each model's
// engine-specific fields, which package loader checks against its kind.
func (c *Config) Validate() error {
	var p problems
	c.checkServer(&p)
	if len(c.Models) == 0 {
		p.bad("no models")
	}
	if len(c.Presets) == 0 {
		p.bad("no presets")
	}
	models := c.checkModels(&p)
	names := map[string]bool{}
	for i := range c.Presets {
		c.Presets[i].check(&p, i, models, names)
	}
	return errors.Join(p...)
}

// problems collects a configuration's errors.
type problems []error

// bad records an error.
func (p *problems) bad(format string, a ...any) {
	*p = append(*p, fmt.Errorf("config: "+format, a...))
}

// checkServer checks the server's settings: port, limits, timeouts, CORS
// origins, and that an open host has an API key.
func (c *Config) checkServer(p *problems) {
	if c.Port < 0 || c.Port > 65535 {
		p.bad("port %d out of range", c.Port)
	}
	if c.MaxBodyBytes < 1024 {
		p.bad("max_body_bytes %d: must be at least 1024", c.MaxBodyBytes)
	}
	if c.MaxInFlight < 1 {
		p.bad("max_in_flight %d: must be at least 1", c.MaxInFlight)
	}
	if c.DefaultMaxTokens < 1 {
		p.bad("default_max_tokens %d: must be at least 1", c.DefaultMaxTokens)
	}
	if c.ShutdownTimeout < 0 {
		p.bad("shutdown_timeout %v is negative", c.ShutdownTimeout)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"write_timeout", c.WriteTimeout}, {"read_header_timeout", c.ReadHeaderTimeout},
		{"body_timeout", c.BodyTimeout}, {"idle_timeout", c.IdleTimeout}} {
		if d.v < 0 {
			p.bad("%s %v is negative", d.name, d.v)
		}
	}
	if c.MaxConnections < 0 {
		p.bad("max_connections %d is negative", c.MaxConnections)
	}
	if c.StallTimeout < 0 {
		p.bad("stall_timeout %v is negative", c.StallTimeout)
	}
	if c.MaxConnsPerClient < 0 {
		p.bad("max_conns_per_client %d is negative", c.MaxConnsPerClient)
	}
	for _, o := range c.CORSOrigins {
		if o != "*" && !validOrigin(o) {
			p.bad("cors origin %q: want scheme://host[:port] (no path) or *", o)
		}
	}
	if !c.AllowNoKey && c.APIKey == "" && !IsLoopback(c.Host) {
		p.bad("host %q is reachable from other machines and no api_key is set: set one (--api-key, $TOKENROUTER_API_KEY) or allow it explicitly (--allow-no-key, allow_no_key: true)", c.Host)
	}
}

// checkModels checks the models' names, uniqueness, engines and CPUs and
// returns the well-named models by name.
func (c *Config) checkModels(p *problems) map[string]*Model {
	models := map[string]*Model{}
	for i := range c.Models {
		m := &c.Models[i]
		if !nameRE.MatchString(m.Name) {
			p.bad("model %d: name %q: want letters, digits and _.:/-", i, m.Name)
			continue
		}
		if models[m.Name] != nil {
			p.bad("model %q defined twice", m.Name)
		}
		models[m.Name] = m
		if m.Engine == "" {
			p.bad("model %q: no engine", m.Name)
		}
		for _, c := range m.CPUs {
			if c < 0 {
				p.bad("model %q: cpus: CPU %d is negative", m.Name, c)
			}
		}
		if m.Replicas < 0 || m.Replicas > MaxReplicas {
			p.bad("model %q: replicas %d: want 1 to %d", m.Name, m.Replicas, MaxReplicas)
		}
	}
	return models
}

// check checks preset i: its name (recorded in names), algorithm, models
// (known ones, each once), launch, batch, placement and speculation.
func (pr *Preset) check(p *problems, i int, models map[string]*Model, names map[string]bool) {
	if !nameRE.MatchString(pr.Name) {
		p.bad("preset %d: name %q: want letters, digits and _.:/-", i, pr.Name)
		return
	}
	if names[pr.Name] {
		p.bad("preset %q defined twice", pr.Name)
	}
	names[pr.Name] = true
	if pr.Algorithm == "" {
		p.bad("preset %q: no algorithm", pr.Name)
	}
	if len(pr.Models) == 0 {
		p.bad("preset %q: no models", pr.Name)
	}
	seen := map[string]bool{}
	for _, n := range pr.Models {
		if models[n] == nil {
			p.bad("preset %q: unknown model %q", pr.Name, n)
		}
		if seen[n] {
			p.bad("preset %q: model %q listed twice", pr.Name, n)
		}
		seen[n] = true
	}
	if _, err := pr.Launch(); err != nil {
		p.bad("preset %q: %w", pr.Name, err)
	}
	if pr.AutoConcurrency < 1 || pr.AutoConcurrency > 256 {
		p.bad("preset %q: auto_concurrency %d: want 1..256", pr.Name, pr.AutoConcurrency)
	}
	if pr.MaxBatch < 0 {
		p.bad("preset %q: max_batch %d is negative", pr.Name, pr.MaxBatch)
	}
	if _, err := ParsePlacement(string(pr.Placement)); err != nil {
		p.bad("preset %q: %w", pr.Name, err)
	}
	if _, err := ParseSpeculation(pr.Speculate, pr.SpeculateDepth); err != nil {
		p.bad("preset %q: %w", pr.Name, err)
	}
	for _, name := range slices.Sorted(maps.Keys(pr.Replicas)) {
		n := pr.Replicas[name]
		if !seen[name] {
			p.bad("preset %q: replicas: %q is not one of its models %v", pr.Name, name, pr.Models)
		}
		if n < 1 || n > MaxReplicas {
			p.bad("preset %q: replicas of %q: %d: want 1 to %d", pr.Name, name, n, MaxReplicas)
		}
	}
}

// Model returns the named model definition.
func (c *Config) Model(name string) (Model, bool) {
	for _, m := range c.Models {
		if m.Name == name {
			return m, true
		}
	}
	return Model{}, false
}

// IsLoopback reports whether host (a name or an address) is reachable from
// this machine only: localhost or a loopback address.
func IsLoopback(host string) bool {
	h := strings.Trim(host, "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Addr is the listen address host:port.
func (c *Config) Addr() string {
	return strings.Join([]string{bracket(c.Host), strconv.Itoa(c.Port)}, ":")
}

func bracket(h string) string {
	if strings.Contains(h, ":") && !strings.HasPrefix(h, "[") {
		return "[" + h + "]"
	}
	return h
}

// Launch is the preset's launch policy (see ParseLaunch): its thresholds
// for its models and its max-wait guard (negative: none).
func (p *Preset) Launch() (sched.Launch, error) {
	return ParseLaunch(p.Thresholds, len(p.Models), max(p.MaxWait, 0))
}

// Speculation is the preset's speculative continuation (see
// ParseSpeculation).
func (p *Preset) Speculation() (subserver.Speculation, error) {
	return ParseSpeculation(p.Speculate, p.SpeculateDepth)
}

// ParseSpeculation reads a speculation mode ("off", "on", "auto"; "" is
// auto) and depth bound (0: chosen from measurements; at most
// subserver.MaxDepth), for a configuration file's presets and the serve,
// bench and subserver flags alike.
func ParseSpeculation(mode string, depth int) (subserver.Speculation, error) {
	m, err := subserver.ParseMode(strings.TrimSpace(mode))
	if err != nil {
		return subserver.Speculation{}, err
	}
	if depth < 0 || depth > subserver.MaxDepth {
		return subserver.Speculation{}, fmt.Errorf("speculation depth %d: want 0 (automatic) to %d", depth, subserver.MaxDepth)
	}
	return subserver.Speculation{Mode: m, Depth: depth}, nil
}

// ParseLaunch builds a deployment's launch policy for models models from a
// threshold spec and a max-wait guard (0: none). It is the one place
// thresholds are read, for a configuration file's presets and for the
// serve, bench and subserver flags alike. The spec is "auto" (automatic
// thresholds), B values such as "1,3" (one per model, or one for every
// model), or "@FILE": the JSON a `tokenrouter plan --format json` run wrote,
// whose best row per concurrency gives each model a threshold table B(n).
func ParseLaunch(spec string, models int, maxWait time.Duration) (sched.Launch, error) {
	l := sched.Launch{MaxWait: maxWait}
	s := strings.TrimSpace(spec)
	switch {
	case s == AutoThresholds:
		l.Auto = true
		return l, nil
	case strings.HasPrefix(s, "@"):
		rows, err := perfmodel.ReadPlan(s[1:])
		if err != nil {
			return l, fmt.Errorf("thresholds %q: %w", spec, err)
		}
		if l.Tables, err = perfmodel.PlanTables(rows, models); err != nil {
			return l, fmt.Errorf("thresholds %q: %w", spec, err)
		}
		return l, nil
	case s == "":
		s = "1"
	}
	t, err := sched.ParseStatic(s)
	if err != nil {
		return l, fmt.Errorf("thresholds %q: want \"auto\", B values such as \"1,3\" or @plan.json: %w", spec, err)
	}
	switch {
	case len(t) == 1:
		for len(t) < models {
			t = append(t, t[0])
		}
	case len(t) != models:
		return l, fmt.Errorf("thresholds %q: %d values for %d models", spec, len(t), models)
	}
	l.Tables = t
	return l, nil
}

// validOrigin reports whether o is a browser origin: scheme://host[:port].
func validOrigin(o string) bool {
	u, err := url.Parse(o)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		u.Path == "" && u.RawQuery == "" && u.Fragment == "" && u.User == nil
}
