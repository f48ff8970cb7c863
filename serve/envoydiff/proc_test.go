//go:build unix

package envoydiff_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// service is one rate-limit service process under test, started with no
// flags and envoyproxy/ratelimit's environment, its output collected.
type service struct {
	name                  string // "theirs" or "ours"
	cmd                   *exec.Cmd
	env                   []string
	grpcAddr, httpAddr    string
	metricsURL, debugAddr string
	rls                   rlsv3.RateLimitServiceClient
	health                healthpb.HealthClient

	mu  sync.Mutex
	out []string

	done     chan struct{} // closed when the process has exited
	exitCode int
}

// freePorts returns n distinct loopback ports the kernel had free.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("a free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// launch starts bin with env (KEY=VALUE pairs, added to this process's
// own environment minus every variable either service reads) and its
// listeners on free loopback ports. It does not wait: see [service.ready].
// The process is killed, by pid, at the end of t; its output is printed if
// t failed.
func launch(t *testing.T, name, bin string, env map[string]string) *service {
	t.Helper()
	ports := freePorts(t, 4)
	s := &service{
		name:       name,
		grpcAddr:   "127.0.0.1:" + strconv.Itoa(ports[0]),
		httpAddr:   "127.0.0.1:" + strconv.Itoa(ports[1]),
		debugAddr:  "127.0.0.1:" + strconv.Itoa(ports[2]),
		metricsURL: "http://127.0.0.1:" + strconv.Itoa(ports[3]) + "/metrics",
		done:       make(chan struct{}),
	}
	all := map[string]string{
		"GRPC_HOST": "127.0.0.1", "GRPC_PORT": strconv.Itoa(ports[0]),
		"HOST": "127.0.0.1", "PORT": strconv.Itoa(ports[1]),
		"DEBUG_HOST": "127.0.0.1", "DEBUG_PORT": strconv.Itoa(ports[2]),
		"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": "127.0.0.1:" + strconv.Itoa(ports[3]),
	}
	for k, v := range env {
		all[k] = v
	}
	for k, v := range all {
		s.env = append(s.env, k+"="+v)
	}
	sort.Strings(s.env)
	s.cmd = exec.Command(bin)
	s.cmd.Env = append(cleanEnviron(), s.env...)
	s.cmd.Dir = t.TempDir()
	dieWithTest(s.cmd)
	r, w := io.Pipe()
	s.cmd.Stdout, s.cmd.Stderr = w, w
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s (%s): %v", name, bin, err)
	}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.out = append(s.out, sc.Text())
			s.mu.Unlock()
		}
	}()
	go func() {
		err := s.cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			s.exitCode = exit.ExitCode()
		}
		_ = w.Close()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
		if t.Failed() {
			t.Logf("%s (pid %d), env %v, output:\n%s", s.name, s.cmd.Process.Pid, s.env, s.output())
		}
	})
	conn, err := grpc.NewClient(s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s.rls = rlsv3.NewRateLimitServiceClient(conn)
	s.health = healthpb.NewHealthClient(conn)
	return s
}

// cleanEnviron is this process's environment without the variables the
// services read (so that a developer's own RUNTIME_ROOT or REDIS_URL never
// leaks into a case).
func cleanEnviron() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GO") || k == "PATH" || k == "HOME" || k == "TMPDIR" || k == "USER" {
			env = append(env, kv)
		}
	}
	return env
}

func (s *service) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.out, "\n")
}

// exited reports whether the process has exited.
func (s *service) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// ready waits up to 60 s until GET /healthcheck answers 200 and the gRPC
// health service reports the ratelimit service SERVING; it fails t if the
// process exits first.
func (s *service) ready(t *testing.T) {
	t.Helper()
	if err := s.awaitHealthy(); err != nil {
		t.Fatal(err)
	}
}

// awaitHealthy is ready's wait, returning what went wrong.
func (s *service) awaitHealthy() error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		if s.exited() {
			return fmt.Errorf("%s exited %d before it was healthy:\n%s", s.name, s.exitCode, s.output())
		}
		last := s.probe()
		if last == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy within 60 s: %s", s.name, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// launchReady launches bin and waits until it is healthy, launching it
// again (up to three times) if it exited because a port picked for it was
// taken in the meantime (other tests share the machine).
func launchReady(t *testing.T, name, bin string, env map[string]string) *service {
	t.Helper()
	for attempt := 1; ; attempt++ {
		s := launch(t, name, bin, env)
		err := s.awaitHealthy()
		if err == nil {
			return s
		}
		if attempt < 3 && s.exited() && strings.Contains(s.output(), "address already in use") {
			t.Logf("%s lost a port to another process: starting it again", name)
			continue
		}
		t.Fatal(err)
	}
}

// probe returns "" when both health checks pass, else what failed.
func (s *service) probe() string {
	code, body, err := s.get("/healthcheck")
	if err != nil {
		return err.Error()
	}
	if code != http.StatusOK {
		return fmt.Sprintf("GET /healthcheck: %d %q", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := s.health.Check(ctx, &healthpb.HealthCheckRequest{Service: "ratelimit"})
	if err != nil {
		return "grpc health: " + err.Error()
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return "grpc health: " + resp.GetStatus().String()
	}
	return ""
}

// get sends GET path to the HTTP listener.
func (s *service) get(path string) (int, string, error) {
	return httpDo(http.MethodGet, "http://"+s.httpAddr+path, "")
}

func httpDo(method, url, body string) (int, string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// wait waits up to 20 s for the process to exit and returns its code.
func (s *service) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
		return s.exitCode
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not exit within 20 s", s.name)
		return -1
	}
}
