package deploy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sluicehq/sluice/sluicetest/redistest"
)

// TestTheImageServesTheManifests runs what the pod would: build-static.sh's
// /bin/ratelimit, with no arguments and the Deployment's environment, on
// the ConfigMap laid out as the kubelet writes its volume. Only what a
// machine shared with other tests needs is changed: RUNTIME_ROOT moves
// under a temporary directory, the listeners go to free loopback ports,
// REDIS_URL to a throwaway redis-server. It checks the probes' answers,
// a decision by the ConfigMap's rule, the metrics, a ConfigMap update
// reloaded with no signal, and the drain on SIGTERM.
func TestTheImageServesTheManifests(t *testing.T) {
	bin := filepath.Join(buildStatic(t), "ratelimit")
	m := loadManifests(t)
	s, err := readServer(m, "sluice-serve")
	if err != nil {
		t.Fatal(err)
	}
	files, err := s.configVolume(m)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	volume := filepath.Join(root, s.settings.ConfigDir())
	if err := os.MkdirAll(volume, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeConfigMapVolume(volume, files); err != nil {
		t.Fatal(err)
	}

	redis := redistest.StartRedis(t)
	ports := freePorts(t, 4)
	override := map[string]string{
		"RUNTIME_ROOT": filepath.Join(root, s.settings.RuntimeRoot),
		"REDIS_URL":    redis.Addr(),
		"HOST":         "127.0.0.1", "PORT": ports[0],
		"GRPC_HOST": "127.0.0.1", "GRPC_PORT": ports[1],
		"DEBUG_HOST": "127.0.0.1", "DEBUG_PORT": ports[2],
		"PROMETHEUS_ADDR": "127.0.0.1:" + ports[3],
	}
	var env []string
	for _, e := range s.container.Env {
		if _, ok := override[e.Name]; !ok {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	for name, value := range override {
		env = append(env, name+"="+value)
	}
	cmd := exec.Command(bin)
	cmd.Env = env
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{}) // closed once waitErr is set
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("sluice-serve's log:\n%s", logs.String())
		}
	})

	health := "http://127.0.0.1:" + ports[0] + healthPath
	await(t, exited, &waitErr, "GET "+healthPath+" 200", func() bool { return httpStatus(health) == http.StatusOK })

	conn, err := grpc.NewClient("127.0.0.1:"+ports[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, service := range []string{"", "ratelimit"} {
		got, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil || got.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("grpc.health.v1 Check(%q): %v, %v; want SERVING", service, got, err)
		}
	}

	// configmap.yaml: user_id, then path=/orders: 10 per MINUTE, named
	// orders. Each call is another user's, so that none is over the limit.
	users := 0
	orders := func() *rlsv3.RateLimitResponse_RateLimit {
		users++
		resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{
			Domain: "edge",
			Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
				{Key: "user_id", Value: "user" + strconv.Itoa(users)}, {Key: "path", Value: "/orders"},
			}}},
		})
		if err != nil {
			t.Fatalf("ShouldRateLimit, call %d: %v", users, err)
		}
		if resp.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("ShouldRateLimit: %v, want OK", resp)
		}
		return resp.Statuses[0].CurrentLimit
	}
	if got := orders(); got.GetRequestsPerUnit() != 10 || got.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE || got.GetName() != "orders" {
		t.Errorf("current_limit %v, want the ConfigMap's orders: 10 per MINUTE", got)
	}

	metrics := httpBody(t, "http://127.0.0.1:"+ports[3]+s.settings.PrometheusPath)
	if !strings.Contains(metrics, "ratelimit_service_") {
		t.Errorf("GET %s: no ratelimit_service_ metric in\n%.2000s", s.settings.PrometheusPath, metrics)
	}

	// A ConfigMap update: the kubelet writes the new files beside the old
	// ones and renames a new ..data link over the old one.
	updated := strings.Replace(string(files["edge.yaml"]), "requests_per_unit: 10\n", "requests_per_unit: 20\n", 1)
	if strings.Count(string(files["edge.yaml"]), "requests_per_unit: 10\n") != 1 {
		t.Fatal("configmap.yaml's edge.yaml has not one requests_per_unit: 10 to change")
	}
	stamp := "..2026_12_03_15_00_00.000000002"
	if err := os.Mkdir(filepath.Join(volume, stamp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(volume, stamp, "edge.yaml"), []byte(updated), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(stamp, filepath.Join(volume, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(volume, "..data_tmp"), filepath.Join(volume, "..data")); err != nil {
		t.Fatal(err)
	}
	await(t, exited, &waitErr, "the update's 20 per MINUTE", func() bool { return orders().GetRequestsPerUnit() == 20 })

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Errorf("after SIGTERM: %v, want exit 0", waitErr)
		}
	case <-time.After(time.Minute):
		t.Fatal("sluice-serve did not exit within a minute of SIGTERM")
	}
}

// await polls cond until it holds, failing the test if the process exits
// first (exited closed, with *waitErr) or a minute passes (a bound for a
// loaded machine, not a measure).
func await(t *testing.T, exited <-chan struct{}, waitErr *error, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case <-exited:
			t.Fatalf("sluice-serve exited (%v) before %s", *waitErr, what)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
	}
}

func httpStatus(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func httpBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(body)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var ports []string
	var listeners []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners = append(listeners, l)
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	for _, l := range listeners {
		_ = l.Close()
	}
	return ports
}

// syncBuffer is a bytes.Buffer written by the process and read by the
// test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
