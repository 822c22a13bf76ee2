package server

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tokenrouter/tokenrouter/internal/buildinfo"
)

// metrics holds the server's Prometheus registry. Labels: preset (the name
// clients use), model (a model of the preset), algorithm.
type metrics struct {
	s   *Server
	reg *prometheus.Registry

	httpReqs    *prometheus.CounterVec
	requests    *prometheus.CounterVec
	ttft        *prometheus.HistogramVec
	tpot        *prometheus.HistogramVec
	outTokens   *prometheus.HistogramVec
	stepLatency *prometheus.HistogramVec
	batchSize   *prometheus.HistogramVec
	decisions   *prometheus.CounterVec
	req         requestMetrics
	httpPanics  prometheus.Counter

	// per-model gauges read from the sub-servers at scrape time
	queue, requestsBy, kv, lastBatch, lastStep, simulated, up *prometheus.Desc
	steps, tokens, busy, restarts                             *prometheus.Desc
	panics, engineRestarts, loopBusy, kernels, busDropped     *prometheus.Desc
	active, routedFrac, largeRatio, inFlight                  *prometheus.Desc
	kvBlocks, threshold                                       *prometheus.Desc
	replicasUp, placements                                    *prometheus.Desc
	prefixLooked, prefixHit                                   *prometheus.Desc
	conns, connLimit, connsDropped, connsEvicted              *prometheus.Desc
	tunerSeconds, tunerPlans, tunerDeferred                   *prometheus.Desc
	// speculative continuation, per model pair (small, large)
	specTokens, specKept, specRolled, specVerified, specAgreed *prometheus.Desc
	specAgreement, specDepth                                   *prometheus.Desc
}

func newMetrics(s *Server) *metrics {
	m := &metrics{s: s, reg: prometheus.NewRegistry()}
	m.newEvents()
	m.describeModels()
	m.describeServer()
	m.req = newRequestMetrics()
	m.httpPanics = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tokenrouter_http_panics_total", Help: "Panics recovered in HTTP request handlers (each failed its request only and was logged with its stack).",
	})
	m.reg.MustRegister(buildInfoGauge(), m.httpReqs, m.requests, m.ttft, m.tpot, m.outTokens, m.stepLatency, m.batchSize, m.decisions, m.httpPanics, m,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.req.collectors()...)
	return m
}

// newEvents creates the counters and histograms updated as requests and
// steps happen.
func (m *metrics) newEvents() {
	pm := []string{"preset", "model"}
	m.httpReqs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tokenrouter_http_requests_total", Help: "HTTP requests by path and status code.",
	}, []string{"path", "code"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tokenrouter_requests_total", Help: "Generation requests finished, by preset and finish reason.",
	}, []string{"preset", "finish_reason"})
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tokenrouter_time_to_first_token_seconds", Help: "Time from request arrival to the first output token.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	}, []string{"preset"})
	m.tpot = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tokenrouter_time_per_output_token_seconds", Help: "Mean time between output tokens after the first, per request.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, []string{"preset"})
	m.outTokens = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tokenrouter_request_output_tokens", Help: "Output tokens per request.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14),
	}, []string{"preset"})
	m.stepLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tokenrouter_model_step_latency_seconds", Help: "Engine step latency per model.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
	}, pm)
	m.batchSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tokenrouter_model_batch_size", Help: "Requests per engine step per model.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 10),
	}, pm)
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tokenrouter_route_decisions_total", Help: "Routing decisions after each step: requests that stepped on model `from` and went to model `to` (to = from means stay).",
	}, []string{"preset", "algorithm", "from", "to"})
}

// describeModels describes the per-model figures collected at scrape time.
func (m *metrics) describeModels() {
	pm := []string{"preset", "model"}
	m.queue = desc("tokenrouter_model_queue_length", "Requests runnable on the model, waiting for or in its next step.", pm...)
	m.requestsBy = desc("tokenrouter_model_requests", "Requests on the model by state: runnable (queued here), pending (handed to a peer, KV kept here), known (active system-wide).", "preset", "model", "state")
	m.prefixLooked = desc("tokenrouter_model_prefix_cache_lookup_tokens_total", "Prompt tokens of the sequences that looked up the engine's prefix cache (engines that share KV blocks of common prefixes).", pm...)
	m.prefixHit = desc("tokenrouter_model_prefix_cache_hit_tokens_total", "Prompt tokens found in the engine's prefix cache (their KV reused, not computed); over the lookup total: the hit rate.", pm...)
	m.kvBlocks = desc("tokenrouter_model_kv_blocks", "KV cache blocks (pages) in use in the model's engine (engines that page their KV cache).", pm...)
	m.threshold = desc("tokenrouter_model_threshold", "Launch threshold in force: the batch size the model waits for at the current number of active requests.", pm...)
	m.kv = desc("tokenrouter_model_kv_sequences", "Sequences holding KV cache in the model's engine.", pm...)
	m.lastBatch = desc("tokenrouter_model_last_batch_size", "Batch size of the model's last step.", pm...)
	m.lastStep = desc("tokenrouter_model_last_step_latency_seconds", "Latency of the model's last step.", pm...)
	m.simulated = desc("tokenrouter_model_simulated", "1 when the model is simulated (no weights).", pm...)
	m.up = desc("tokenrouter_model_up", "1 when the model serves requests (a sub-server in another process reports by heartbeat; its other figures are as of its last one).", pm...)
	m.steps = desc("tokenrouter_model_steps_total", "Engine steps run by the model.", pm...)
	m.tokens = desc("tokenrouter_model_tokens_committed_total", "Output tokens committed by the model.", pm...)
	m.busy = desc("tokenrouter_model_busy_seconds_total", "Time the model spent in engine steps.", pm...)
	m.restarts = desc("tokenrouter_model_restarts_total", "Times the model's sub-server came back as a new process (sub-servers in other processes).", pm...)
	m.panics = desc("tokenrouter_model_panics_total", "Panics recovered in the model's sub-server: each failed one request, or one step's requests (engine), and was logged with its stack.", pm...)
	m.engineRestarts = desc("tokenrouter_model_engine_restarts_total", "Times the model's engine was reopened after it panicked.", pm...)
	m.kernels = desc("tokenrouter_model_kernel_choice", "1 for the kernel level the model's engine runs for each class of operation (decode, batch, prompt, attention; \"class/type\" where it differs by weight type), chosen by measurement at start or forced by --kernels.", "preset", "model", "class", "level")
	m.replicasUp = desc("tokenrouter_model_replicas_up", "Replicas of the model serving requests (one sub-server each; 1 for a model without replicas while it is up).", pm...)
	m.placements = desc("tokenrouter_model_placements_total", "Placements of requests on the model's replicas by outcome: placed (a new request, or a first hand-off to the model), affine (a hand-off back to the replica holding the request's KV), replaced (moved to another replica, the pinned one being gone or overloaded, and re-prefilled there), none (no replica up). Zero without replicas.", "preset", "model", "outcome")
	m.loopBusy = desc("tokenrouter_model_loop_busy_seconds", "How long the model's loop has been in its current iteration (0 while it waits for work); past the stall timeout the model is stalled and restarted.", pm...)
}

// describeServer describes the per-preset, HTTP, tuner and speculation
// figures collected at scrape time.
func (m *metrics) describeServer() {
	m.busDropped = desc("tokenrouter_bus_dropped_messages_total", "Bus messages dropped on receipt by the front end and the sub-servers in other processes, by reason: bad_tag (forged or corrupt), replayed, stale (an unknown sender's, sent before the endpoint attached), version, undecodable.", "preset", "reason")
	m.active = desc("tokenrouter_active_requests", "Requests in flight in the preset's router.", "preset")
	m.routedFrac = desc("tokenrouter_routed_fraction", "Fraction of the first (small) model's step decisions that sent the request to another model.", "preset", "algorithm")
	m.largeRatio = desc("tokenrouter_large_model_token_ratio", "Fraction of committed output tokens produced by models other than the first.", "preset", "algorithm")
	m.inFlight = desc("tokenrouter_http_generation_in_flight", "Generation requests admitted and not finished.")
	m.conns = desc("tokenrouter_http_connections", "Open client connections: lane main (within the cap) or reserve (past it: /health, 503 for the rest).", "lane")
	m.connLimit = desc("tokenrouter_http_connection_limit", "Connections served at once before the reserve lane takes over (--max-connections).")
	m.tunerSeconds = desc("tokenrouter_tuner_plan_seconds_total", "Time the automatic thresholds' tuner spent planning (wall time of its one planning worker: its CPU time or more).", "preset")
	m.tunerPlans = desc("tokenrouter_tuner_plans_total", "Plans of the automatic thresholds by result: computed, cached (tables reused for a load level seen before), timed_out (cut off by the per-plan limit) or abandoned (every sub-server went idle while it ran).", "preset", "result")
	m.tunerDeferred = desc("tokenrouter_tuner_plans_deferred_total", "Ticks on which a plan was due but the tuner's planning budget was spent.", "preset")
	pair := []string{"preset", "small", "large"}
	m.specTokens = desc("tokenrouter_speculated_tokens_total", "Tokens the small model kept as unverified drafts past a routed position (speculative continuation; the position's own token included).", pair...)
	m.specKept = desc("tokenrouter_speculated_tokens_kept_total", "Speculated tokens committed (the large model agreed at every routed position before them).", pair...)
	m.specRolled = desc("tokenrouter_speculated_tokens_rolled_back_total", "Speculated tokens discarded: by a disagreement of the large model, or when the request ended first.", pair...)
	m.specVerified = desc("tokenrouter_speculation_compared_positions_total", "Routed positions whose large-model token was compared with the small model's (speculated or not).", pair...)
	m.specAgreed = desc("tokenrouter_speculation_agreed_positions_total", "Compared routed positions where the large model's token equalled the small model's.", pair...)
	m.specAgreement = desc("tokenrouter_speculation_agreement_ratio", "Agreed over compared routed positions since start: the agreement rate of the model pair.", pair...)
	m.specDepth = desc("tokenrouter_speculation_depth", "Speculation depth bound in force on the small model for requests without their own (configured, or chosen from the measured agreement and step times; 0: not speculating).", pair...)
	m.connsEvicted = desc("tokenrouter_http_connections_evicted_total", "Idle or half-sent connections closed to make room: the oldest of a client address past --max-conns-per-client, or the oldest of all at the connection cap.")
	m.connsDropped = desc("tokenrouter_http_connections_dropped_total", "Reserve-lane connections closed to make room for newer ones (the lane holds the newest), or because its server was behind.")
}

// desc describes a metric collected at scrape time.
func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// buildInfoGauge is the constant gauge whose labels say what the server was
// built from.
func buildInfoGauge() prometheus.Gauge {
	bi := buildinfo.Read()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "tokenrouter_build_info", Help: "Always 1; the labels say what the server was built from.",
		ConstLabels: prometheus.Labels{"version": bi.Version, "revision": bi.Revision, "goversion": bi.GoVersion},
	})
	build.Set(1)
	return build
}

// handler serves the registry.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// http counts one HTTP request.
func (m *metrics) http(path string, code int) {
	switch {
	case path == "/v1/completions", path == "/v1/chat/completions", path == "/v1/embeddings", path == "/v1/models", path == "/generate",
		path == "/tokenize", path == "/detokenize", path == "/version", path == "/health", path == "/ready", path == "/metrics":
	case strings.HasPrefix(path, "/v1/models/"):
		path = "/v1/models/{id}"
	default:
		path = "other"
	}
	if code == 0 {
		code = http.StatusOK
	}
	m.httpReqs.WithLabelValues(path, strconv.Itoa(code)).Inc()
}

// finished records a finished generation.
func (m *metrics) finished(g *genRequest, first, last time.Time, n int, reason string) {
	p := g.dep.name
	m.requests.WithLabelValues(p, reason).Inc()
	m.outTokens.WithLabelValues(p).Observe(float64(n))
	if n > 0 {
		m.ttft.WithLabelValues(p).Observe(first.Sub(g.start).Seconds())
	}
	if n > 1 {
		m.tpot.WithLabelValues(p).Observe(last.Sub(first).Seconds() / float64(n-1))
	}
}

// BusDropper is implemented by a Deployer's closer whose deployment runs
// over a bus that drops messages failing its integrity checks: the counts
// by reason, for /metrics.
type BusDropper interface {
	BusDrops() map[string]uint64
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.queue, m.requestsBy, m.kv, m.lastBatch, m.lastStep, m.simulated, m.up,
		m.steps, m.tokens, m.busy, m.restarts, m.panics, m.engineRestarts, m.loopBusy, m.kernels, m.busDropped, m.active, m.routedFrac, m.largeRatio, m.inFlight, m.conns, m.connLimit, m.connsDropped, m.connsEvicted,
		m.tunerSeconds, m.tunerPlans, m.tunerDeferred, m.kvBlocks, m.threshold, m.prefixLooked, m.prefixHit, m.replicasUp, m.placements,
		m.specTokens, m.specKept, m.specRolled, m.specVerified, m.specAgreed, m.specAgreement, m.specDepth} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it reads every sub-server's
// counters.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	g, c := gaugeTo(ch), counterTo(ch)
	g(m.inFlight, float64(m.s.inFlight.Load()))
	if l := m.s.conns.Load(); l != nil {
		g(m.conns, float64(l.open.Load()), "main")
		g(m.conns, float64(l.laneOpen()), "reserve")
		g(m.connLimit, float64(l.max))
		c(m.connsDropped, float64(l.dropped.Load()))
		c(m.connsEvicted, float64(m.s.ConnectionsEvicted()))
	}
	for _, dep := range m.s.deps {
		var total, large uint64
		stats := dep.stats()
		m.speculation(ch, dep, stats)
		for i, rs := range stats {
			m.collectModel(ch, dep, i, rs)
			st := rs.Stats
			total += st.Tokens
			large += st.Tokens - min(st.SmallTokens, st.Tokens)
		}
		g(m.active, float64(dep.r.Active()), dep.name)
		if bd, ok := dep.closer.(BusDropper); ok {
			for reason, n := range bd.BusDrops() {
				c(m.busDropped, float64(n), dep.name, reason)
			}
		}
		m.collectTuner(ch, dep)
		ratio := 0.0
		if total > 0 {
			ratio = float64(large) / float64(total)
		}
		g(m.largeRatio, ratio, dep.name, dep.algorithm)
		g(m.routedFrac, dep.obs.routedFraction(), dep.name, dep.algorithm)
	}
}

// gaugeTo returns a function that sends one gauge sample to ch.
func gaugeTo(ch chan<- prometheus.Metric) func(d *prometheus.Desc, v float64, l ...string) {
	return func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
}

// counterTo returns a function that sends one counter sample to ch.
func counterTo(ch chan<- prometheus.Metric) func(d *prometheus.Desc, v float64, l ...string) {
	return func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
}

// boolGauge is 1 for true and 0 for false.
func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectModel sends the samples of model i of dep, whose sub-server
// reported rs.
func (m *metrics) collectModel(ch chan<- prometheus.Metric, dep *deployment, i int, rs RemoteStat) {
	g, c := gaugeTo(ch), counterTo(ch)
	st := rs.Stats
	p, name := dep.name, dep.models[i].name
	g(m.up, boolGauge(rs.Up), p, name)
	g(m.queue, float64(st.Runnable), p, name)
	g(m.requestsBy, float64(st.Runnable), p, name, "runnable")
	g(m.requestsBy, float64(st.Pending), p, name, "pending")
	g(m.requestsBy, float64(st.Records), p, name, "known")
	g(m.kv, float64(st.KVSequences), p, name)
	if st.KVBlocks >= 0 {
		g(m.kvBlocks, float64(st.KVBlocks), p, name)
	}
	if st.PrefixLooked > 0 {
		c(m.prefixLooked, float64(st.PrefixLooked), p, name)
		c(m.prefixHit, float64(st.PrefixHit), p, name)
	}
	g(m.threshold, float64(st.Threshold), p, name)
	g(m.lastBatch, float64(st.LastBatch), p, name)
	g(m.lastStep, st.LastStep.Seconds(), p, name)
	g(m.simulated, boolGauge(dep.models[i].simulated), p, name)
	c(m.steps, float64(st.Steps), p, name)
	c(m.tokens, float64(st.Tokens), p, name)
	c(m.busy, st.BusyTime.Seconds(), p, name)
	c(m.restarts, float64(rs.Restarts), p, name)
	c(m.panics, float64(st.Panics), p, name)
	c(m.engineRestarts, float64(st.Restarts), p, name)
	g(m.loopBusy, st.Busy.Seconds(), p, name)
	g(m.replicasUp, float64(dep.r.ReplicasUp(i)), p, name)
	pl := dep.r.Placements(i)
	for _, o := range []struct {
		outcome string
		n       uint64
	}{{"placed", pl.Placed}, {"affine", pl.Affine}, {"replaced", pl.Replaced}, {"none", pl.NoReplica}} {
		c(m.placements, float64(o.n), p, name, o.outcome)
	}
	for class, level := range dep.models[i].info.Kernels {
		g(m.kernels, 1, p, name, class, level)
	}
}

// collectTuner sends the automatic-threshold tuner's costs of dep, if it
// has a tuner.
func (m *metrics) collectTuner(ch chan<- prometheus.Metric, dep *deployment) {
	t := dep.r.Tuner()
	if t == nil {
		return
	}
	c := counterTo(ch)
	cost := t.Status().Cost
	c(m.tunerSeconds, cost.Seconds, dep.name)
	c(m.tunerPlans, float64(cost.Computed), dep.name, "computed")
	c(m.tunerPlans, float64(cost.CacheHits), dep.name, "cached")
	c(m.tunerPlans, float64(cost.TimedOut), dep.name, "timed_out")
	c(m.tunerPlans, float64(cost.Abandoned), dep.name, "abandoned")
	c(m.tunerDeferred, float64(cost.Deferred), dep.name)
}

// speculation reports the speculative continuation counters of a
// two-model preset, read from the model that speculates (the one whose
// routed positions were compared).
func (m *metrics) speculation(ch chan<- prometheus.Metric, dep *deployment, stats []RemoteStat) {
	if len(stats) != 2 {
		return
	}
	for i, rs := range stats {
		st := rs.Stats
		if st.Verified == 0 && st.Speculated == 0 {
			continue
		}
		l := []string{dep.name, dep.models[i].name, dep.models[1-i].name}
		for _, c := range []struct {
			d *prometheus.Desc
			v uint64
		}{{m.specTokens, st.Speculated}, {m.specKept, st.Kept}, {m.specRolled, st.RolledBack}, {m.specVerified, st.Verified}, {m.specAgreed, st.Agreed}} {
			ch <- prometheus.MustNewConstMetric(c.d, prometheus.CounterValue, float64(c.v), l...)
		}
		ch <- prometheus.MustNewConstMetric(m.specAgreement, prometheus.GaugeValue, float64(st.Agreed)/float64(max(st.Verified, 1)), l...)
		ch <- prometheus.MustNewConstMetric(m.specDepth, prometheus.GaugeValue, float64(st.Depth), l...)
	}
}

// observer receives one preset's step and routing events from its
// sub-servers' loops; it only updates pre-resolved metric children.
type observer struct {
	step    []prometheus.Observer
	batch   []prometheus.Observer
	handoff []prometheus.Observer
	queue   prometheus.Observer
	moves   [][]prometheus.Counter
	// decisions and away count the first model's decisions.
	decisions, away atomic.Uint64
}

// observer builds d's observer (d's models must be filled in).
func (m *metrics) observer(d *deployment) *observer {
	n := len(d.models)
	o := &observer{step: make([]prometheus.Observer, n), batch: make([]prometheus.Observer, n), moves: make([][]prometheus.Counter, n),
		handoff: make([]prometheus.Observer, n), queue: m.req.queue.WithLabelValues(d.name)}
	for i, mi := range d.models {
		o.handoff[i] = m.req.handoffWait.WithLabelValues(d.name, mi.name)
		o.step[i] = m.stepLatency.WithLabelValues(d.name, mi.name)
		o.batch[i] = m.batchSize.WithLabelValues(d.name, mi.name)
		o.moves[i] = make([]prometheus.Counter, n)
		for j, mj := range d.models {
			o.moves[i][j] = m.decisions.WithLabelValues(d.name, d.algorithm, mi.name, mj.name)
		}
	}
	return o
}

// Step implements subserver.Observer.
func (o *observer) Step(model, batch, _ int, d time.Duration) {
	if model >= 0 && model < len(o.step) {
		o.step[model].Observe(d.Seconds())
		o.batch[model].Observe(float64(batch))
	}
}

// Routed implements subserver.Observer.
func (o *observer) Routed(model int, moved []int) {
	if model < 0 || model >= len(o.moves) {
		return
	}
	for j, n := range moved {
		if n <= 0 || j >= len(o.moves[model]) {
			continue
		}
		o.moves[model][j].Add(float64(n))
		if model == 0 {
			o.decisions.Add(uint64(n))
			if j != 0 {
				o.away.Add(uint64(n))
			}
		}
	}
}

// routedFraction is away / decisions on the first model.
func (o *observer) routedFraction() float64 {
	n := o.decisions.Load()
	if n == 0 {
		return 0
	}
	return float64(o.away.Load()) / float64(n)
}

// panic counts a panic recovered in an HTTP handler.
func (m *metrics) panic() { m.httpPanics.Inc() }
