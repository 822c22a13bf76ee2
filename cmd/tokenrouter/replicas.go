package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/config"
)

// addReplicasFlag registers --replicas, of serve and bench run and
// compare.
func addReplicasFlag(fl *pflag.FlagSet, v *[]string) {
	fl.StringArrayVar(v, "replicas", nil, "run N replicas of model NAME, NAME=N (repeatable; e.g. slm=2): each has its own engine, loop, scheduler, KV cache and thresholds, and requests are placed among them")
}

// applyReplicas sets the replicas of the models --replicas names
// (config.ParseReplicas reads the values).
func applyReplicas(ms []config.Model, vals []string) error {
	reps, err := config.ParseReplicas(vals)
	if err != nil {
		return fmt.Errorf("--replicas: %w", err)
	}
	for name, n := range reps {
		i := slices.IndexFunc(ms, func(m config.Model) bool { return m.Name == name })
		if i < 0 {
			return fmt.Errorf("--replicas %s=%d: no model %q (have %s)", name, n, name, strings.Join(modelNames(ms), ", "))
		}
		ms[i].Replicas = n
	}
	return nil
}
