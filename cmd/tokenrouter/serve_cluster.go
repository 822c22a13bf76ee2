package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/server"
)

// clusterDeploy runs serve's presets outside the serving process: with
// processes, one tokenrouter subserver child process per model on an
// embedded NATS server (or on nats when set); without, it joins nats,
// where the sub-servers were started by hand.
type clusterDeploy struct {
	processes   bool
	nats        string // external NATS URL, or "" for an embedded server
	prefix      string // the subject prefix of a joined deployment
	binary      string // the subserver executable ("": this executable)
	logLevel    string // the children's --log-level
	logFormat   string // the children's --log-format
	joinTimeout time.Duration
	// secrets authenticate to an external NATS server (nats); joining
	// also takes the deployment's message key from them (--processes
	// generates one per run).
	secrets cluster.Secrets
	output  io.Writer // the children's stdout and stderr (nil: stderr)
	log     *slog.Logger
}

// deploy implements server.Deployer.
func (c clusterDeploy) deploy(ctx context.Context, preset string, rc deploy.Config, models []config.Model) (*deploy.Deployment, io.Closer, error) {
	names := make([]string, len(rc.Models))
	for i, m := range rc.Models {
		names[i] = m.Name
	}
	onEvent := func(msg string, args ...any) { c.log.Info(msg, append([]any{"preset", preset}, args...)...) }
	if !c.processes {
		c.log.Info("joining sub-servers started elsewhere; they own their thresholds and max-wait",
			"preset", preset, "nats", c.nats, "prefix", c.prefix, "models", names)
		f, err := cluster.Join(ctx, cluster.FrontConfig{URL: c.nats, Secrets: c.secrets, Prefix: c.prefix, Models: names, Registry: rc.Registry,
			Algorithm: rc.Algorithm, Params: rc.Params, JoinTimeout: c.joinTimeout, StallTimeout: rc.StallTimeout, OnEvent: onEvent})
		if err != nil {
			return nil, nil, err
		}
		return f.Deployment(), remoteCloser{Closer: f, front: f}, nil
	}
	args := make([][]string, len(models))
	pols := make([]sched.Policy, len(models))
	for i, m := range models {
		pols[i] = rc.Launch.Policy(i)
		a, err := subserverArgs(m, pols[i], rc.MaxBatch)
		if err != nil {
			return nil, nil, err
		}
		a = append(a, speculateArgs(rc.Speculate)...)
		if c.logLevel != "" {
			a = append(a, "--log-level", c.logLevel)
		}
		if c.logFormat != "" {
			a = append(a, "--log-format", c.logFormat)
		}
		args[i] = a
	}
	l, err := cluster.Start(ctx, cluster.LocalConfig{Binary: c.binary, NATS: c.nats, NATSAuth: c.secrets.Auth, Models: names, ModelArgs: args,
		Registry: rc.Registry, Algorithm: rc.Algorithm, Params: rc.Params, Output: c.output,
		JoinTimeout: c.joinTimeout, StallTimeout: rc.StallTimeout, OnEvent: onEvent})
	if err != nil {
		return nil, nil, err
	}
	return l.Deployment(), remoteCloser{Closer: l, front: l.Front(), policies: pols}, nil
}

// remoteCloser closes a deployment and reports its sub-servers' last
// heartbeats to the server's metrics and console (server.RemoteStatser),
// with the policies it gave the sub-servers it started (none for
// sub-servers started elsewhere: they own theirs).
type remoteCloser struct {
	io.Closer
	front    *cluster.Front
	policies []sched.Policy
}

// BusDrops implements server.BusDropper.
func (r remoteCloser) BusDrops() map[string]uint64 { return r.front.Dropped().ByReason() }

// RemoteStats implements server.RemoteStatser.
func (r remoteCloser) RemoteStats() []server.RemoteStat {
	ms := r.front.Members()
	out := make([]server.RemoteStat, len(ms))
	for i, m := range ms {
		out[i] = server.RemoteStat{Up: m.Up, Restarts: m.Restarts, Stats: m.Last.Stats}
		if i < len(r.policies) {
			out[i].Policy = &r.policies[i]
		}
	}
	return out
}

// subserverArgs are the subserver flags that run model m with policy pol:
// the model's description as one YAML value and the policy as one JSON
// value.
func subserverArgs(m config.Model, pol sched.Policy, maxBatch int) ([]string, error) {
	paths := []*string{&m.Path, &m.Tokenizer}
	if config.IsTemplateFile(m.ChatTemplate) {
		paths = append(paths, &m.ChatTemplate)
	}
	for _, p := range paths {
		if *p != "" {
			abs, err := filepath.Abs(*p)
			if err != nil {
				return nil, fmt.Errorf("model %s: %w", m.Name, err)
			}
			*p = abs
		}
	}
	desc, err := yaml.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name, err)
	}
	policy, err := json.Marshal(pol)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name, err)
	}
	a := []string{"--model-config", string(desc), "--policy", string(policy)}
	if maxBatch > 0 {
		a = append(a, "--max-batch", strconv.Itoa(maxBatch))
	}
	return a, nil
}
