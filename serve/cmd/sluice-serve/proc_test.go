package main

// The harness of this package's tests: sluice-serve built once, run as a
// process, and asked over gRPC.

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// binary is sluice-serve, built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-serve-test-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "sluice-serve")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build sluice-serve: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// proc is one sluice-serve process.
type proc struct {
	cmd      *exec.Cmd
	config   string
	mu       sync.Mutex
	log      strings.Builder
	exited   chan struct{}
	exitCode int
	client   rlsv3.RateLimitServiceClient
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

var listening = regexp.MustCompile(`msg="sluice serve: listening" grpc=(\S+) http=(\S+)`)

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// start runs sluice-serve with config and args, and waits until it
// listens. Cleanup kills it if it still runs.
func start(t *testing.T, config string, args ...string) *proc {
	t.Helper()
	p := launch(t, config, args...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := listening.FindStringSubmatch(p.logs()); m != nil {
			conn, err := grpc.NewClient(m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close() })
			p.client = rlsv3.NewRateLimitServiceClient(conn)
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("sluice-serve exited %d before listening:\n%s", p.exitCode, p.logs())
		case <-time.After(20 * time.Millisecond):
		}
		require.True(t, time.Now().Before(deadline), "sluice-serve did not listen within 20 s:\n%s", p.logs())
	}
}

// launch starts sluice-serve without waiting for it.
func launch(t *testing.T, config string, args ...string) *proc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policies.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	p := &proc{config: path, exited: make(chan struct{})}
	p.cmd = exec.Command(binary, append([]string{"--config", path, "--grpc", freeAddr(t), "--http", freeAddr(t)}, args...)...)
	p.start(t)
	return p
}

// start starts p.cmd, gathers its standard error in p.log and its exit
// code in p.exitCode (closing p.exited), and kills it at the end of t.
func (p *proc) start(t *testing.T) {
	t.Helper()
	stderr, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		s := bufio.NewScanner(stderr)
		for s.Scan() {
			p.mu.Lock()
			p.log.WriteString(s.Text() + "\n")
			p.mu.Unlock()
		}
		if exit, ok := p.cmd.Wait().(*exec.ExitError); ok {
			p.exitCode = exit.ExitCode()
		}
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
}

func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.exitCode
	case <-time.After(20 * time.Second):
		t.Fatalf("sluice-serve did not exit within 20 s:\n%s", p.logs())
		return -1
	}
}

func desc(key, value string) []*ratelimitv3.RateLimitDescriptor {
	return []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}}
}

func ask(p *proc, key, value string) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return p.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: desc(key, value)})
}
