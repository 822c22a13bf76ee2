package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/sched"
	"github.com/tokenrouter/tokenrouter/server"
	"github.com/tokenrouter/tokenrouter/subserver"
	"github.com/tokenrouter/tokenrouter/system"
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
func (c clusterDeploy) deploy(ctx context.Context, preset string, s system.Spec) (*deploy.Deployment, io.Closer, error) {
	onEvent := func(msg string, args ...any) { c.log.Info(msg, append([]any{"preset", preset}, args...)...) }
	if !c.processes {
		c.log.Info("joining sub-servers started elsewhere; they own their thresholds and max-wait",
			"preset", preset, "nats", c.nats, "prefix", c.prefix, "models", s.Names())
		f, err := cluster.Join(ctx, cluster.FrontConfig{URL: c.nats, Secrets: c.secrets, Prefix: c.prefix, Spec: s,
			JoinTimeout: c.joinTimeout, OnEvent: onEvent})
		if err != nil {
			return nil, nil, err
		}
		return f.Deployment(), remoteCloser{Closer: f, front: f}, nil
	}
	pols := make([]sched.Policy, len(s.Models))
	for i := range s.Models {
		pols[i] = s.Launch.Policy(i)
	}
	var args []string
	if c.logLevel != "" {
		args = append(args, "--log-level", c.logLevel)
	}
	if c.logFormat != "" {
		args = append(args, "--log-format", c.logFormat)
	}
	l, err := cluster.Start(ctx, cluster.LocalConfig{Binary: c.binary, NATS: c.nats, NATSAuth: c.secrets.Auth, Spec: s, Args: args,
		Output: c.output, JoinTimeout: c.joinTimeout, OnEvent: onEvent})
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

// RemoteStats implements server.RemoteStatser: one per model, its
// replicas' counters merged (up while any replica is).
func (r remoteCloser) RemoteStats() []server.RemoteStat {
	ms := r.front.Members()
	var out []server.RemoteStat
	var per [][]subserver.Stats
	for _, m := range ms {
		for len(out) <= m.Model {
			out, per = append(out, server.RemoteStat{}), append(per, nil)
		}
		o := &out[m.Model]
		o.Up, o.Restarts = o.Up || m.Up, o.Restarts+m.Restarts
		per[m.Model] = append(per[m.Model], m.Last.Stats)
	}
	for i := range out {
		out[i].Stats = subserver.MergeStats(per[i])
		if i < len(r.policies) {
			out[i].Policy = &r.policies[i]
		}
	}
	return out
}
