package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/subserver"
)

// speculateFlags are the --speculate and --speculate-depth flags of
// bench, serve and subserver.
type speculateFlags struct {
	mode  string
	depth int
}

// addSpeculateFlags registers the flags.
func addSpeculateFlags(fl *pflag.FlagSet, f *speculateFlags) {
	fl.StringVar(&f.mode, "speculate", "auto", "speculative continuation past routed positions: off, on, or auto (on for algorithms that opted in)")
	fl.IntVar(&f.depth, "speculate-depth", 0, "tokens a request may run past its oldest unverified routed position (0: chosen from the measured agreement and step times)")
}

// parse returns the speculation the flags describe.
func (f speculateFlags) parse() (subserver.Speculation, error) {
	s, err := config.ParseSpeculation(f.mode, f.depth)
	if err != nil {
		return s, fmt.Errorf("--speculate: %w", err)
	}
	return s, nil
}
