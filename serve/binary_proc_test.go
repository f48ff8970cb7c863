//go:build unix

package serve_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The sluice-serve processes of TestServeBinary and its kin: started,
// logged, asked and stopped.

// serveProc is one sluice-serve process, its stderr (the slog text log)
// collected line by line.
type serveProc struct {
	cmd                *exec.Cmd
	grpcAddr, httpAddr string
	rls                rlsv3.RateLimitServiceClient
	config             string // the policy file's path
	children           []int  // the processes cmd started, where the kernel lists them

	mu      sync.Mutex
	lines   []string
	partial []byte // a line not yet ended

	done     chan struct{} // closed when the process has exited
	exitCode int
}

// Write collects the process's stderr (exec copies it here) line by line.
func (p *serveProc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.lines = append(p.lines, string(p.partial[:i]))
		p.partial = p.partial[i+1:]
	}
}

// childPids lists the processes pid started, as Linux's /proc does; nil
// where it does not.
func childPids(pid int) []int {
	// Each thread's file lists the children that thread started.
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var pids []int
	for _, name := range files {
		data, _ := os.ReadFile(name)
		for _, f := range strings.Fields(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				pids = append(pids, n)
			}
		}
	}
	return pids
}

// killStrays kills the sluice-serve that sluice started and left running
// (sluice starts it in a process group of its own, which a kill of sluice
// does not reach; on Linux the kernel sends it SIGTERM when sluice dies,
// which it may not have acted on yet): a process p listed as its child
// that still runs with p's policy file on its command line.
func (p *serveProc) killStrays() {
	for _, pid := range p.children {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmdline), p.config) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

var listeningLine = regexp.MustCompile(`msg="sluice serve: listening" grpc=(\S+) http=(\S+)`)

// startServe runs bin with the policy file config, --redis redisURL and
// both listeners on ports the kernel picks (read back from the listening
// log line), and returns once it listens, with a gRPC client of it. The
// process is killed at the end of t if it still runs; its log is printed
// if t failed.
func startServe(t *testing.T, bin, config, redisURL string) *serveProc {
	t.Helper()
	return startServeAs(t, []string{bin}, config, redisURL)
}

// startServeAs is startServe with the command line before the flags given:
// {sluice-serve} or {sluice, "serve"}.
func startServeAs(t *testing.T, argv []string, config, redisURL string) *serveProc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	p := &serveProc{config: path, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], append(argv[1:], "--config", path, "--redis", redisURL, "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0")...)
	dieWithTest(p.cmd)
	p.cmd.Stderr = p
	// A sluice-serve that sluice leaves behind (sluice killed by a signal
	// it does not pass on) holds stderr open: Wait returns 5 s after
	// sluice's exit all the same, so that the test fails, not hangs.
	p.cmd.WaitDelay = 5 * time.Second
	require.NoError(t, p.cmd.Start())
	go func() {
		_ = p.cmd.Wait() // exec.ErrWaitDelay when stderr was held open
		p.exitCode = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		p.killStrays()
		<-p.done
		if t.Failed() {
			t.Logf("sluice-serve (pid %d) log:\n%s", p.cmd.Process.Pid, p.log())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := listeningLine.FindStringSubmatch(p.log()); m != nil {
			p.grpcAddr, p.httpAddr = m[1], m[2]
			p.children = childPids(p.cmd.Process.Pid)
			break
		}
		select {
		case <-p.done:
			t.Fatalf("sluice-serve exited %d before listening:\n%s", p.exitCode, p.log())
		case <-time.After(10 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "sluice-serve did not listen within 30 s")
	}
	conn, err := grpc.NewClient(p.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	p.rls = rlsv3.NewRateLimitServiceClient(conn)
	return p
}

func (p *serveProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitLog waits up to 20 s for a log line containing s.
func (p *serveProc) waitLog(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.log(), s) {
		require.True(t, time.Now().Before(deadline), "no log line %q within 20 s", s)
		time.Sleep(10 * time.Millisecond)
	}
}

// wait waits up to 20 s for the process to exit and returns its code.
func (p *serveProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.exitCode
	case <-time.After(20 * time.Second):
		t.Fatal("sluice-serve did not exit within 20 s")
		return -1
	}
}

// decide sends one descriptor to p with a 10 s deadline.
func (p *serveProc) decide(ds ...*ratelimitv3.RateLimitDescriptor) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return p.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: ds})
}

// get sends GET path to p's HTTP listener and returns the status and body.
func (p *serveProc) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + p.httpAddr + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// postAllow sends POST /v1/allow to p and returns the status and body.
func (p *serveProc) postAllow(t *testing.T, body string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+p.httpAddr+"/v1/allow", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// headerOf returns the value of the response header name sluice serve asks
// Envoy to add, or "".
func headerOf(resp *rlsv3.RateLimitResponse, name string) string {
	for _, h := range resp.GetResponseHeadersToAdd() {
		if h.GetKey() == name {
			return h.GetValue()
		}
	}
	return ""
}

// newRedisClient returns a go-redis client on addr that never retries.
func newRedisClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
