package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
)

// LocalConfig configures a deployment with one child process per model.
type LocalConfig struct {
	// Binary is the tokenrouter executable (default: this executable).
	Binary string
	// NATS is an external server's URL; empty starts an embedded server
	// on a random loopback port.
	NATS string
	// Prefix is the deployment's subject prefix (default: a fresh one per
	// deployment, so several can share a server).
	Prefix string
	// Models are the model names, in the algorithm's order.
	Models []string
	// ModelArgs[i] are the subserver flags that describe model i and its
	// launch policy: serve passes the model's description and its policy
	// as one value each ("--model-config", YAML, "--policy", JSON); the
	// hand-written flags ("--engine", "sim", "--profile",
	// "paper-r2r/slm", ...) work too.
	ModelArgs [][]string
	// Registry, Algorithm and Params: see FrontConfig. Members build the
	// algorithm from the binary's built-in registry.
	Registry  *route.Registry
	Algorithm string
	Params    map[string]string
	// Heartbeat and Misses: see MemberConfig.
	Heartbeat time.Duration
	Misses    int
	// NoRestart leaves a child that exits dead instead of restarting it.
	NoRestart bool
	// StopTimeout bounds the wait for children after SIGTERM before they
	// are killed (default 5s).
	StopTimeout time.Duration
	// Output receives the children's stdout and stderr (default: this
	// process's stderr).
	Output io.Writer
	// JoinTimeout: see FrontConfig.
	JoinTimeout time.Duration
	// OnEvent, if set, is told about children and membership (for logs).
	OnEvent func(msg string, args ...any)
}

// Local is a running multi-process deployment.
type Local struct {
	cfg      LocalConfig
	srv      *busnats.Server
	url      string
	front    *Front
	children []*child
	stopping chan struct{}
	wg       sync.WaitGroup
}

// child supervises one model's process.
type child struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	runs int
}

// Start starts the NATS server (unless external), one subserver process
// per model, and the front end, and returns once every model has joined.
func Start(ctx context.Context, cfg LocalConfig) (_ *Local, err error) {
	if len(cfg.ModelArgs) != len(cfg.Models) {
		return nil, fmt.Errorf("cluster: %d model argument lists for %d models", len(cfg.ModelArgs), len(cfg.Models))
	}
	if cfg.Binary == "" {
		if cfg.Binary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	if cfg.Prefix == "" {
		cfg.Prefix = fmt.Sprintf("%s.%x", busnats.DefaultPrefix, incarnation())
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.Misses <= 0 {
		cfg.Misses = DefaultMisses
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 5 * time.Second
	}
	if cfg.Output == nil {
		cfg.Output = os.Stderr
	}
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(string, ...any) {}
	}
	l := &Local{cfg: cfg, url: cfg.NATS, stopping: make(chan struct{})}
	if l.url == "" {
		if l.srv, err = busnats.StartServer(busnats.ServerOptions{}); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		l.url = l.srv.URL()
	}
	for i := range cfg.Models {
		c := &child{}
		l.children = append(l.children, c)
		if err := l.spawn(i, c); err != nil {
			l.stop()
			return nil, err
		}
		l.wg.Add(1)
		go l.supervise(i, c)
	}
	l.front, err = Join(ctx, FrontConfig{URL: l.url, Prefix: cfg.Prefix, Models: cfg.Models, Registry: cfg.Registry,
		Algorithm: cfg.Algorithm, Params: cfg.Params, Heartbeat: cfg.Heartbeat, Misses: cfg.Misses,
		JoinTimeout: cfg.JoinTimeout, OnEvent: cfg.OnEvent})
	if err != nil {
		l.stop()
		return nil, err
	}
	return l, nil
}

// args are model i's subserver command line.
func (l *Local) args(i int) []string {
	c := l.cfg
	a := []string{"subserver", "--nats", l.url, "--prefix", c.Prefix, "--index", strconv.Itoa(i),
		"--models", strings.Join(c.Models, ","), "--algorithm", c.Algorithm,
		"--heartbeat", c.Heartbeat.String(), "--misses", strconv.Itoa(c.Misses), "--exit-on-stdin-eof"}
	for k, v := range c.Params {
		a = append(a, "--param", k+"="+v)
	}
	return append(a, c.ModelArgs[i]...)
}

// spawn starts model i's process. Its stdin is a pipe this process holds:
// when this process dies, the child sees EOF and exits, so no child
// outlives its parent.
func (l *Local) spawn(i int, c *child) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-l.stopping:
		return errors.New("cluster: stopping")
	default:
	}
	cmd := exec.Command(l.cfg.Binary, l.args(i)...)
	cmd.Stdout, cmd.Stderr = l.cfg.Output, l.cfg.Output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if _, err := cmd.StdinPipe(); err != nil {
		return fmt.Errorf("cluster: model %d: %w", i, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cluster: model %d: start %s: %w", i, l.cfg.Binary, err)
	}
	c.cmd = cmd
	c.runs++
	l.cfg.OnEvent("sub-server process started", "model", l.cfg.Models[i], "pid", cmd.Process.Pid)
	return nil
}

// supervise waits for model i's process and restarts it when it exits
// while the deployment runs.
func (l *Local) supervise(i int, c *child) {
	defer l.wg.Done()
	for {
		c.mu.Lock()
		cmd := c.cmd
		c.mu.Unlock()
		err := cmd.Wait()
		select {
		case <-l.stopping:
			return
		default:
		}
		l.cfg.OnEvent("sub-server process exited", "model", l.cfg.Models[i], "pid", cmd.Process.Pid, "err", err)
		if l.cfg.NoRestart {
			return
		}
		select {
		case <-l.stopping:
			return
		case <-time.After(l.cfg.Heartbeat):
		}
		if err := l.spawn(i, c); err != nil {
			select {
			case <-l.stopping:
			default:
				l.cfg.OnEvent("sub-server restart failed", "model", l.cfg.Models[i], "err", err)
			}
			return
		}
	}
}

// Deployment returns the front end's deployment.
func (l *Local) Deployment() *deploy.Deployment { return l.front.Deployment() }

// Front returns the front end.
func (l *Local) Front() *Front { return l.front }

// URL returns the NATS server's URL.
func (l *Local) URL() string { return l.url }

// PID returns model i's current process id (0 if none).
func (l *Local) PID(i int) int {
	c := l.children[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Submit admits a request (bench.System).
func (l *Local) Submit(ctx context.Context, prompt []int32, p route.Params) (*stream.Stream, error) {
	return l.front.Submit(ctx, prompt, p)
}

// Close stops the front end, then the children (SIGTERM, SIGKILL after
// StopTimeout), then the embedded server.
func (l *Local) Close() error {
	var err error
	if l.front != nil {
		err = l.front.Close()
	}
	return errors.Join(err, l.stop())
}

// stop ends every child and the embedded server.
func (l *Local) stop() error {
	close(l.stopping)
	var pids []int
	for _, c := range l.children {
		c.mu.Lock()
		if c.cmd != nil && c.cmd.Process != nil {
			pids = append(pids, c.cmd.Process.Pid)
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGTERM) // the child's process group
		}
		c.mu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		l.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-time.After(l.cfg.StopTimeout):
		err = fmt.Errorf("cluster: sub-server processes did not stop within %v; killed", l.cfg.StopTimeout)
		for _, pid := range pids {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		<-done
	}
	if l.srv != nil {
		l.srv.Close()
	}
	return err
}
