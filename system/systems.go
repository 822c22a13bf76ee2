package system

import (
	"context"
	"fmt"
	"maps"
	"strconv"

	"github.com/tokenrouter/tokenrouter/baseline/lockstep"
	"github.com/tokenrouter/tokenrouter/baseline/stdserving"
	"github.com/tokenrouter/tokenrouter/engine"
	"github.com/tokenrouter/tokenrouter/route/querylevel"
	"github.com/tokenrouter/tokenrouter/route/single"
	"github.com/tokenrouter/tokenrouter/sched"
)

// Kinds lists the serving systems Build knows, in report order. Build
// also knows "tokenrouter-auto": "tokenrouter" with automatic thresholds
// whatever Spec.Launch says, to compare automatic with static thresholds.
func Kinds() []string {
	return []string{"tokenrouter", "tokenrouter-b1", "lockstep", "std-serving", "query-level", "slm-only", "llm-only"}
}

// About says what each system is ("" for an unknown name).
func About(name string) string {
	return map[string]string{
		"tokenrouter":      "sub-servers with delayed batching (thresholds as configured, auto by default)",
		"tokenrouter-auto": "sub-servers with delayed batching and automatic thresholds (whatever --thresholds says)",
		"tokenrouter-b1":   "sub-servers without delayed batching (B = 1 everywhere)",
		"lockstep":         "R2R's official serving: all requests advance in global steps (no asynchrony)",
		"std-serving":      "one independent continuous-batching server per model and a per-token dispatcher; no pending KV, every return re-extends the whole sequence",
		"query-level":      "one model per request, chosen at random with the same share of large-model tokens",
		"slm-only":         "the small model alone",
		"llm-only":         "the large model alone",
	}[name]
}

// Build starts the named system on fresh engines of s's models.
// "tokenrouter" runs s as it is; the other routed systems launch at B = 1
// (tokenrouter-auto: automatic thresholds) with s's max-wait guard.
// largeShare is the share of large-model tokens "query-level" targets (0:
// the algorithm's "p" parameter, else 0.35).
func Build(ctx context.Context, s Spec, name string, largeShare float64) (System, error) {
	if About(name) == "" {
		return nil, fmt.Errorf("system: unknown system %q (have %v)", name, Kinds())
	}
	if m := s.replicated(); m != "" && name == "lockstep" {
		return nil, fmt.Errorf("system: lockstep runs one engine per model; model %s has replicas", m)
	}
	opened, err := s.kinds().OpenAll(ctx, s.Models)
	if err != nil {
		return nil, fmt.Errorf("system: %w", err)
	}
	if name == "lockstep" {
		es := make([]engine.Engine, len(opened))
		for i, o := range opened {
			es[i] = o.Engine
		}
		return lockstep.New(lockstep.Config{Engines: es, Names: s.Names(), Algorithm: s.Algorithm, Params: s.Params,
			Registry: s.Registry, Observer: s.Observer})
	}
	r, err := variant(s, name, largeShare).start(ctx, opened)
	if err != nil {
		for _, o := range opened {
			_ = o.Engine.Close()
		}
		return nil, err
	}
	return r, nil
}

// variant is s changed into the named routed system.
func variant(s Spec, name string, largeShare float64) Spec {
	launch := s.Launch
	s.Launch = sched.Launch{MaxWait: launch.MaxWait}
	s.Params = maps.Clone(s.Params)
	switch name {
	case "tokenrouter":
		s.Launch = launch
	case "tokenrouter-auto":
		s.Launch.Auto = true
	case "std-serving":
		s.Registry = stdserving.Registry(s.Registry, s.Algorithm)
	case "query-level":
		if largeShare == 0 {
			largeShare = 0.35
			if p, err := strconv.ParseFloat(s.Params["p"], 64); err == nil {
				largeShare = p
			}
		}
		s.Algorithm = querylevel.Name
		s.Params = map[string]string{"score": "random", "strong": strconv.FormatFloat(largeShare, 'g', -1, 64)}
	case "slm-only", "llm-only":
		m := 0
		if name == "llm-only" {
			m = len(s.Models) - 1
		}
		s.Algorithm, s.Params = single.Name, map[string]string{"model": strconv.Itoa(m)}
	}
	return s
}

// replicated returns the first model of s with more than one replica, or
// "" when there is none.
func (s Spec) replicated() string {
	for _, m := range s.Models {
		if m.Replicas > 1 {
			return m.Name
		}
	}
	return ""
}
