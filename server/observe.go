package server

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Request-level observability: prompt tokens, end-to-end and queue times,
// requests that ended without finishing (by reason), and one log line per
// request.

// Abort reasons of tokenrouter_requests_aborted_total.
const (
	abortClient      = "client_disconnected"
	abortShutdown    = "shutdown"
	abortUnavailable = "model_unavailable"
	abortError       = "error"
)

// requestMetrics are the request-level metrics.
type requestMetrics struct {
	promptTokens *prometheus.CounterVec
	duration     *prometheus.HistogramVec
	queue        *prometheus.HistogramVec
	handoffWait  *prometheus.HistogramVec
	aborted      *prometheus.CounterVec
}

func newRequestMetrics() requestMetrics {
	return requestMetrics{
		promptTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenrouter_prompt_tokens_total", Help: "Prompt tokens of the generation requests admitted.",
		}, []string{"preset"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tokenrouter_request_duration_seconds", Help: "End-to-end time of finished generation requests, from arrival to the last output.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"preset"}),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tokenrouter_request_queue_seconds", Help: "Time a new request waited on its entry model before the step that ran its prompt.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"preset"}),
		handoffWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tokenrouter_model_handoff_wait_seconds", Help: "Time a request handed over by a peer waited on the model before the step that resumed it (batch admission delay).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"preset", "model"}),
		aborted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tokenrouter_requests_aborted_total", Help: "Generation requests admitted that ended without finishing, by reason: client_disconnected, shutdown, model_unavailable, error.",
		}, []string{"preset", "reason"}),
	}
}

func (r requestMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{r.promptTokens, r.duration, r.queue, r.handoffWait, r.aborted}
}

// Waited implements subserver.WaitObserver.
func (o *observer) Waited(model int, entry bool, d time.Duration) {
	if model < 0 || model >= len(o.handoff) {
		return
	}
	if entry {
		o.queue.Observe(d.Seconds())
		return
	}
	o.handoff[model].Observe(d.Seconds())
}

// abortReason classifies the error a generation ended with.
func abortReason(ctx context.Context, err error) string {
	var aerr *apiError
	switch {
	case ctx.Err() != nil:
		return abortClient
	case errors.As(err, &aerr) && aerr.cause != "":
		return aerr.cause
	}
	return abortError
}

// ended records a generation that ended: its metrics and its log line.
// res is nil when it did not finish (err says why); first is the time of
// its first output token (zero if none).
func (s *Server) ended(ctx context.Context, g *genRequest, id string, res *genResult, first time.Time, err error) {
	p := g.dep.name
	now := time.Now()
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs, slog.String("id", id), slog.String("preset", p), slog.Int("prompt_tokens", g.promptN))
	var reason string
	if res != nil {
		reason = res.reason
		s.metrics.req.duration.WithLabelValues(p).Observe(now.Sub(g.start).Seconds())
		counts := make([]int, len(g.dep.models))
		for _, b := range res.by {
			if int(b) >= 0 && int(b) < len(counts) {
				counts[b]++
			}
		}
		group := make([]any, len(counts))
		for i, n := range counts {
			group[i] = slog.Int(g.dep.models[i].name, n)
		}
		attrs = append(attrs, slog.Group("tokens_by_model", group...))
	} else {
		reason = abortReason(ctx, err)
		s.metrics.req.aborted.WithLabelValues(p, reason).Inc()
	}
	if !first.IsZero() {
		attrs = append(attrs, slog.Duration("ttft", first.Sub(g.start)))
	}
	attrs = append(attrs, slog.Duration("duration", now.Sub(g.start)), slog.String("finish_reason", reason))
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}
