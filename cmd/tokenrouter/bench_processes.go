package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenrouter/tokenrouter/bench"
	"github.com/tokenrouter/tokenrouter/cluster"
	"github.com/tokenrouter/tokenrouter/config"
	"github.com/tokenrouter/tokenrouter/loader"
	"github.com/tokenrouter/tokenrouter/system"
)

// benchProcessesLong is the part of bench run's help text on --processes.
const benchProcessesLong = `--processes measures the deployment as "serve --processes" runs it: each
model's sub-server in a child process of this binary (tokenrouter subserver),
all on an embedded NATS server on loopback, the requests entering at a front
end in bench's process; each concurrency starts a fresh set of children.
The system is tokenrouter, its thresholds static (a process cannot tune
another's: give --thresholds 1,3, or @plan.json from tokenrouter plan
--format json); the models are placed partitioned (each process steps on its
own), simulated ones sleep out their steps instead of spinning the last
stretch (model option no_spin: processes spinning on few cores take each
other's cores), and --replicas counts travel with the models. The report
says where the sub-servers ran.

  tokenrouter bench run --processes --thresholds 1,3 --concurrency 4 --duration 15s`

// processesDeployed is where --processes runs the sub-servers, as reports
// say (bench.Spec.Deployed).
const processesDeployed = "child processes over NATS"

// processesJoinTimeout bounds the wait for a set of children to join.
const processesJoinTimeout = 30 * time.Second

// applyProcesses readies s, built from bench run's flags, for
// --processes: it refuses what cannot run across processes (another
// system than tokenrouter, automatic thresholds, a bus delay, time-shared
// placement, a KV reserve in bench's process), places the models
// partitioned, makes simulated models sleep (config.Model.NoSpin) and
// starts the deployment with cluster.Start.
func applyProcesses(cmd *cobra.Command, s *bench.Spec, sys string) error {
	changed := cmd.Flags().Changed
	switch {
	case sys == "tokenrouter-b1":
		return errors.New("--processes runs --system tokenrouter: for B = 1 everywhere give --thresholds 1")
	case sys != "tokenrouter":
		return fmt.Errorf("--processes runs --system tokenrouter (sub-servers over NATS); %q runs in bench's process only", sys)
	case s.BusDelay != 0:
		return errors.New("--bus-delay delays the in-process bus; it does not go with --processes (the sub-servers talk over NATS)")
	case changed("kv-reserve-mb"):
		return errors.New("--kv-reserve-mb warms memory for engines in bench's process; with --processes the engines run in the children")
	case s.Placement == config.TimeShared:
		return errors.New("--placement time-shared takes turns in one process; with --processes each model steps in its own (give --placement partitioned)")
	}
	launch, err := config.ParseLaunch(s.Thresholds, len(s.Models), s.MaxWait)
	if err == nil && launch.Auto {
		return errors.New(`--processes: thresholds "auto" are tuned by the runtime in one process and cannot reach sub-servers in others; ` +
			"give static ones: --thresholds 1,3 (one B per model), or a plan's table, --thresholds @plan.json (tokenrouter plan --format json)")
	}
	s.Placement, s.KVReserveMB = config.Partitioned, 0
	for i := range s.Models {
		if s.Models[i].Engine == loader.KindSim {
			s.Models[i].NoSpin = true
		}
	}
	s.Deploy, s.Deployed = processDeployer(cmd), processesDeployed
	return nil
}

// processDeployer starts a deployment as serve --processes does
// (clusterDeploy): this executable's subserver children on an embedded
// NATS server, their output on cmd's stderr, logging at warn unless
// --log-level says otherwise.
func processDeployer(cmd *cobra.Command) bench.Deployer {
	args := []string{"--log-level", "warn"}
	if lvl, err := cmd.Flags().GetString("log-level"); err == nil && cmd.Flags().Changed("log-level") {
		args = []string{"--log-level", lvl}
	}
	if format, err := cmd.Flags().GetString("log-format"); err == nil && cmd.Flags().Changed("log-format") {
		args = append(args, "--log-format", format)
	}
	out, log := cmd.ErrOrStderr(), slog.Default()
	return func(ctx context.Context, s system.Spec) (bench.System, error) {
		l, err := cluster.Start(ctx, cluster.LocalConfig{Spec: s, Args: args, Output: out, JoinTimeout: processesJoinTimeout,
			OnEvent: func(msg string, a ...any) { log.Info(msg, a...) }})
		if err != nil {
			return nil, fmt.Errorf("--processes: %w", err)
		}
		return l, nil
	}
}
