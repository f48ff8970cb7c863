package harness

// This file holds the serve scenarios' process subjects: envoyproxy/ratelimit
// itself and sluice-serve in its envoyproxy/ratelimit-compatible mode, each
// started as a process with the same runtime directory (one YAML file) and
// the same environment, on the scenario's redis-server, and called over
// gRPC on loopback through the same client as the other serve subjects.

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice"
)

// rlsBinary is how a process subject finds its binary among the
// Binaries of its Clients.
type rlsBinary struct {
	what string // named in errors
	find func(Binaries) (string, error)
}

var (
	envoyProxyService  = rlsBinary{what: "envoyproxy/ratelimit", find: Binaries.envoyProxy}
	sluiceServeService = rlsBinary{what: "sluice-serve", find: Binaries.sluiceServe}
)

// processSubject is a serve subject that starts b's binary per scenario
// (per round) and stops it, by pid, when the scenario's run ends.
func processSubject(name string, b rlsBinary) Subject {
	return Subject{Name: name, Remote: true, Ping: pingGoRedis, New: func(c Clients, limit sluice.Limit) (Decide, func(), error) {
		p, decide, err := startRLSSubject(c, limit, b)
		if err != nil {
			return nil, nil, err
		}
		return decide, p.stop, nil
	}}
}

// startRLSSubject starts b's binary (as c.Binaries names or finds it) on
// c's redis-server with the runtime directory and environment of startRLS,
// waits until it is healthy and returns it with a Decide over gRPC.
// Whatever fails after the start stops the process.
func startRLSSubject(c Clients, limit sluice.Limit, b rlsBinary) (*rlsProcess, Decide, error) {
	if c.Rueidis == nil {
		return nil, nil, errNoRedisServer
	}
	yaml, err := envoyYAML(limit)
	if err != nil {
		return nil, nil, err
	}
	bin, err := b.find(c.Binaries)
	if err != nil {
		return nil, nil, fmt.Errorf("skipped: %s was not found: %w", b.what, err)
	}
	opt := c.GoRedis.Options()
	if opt.DB != 0 {
		return nil, nil, fmt.Errorf("skipped: %s knows no Redis database number (REDIS_URL is host:port), and --redis names database %d", b.what, opt.DB)
	}
	redisEnv := map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "single", "REDIS_URL": opt.Addr}
	if opt.Password != "" {
		redisEnv["REDIS_AUTH"] = opt.Password
		if opt.Username != "" {
			redisEnv["REDIS_AUTH"] = opt.Username + ":" + opt.Password
		}
	}
	var p *rlsProcess
	for attempt := 1; ; attempt++ {
		p, err = startRLS(b.what, bin, yaml, redisEnv)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			break
		}
		// Another process took a port picked for it: pick again.
	}
	if err != nil {
		return nil, nil, err
	}
	decide, closeConn, err := dialRLS(p.grpcAddr)
	if err != nil {
		p.stop()
		return nil, nil, err
	}
	p.onStop = closeConn
	if err := warmUp(decide); err != nil {
		p.stop()
		return nil, nil, fmt.Errorf("%s: %w", b.what, err)
	}
	return p, decide, nil
}

// warmUp sends a new process the decisions of warmUpCallers callers on
// keys of its own before it is measured, outside the measured time (and
// before the run resets INFO commandstats): its gRPC connection, its Redis
// connections and its goroutines are then up, as they are for the
// in-process subjects that run on the benchmark's long-lived clients.
func warmUp(decide Decide) error {
	const calls = 20
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, warmUpCallers)
	for g := range warmUpCallers {
		go func() {
			for i := range calls {
				if _, err := decide(ctx, fmt.Sprintf("warm-up-%d-%d", g, i)); err != nil {
					errs <- fmt.Errorf("warm-up decision: %w", err)
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range warmUpCallers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// warmUpCallers is as many callers as the serve scenarios' busiest.
const warmUpCallers = 32

// envoyYAML is the one envoyproxy/ratelimit file both processes load:
// domain serveDomain, every user_id value limited to limit.Rate per unit.
func envoyYAML(limit sluice.Limit) (string, error) {
	units := map[time.Duration]string{time.Second: "SECOND", time.Minute: "MINUTE", time.Hour: "HOUR", 24 * time.Hour: "DAY"}
	unit, ok := units[limit.Period]
	if !ok || limit.Burst != limit.Rate || limit.Rate < 0 || limit.Rate > math.MaxUint32 {
		return "", fmt.Errorf("an envoyproxy/ratelimit file limits per second, minute, hour or day with burst = rate up to %d, not %s", uint32(math.MaxUint32), limit)
	}
	return fmt.Sprintf("domain: %s\ndescriptors:\n  - key: user_id\n    rate_limit:\n      unit: %s\n      requests_per_unit: %d\n", serveDomain, unit, limit.Rate), nil
}

// rlsProcess is one running rate-limit service.
type rlsProcess struct {
	cmd      *exec.Cmd
	grpcAddr string
	httpAddr string
	dir      string // the runtime directory, removed by stop
	out      *tailBuffer
	exited   chan struct{}
	onStop   func()
	stopOnce sync.Once
}

// runtimeSubdirectory and runtimeAppDirectory are RUNTIME_SUBDIRECTORY and
// RUNTIME_APPDIRECTORY: the file is at
// $RUNTIME_ROOT/ratelimit/config/bench.yaml.
const (
	runtimeSubdirectory = "ratelimit"
	runtimeAppDirectory = "config"
)

// startRLS starts bin with no arguments and envoyproxy/ratelimit's
// environment: RUNTIME_ROOT a symlink (as a Kubernetes ConfigMap volume's
// ..data is) to a directory holding the file, the listeners on free
// loopback ports, USE_STATSD=false, and redisEnv; nothing else of this
// process's environment but PATH, HOME and TMPDIR. It returns once both
// health checks pass (GET /healthcheck, gRPC health of "ratelimit").
func startRLS(what, bin, yaml string, redisEnv map[string]string) (*rlsProcess, error) {
	dir, err := os.MkdirTemp("", "sluice-bench-rls-")
	if err != nil {
		return nil, err
	}
	files := filepath.Join(dir, "v1", runtimeSubdirectory, runtimeAppDirectory)
	if err := os.MkdirAll(files, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(files, "bench.yaml"), []byte(yaml), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Symlink("v1", filepath.Join(dir, "current")); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	ports, err := freeLoopbackPorts(3)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	env := map[string]string{
		"RUNTIME_ROOT": filepath.Join(dir, "current"), "RUNTIME_SUBDIRECTORY": runtimeSubdirectory, "RUNTIME_APPDIRECTORY": runtimeAppDirectory,
		"GRPC_HOST": "127.0.0.1", "GRPC_PORT": strconv.Itoa(ports[0]),
		"HOST": "127.0.0.1", "PORT": strconv.Itoa(ports[1]),
		"DEBUG_HOST": "127.0.0.1", "DEBUG_PORT": strconv.Itoa(ports[2]),
		"USE_STATSD": "false",
	}
	for k, v := range redisEnv {
		env[k] = v
	}
	p := &rlsProcess{
		cmd: exec.Command(bin), dir: dir, out: &tailBuffer{}, exited: make(chan struct{}),
		grpcAddr: env["GRPC_HOST"] + ":" + env["GRPC_PORT"], httpAddr: env["HOST"] + ":" + env["PORT"],
	}
	p.cmd.Env = rlsEnviron(env)
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	dieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	registerProcess(p.cmd.Process.Pid, true)
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	if err := p.awaitHealthy(60 * time.Second); err != nil {
		p.stop()
		return nil, fmt.Errorf("%s (%s): %w; its output: %s", what, bin, err, lastLines(p.out.String(), 5))
	}
	return p, nil
}

// rlsEnviron is env as KEY=VALUE, sorted, after PATH, HOME and TMPDIR of
// this process's environment: a developer's own RUNTIME_ROOT or REDIS_URL
// never reaches the services.
func rlsEnviron(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "PATH" || k == "HOME" || k == "TMPDIR" {
			out = append(out, kv)
		}
	}
	var set []string
	for k, v := range env {
		set = append(set, k+"="+v)
	}
	sort.Strings(set)
	return append(out, set...)
}

// awaitHealthy polls both health checks until they pass, the process
// exits or within passes.
func (p *rlsProcess) awaitHealthy(within time.Duration) error {
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	httpc := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	for {
		last := p.probe(httpc, health)
		if last == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited before it was healthy (%v)", p.cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy within %s: %w", within, last)
		}
	}
}

func (p *rlsProcess) probe(httpc http.Client, health healthpb.HealthClient) error {
	resp, err := httpc.Get("http://" + p.httpAddr + "/healthcheck")
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /healthcheck: %s", resp.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	h, err := health.Check(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
	if err != nil {
		return fmt.Errorf("gRPC health: %w", err)
	}
	if h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("gRPC health: %s", h.GetStatus())
	}
	return nil
}

// stop closes the client, sends the process SIGTERM (by its pid), kills it
// if it has not exited 10 s later, waits for it and removes its runtime
// directory. It may be called more than once.
func (p *rlsProcess) stop() {
	p.stopOnce.Do(func() {
		if p.onStop != nil {
			p.onStop()
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		registerProcess(p.cmd.Process.Pid, false)
		_ = os.RemoveAll(p.dir)
	})
}

// freeLoopbackPorts returns n distinct ports the kernel had free on
// 127.0.0.1 (another process may take one before the service binds it:
// startRLSSubject then starts it again).
func freeLoopbackPorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// tailBuffer keeps the last 16 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - 16<<10; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// running holds the pids of the services started and not stopped yet.
var running = struct {
	sync.Mutex
	pids map[int]bool
}{pids: map[int]bool{}}

func registerProcess(pid int, live bool) {
	running.Lock()
	defer running.Unlock()
	if live {
		running.pids[pid] = true
	} else {
		delete(running.pids, pid)
	}
}

// runningServices returns the pids of the service processes started and
// not stopped yet, sorted.
func runningServices() []int {
	running.Lock()
	defer running.Unlock()
	var pids []int
	for pid := range running.pids {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids
}
