package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	busnats "github.com/tokenrouter/tokenrouter/bus/nats"
	"github.com/tokenrouter/tokenrouter/deploy"
	"github.com/tokenrouter/tokenrouter/route"
	"github.com/tokenrouter/tokenrouter/stream"
	"github.com/tokenrouter/tokenrouter/system"
)

// LocalConfig configures a deployment with one child process per model.
type LocalConfig struct {
	// Binary is the tokenrouter executable (default: this executable).
	Binary string
	// NATS is an external server's URL; empty starts an embedded server
	// on a random loopback port, with credentials generated per run.
	NATS string
	// NATSAuth authenticates to the external server (NATS); the children
	// receive it with the deployment's key in their ChildSpec.
	NATSAuth busnats.Auth
	// Prefix is the deployment's subject prefix (default: a fresh one per
	// deployment, so several can share a server).
	Prefix string
	// Spec is the deployment. Child i runs model i of it: its ChildSpec
	// (NewChildSpec) travels on the child's standard input, and the child
	// builds its algorithm from the binary's built-in registry. The front
	// end runs Spec's algorithm and options (FrontConfig.Spec). Automatic
	// thresholds are refused: give the children tables.
	Spec system.Spec
	// Args are appended to every child's fixed command line (tokenrouter
	// subserver --spec-on-stdin): the flags every tokenrouter command
	// takes, such as "--log-level", "warn".
	Args []string
	// Heartbeat and Misses: see MemberConfig.
	Heartbeat time.Duration
	Misses    int
	// NoRestart leaves a child that exits dead instead of restarting it.
	NoRestart bool
	// Drain: see MemberConfig (a child asked to stop while the deployment
	// runs drains for at most this long; 0: none).
	Drain time.Duration
	// RestartDelay is the wait before restarting a child (default
	// Heartbeat); it doubles after each child that exits without having
	// joined, up to MaxRestartDelay (default 30s).
	RestartDelay, MaxRestartDelay time.Duration
	// StartTimeout bounds the time a started child has to join before it
	// is killed and restarted (default: JoinTimeout, or 30s).
	StartTimeout time.Duration
	// StopTimeout bounds the wait for children after they are asked to
	// stop (SIGTERM; on Windows, the end of their standard input) before
	// they are killed (default 5s).
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
	models   []string // the model names
	specs    [][]byte // each child's encoded ChildSpec
	srv      *busnats.Server
	url      string
	secrets  Secrets
	mu       sync.Mutex
	front    *Front // set once every child joined
	children []*child
	stopping chan struct{}
	wg       sync.WaitGroup
}

// child supervises one model's process.
type child struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.Closer  // the current process's standard input
	exited chan error // the current process's Wait result
	runs   int
	joined bool          // the current process has served the front end
	missed bool          // the front end saw it miss its heartbeats
	wake   chan struct{} // capacity 1: joined or missed changed
}

// Start starts the NATS server (unless external), one subserver process
// per model, and the front end, and returns once every model has joined.
func Start(ctx context.Context, cfg LocalConfig) (_ *Local, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	l := &Local{cfg: cfg, models: cfg.Spec.Names(), url: cfg.NATS, stopping: make(chan struct{}),
		secrets: Secrets{Auth: cfg.NATSAuth, Key: busnats.NewKey()}}
	if l.url == "" {
		if l.srv, err = busnats.StartServer(busnats.ServerOptions{}); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		l.url, l.secrets.Auth = l.srv.URL(), l.srv.ClientAuth()
	}
	if err := l.encodeSpecs(); err != nil {
		l.stop()
		return nil, err
	}
	for i := range l.specs {
		c := &child{wake: make(chan struct{}, 1)}
		l.children = append(l.children, c)
		if err := l.spawn(i, c); err != nil {
			l.stop()
			return nil, err
		}
		l.wg.Add(1)
		go l.supervise(i, c)
	}
	front, err := Join(ctx, FrontConfig{URL: l.url, Secrets: l.secrets, Prefix: cfg.Prefix, Spec: cfg.Spec,
		Heartbeat: cfg.Heartbeat, Misses: cfg.Misses, JoinTimeout: cfg.JoinTimeout, OnEvent: cfg.OnEvent, Watch: l.watch})
	if err != nil {
		l.stop()
		return nil, err
	}
	l.mu.Lock()
	l.front = front
	l.mu.Unlock()
	return l, nil
}

// defaults checks c and fills in its defaults.
func (c *LocalConfig) defaults() (err error) {
	if len(c.Spec.Models) == 0 || c.Spec.Registry == nil {
		return errors.New("cluster: a deployment needs models and an algorithm registry")
	}
	if c.Binary == "" {
		if c.Binary, err = os.Executable(); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	if c.Prefix == "" {
		c.Prefix = fmt.Sprintf("%s.%x", busnats.DefaultPrefix, incarnation())
	}
	c.Heartbeat = cmp.Or(max(c.Heartbeat, 0), DefaultHeartbeat)
	c.Misses = cmp.Or(max(c.Misses, 0), DefaultMisses)
	c.StopTimeout = cmp.Or(max(c.StopTimeout, 0), 5*time.Second)
	if c.Output == nil {
		c.Output = os.Stderr
	}
	if c.OnEvent == nil {
		c.OnEvent = func(string, ...any) {}
	}
	c.RestartDelay = cmp.Or(max(c.RestartDelay, 0), c.Heartbeat)
	c.MaxRestartDelay = cmp.Or(max(c.MaxRestartDelay, 0), 30*time.Second)
	c.StartTimeout = cmp.Or(max(c.StartTimeout, 0), max(c.JoinTimeout, 0), 30*time.Second)
	return nil
}

// encodeSpecs encodes every child's ChildSpec, once: a restarted child
// gets the same.
func (l *Local) encodeSpecs() error {
	b := BusSpec{NATS: l.url, Prefix: l.cfg.Prefix, Secrets: l.secrets, Heartbeat: l.cfg.Heartbeat, Misses: l.cfg.Misses, Drain: l.cfg.Drain}
	slots := SlotsOf(l.cfg.Spec)
	l.specs = make([][]byte, slots.Len())
	for k := range l.specs {
		i, rep := slots.Of(k)
		c, err := NewChildSpec(l.cfg.Spec, i, rep, b)
		if err != nil {
			return err
		}
		if l.specs[k], err = c.Encode(); err != nil {
			return err
		}
	}
	return nil
}

// name names child k (Slots.Name).
func (l *Local) name(k int) string { return SlotsOf(l.cfg.Spec).Name(l.models, k) }

// args are every child's command line: fixed, the rest of what it needs
// is its ChildSpec.
func (l *Local) args() []string {
	return append([]string{"subserver", "--spec-on-stdin"}, l.cfg.Args...)
}

// spawn starts model i's process. Its stdin is a pipe this process holds:
// the first line carries its ChildSpec (the deployment's secrets among
// them), and when this process dies the child sees EOF and exits, so no
// child outlives its parent.
// What else each platform does for its children (process groups, a
// parent-death signal) is in the proc_*.go files.
func (l *Local) spawn(i int, c *child) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-l.stopping:
		return errors.New("cluster: stopping")
	default:
	}
	cmd := exec.Command(l.cfg.Binary, l.args()...)
	cmd.Stdout, cmd.Stderr = l.cfg.Output, l.cfg.Output
	prepare(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("cluster: model %d: %w", i, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("cluster: model %d: start %s: %w", i, l.cfg.Binary, err)
	}
	// The child reads its spec first thing; the write goes on while spawn
	// returns, so that a spec longer than the pipe's buffer does not hold
	// the lock. A child that died at once fails it (the pipe closes when
	// the child exits); its exit is handled as any other.
	go func(spec []byte) {
		if _, err := stdin.Write(spec); err != nil {
			l.cfg.OnEvent("sub-server process did not take its spec", "model", l.name(i), "err", err)
		}
	}(l.specs[i])
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // returns when the process exits; supervise receives it
	c.cmd, c.stdin, c.exited, c.joined, c.missed = cmd, stdin, exited, false, false
	c.runs++
	l.cfg.OnEvent("sub-server process started", "model", l.name(i), "pid", cmd.Process.Pid)
	return nil
}

// watch is the front end's membership hook: it tells model i's supervisor.
func (l *Local) watch(i int, up, missed bool) {
	c := l.children[i]
	c.mu.Lock()
	if up {
		c.joined, c.missed = true, false
	} else if missed {
		c.missed = true
	}
	c.mu.Unlock()
	signal(c.wake)
}

// supervise waits for model i's process and restarts it when it exits
// while the deployment runs. A process that misses its heartbeats (hung,
// stopped) or does not join within StartTimeout is killed first.
func (l *Local) supervise(i int, c *child) {
	defer l.wg.Done()
	delay := l.cfg.RestartDelay
	for {
		c.mu.Lock()
		cmd, exited := c.cmd, c.exited
		c.mu.Unlock()
		stopped, err := l.await(i, c, cmd, exited)
		exitTime := time.Now()
		if stopped {
			return
		}
		c.mu.Lock()
		joined := c.joined
		c.mu.Unlock()
		l.cfg.OnEvent("sub-server process exited", "model", l.name(i), "pid", cmd.Process.Pid, "err", err)
		if f := l.Front(); f != nil {
			f.Exited(i, exitTime, fmt.Errorf("sub-server process exited: %v", err))
		}
		if l.cfg.NoRestart {
			return
		}
		delay = restartDelay(delay, joined, l.cfg.RestartDelay, l.cfg.MaxRestartDelay)
		timer := time.NewTimer(delay)
		select {
		case <-l.stopping:
			timer.Stop()
			return
		case <-timer.C:
		}
		if err := l.spawn(i, c); err != nil {
			select {
			case <-l.stopping:
			default:
				l.cfg.OnEvent("sub-server restart failed", "model", l.name(i), "err", err)
			}
			return
		}
	}
}

// await waits until model i's process exits, killing it when it missed
// its heartbeats or did not join in time. stopped says the deployment
// stops (stop ends the process).
func (l *Local) await(i int, c *child, cmd *exec.Cmd, exited <-chan error) (stopped bool, err error) {
	start := time.NewTimer(l.cfg.StartTimeout)
	defer start.Stop()
	for {
		select {
		case err := <-exited:
			select {
			case <-l.stopping:
				return true, err
			default:
				return false, err
			}
		case <-l.stopping:
			return true, <-exited
		case <-c.wake:
			c.mu.Lock()
			missed := c.missed
			c.mu.Unlock()
			if missed {
				l.cfg.OnEvent("sub-server missed its heartbeats: killing it", "model", l.name(i), "pid", cmd.Process.Pid)
				_ = killGroup(cmd)
			}
		case <-start.C:
			c.mu.Lock()
			joined := c.joined
			c.mu.Unlock()
			if !joined {
				l.cfg.OnEvent("sub-server did not join in time: killing it", "model", l.name(i), "pid", cmd.Process.Pid, "timeout", l.cfg.StartTimeout)
				_ = killGroup(cmd)
			}
		}
	}
}

// restartDelay is the wait before the next restart: base after a process
// that had joined, otherwise the last delay doubled, at most max.
func restartDelay(last time.Duration, joined bool, base, max time.Duration) time.Duration {
	if joined {
		return base
	}
	return min(2*last, max)
}

// Deployment returns the front end's deployment.
func (l *Local) Deployment() *deploy.Deployment { return l.front.Deployment() }

// Front returns the front end (nil until every child joined).
func (l *Local) Front() *Front {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.front
}

// URL returns the NATS server's URL.
func (l *Local) URL() string { return l.url }

// PID returns child i's current process id (0 if none); child i runs
// member slot i (Slots: model i without replicas).
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

// Restarts returns how many times child i's process was restarted.
func (l *Local) Restarts(i int) int {
	c := l.children[i]
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.runs-1, 0)
}

// Close stops the front end, then the children (SIGTERM to each child's
// process group, or on Windows the end of its standard input; a kill after
// StopTimeout), then the embedded server.
func (l *Local) Close() error {
	var err error
	if f := l.Front(); f != nil {
		err = f.Close()
	}
	return errors.Join(err, l.stop())
}

// stop ends every child and the embedded server.
func (l *Local) stop() error {
	close(l.stopping)
	var cmds []*exec.Cmd
	for _, c := range l.children {
		c.mu.Lock()
		if c.cmd != nil && c.cmd.Process != nil {
			cmds = append(cmds, c.cmd)
			_ = terminate(c.cmd, c.stdin)
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
		for _, cmd := range cmds {
			_ = killGroup(cmd)
		}
		<-done
	}
	if l.srv != nil {
		l.srv.Close()
	}
	return err
}
