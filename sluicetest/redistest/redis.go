package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireRedisEnv is the environment variable that turns a missing
// redis-server into a test failure instead of a skip.
const RequireRedisEnv = "SLUICE_REQUIRE_REDIS"

// RequireRedisServer returns the path of redis-server. When it is missing
// the test skips, or fails if SLUICE_REQUIRE_REDIS=1.
func RequireRedisServer(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("redis-server")
	if err == nil {
		return path
	}
	if os.Getenv(RequireRedisEnv) == "1" {
		tb.Fatalf("redis-server not found on PATH and %s=1: install it (Debian: apt-get install redis-server)", RequireRedisEnv)
	}
	tb.Skipf("redis-server not found on PATH: skipping the real-Redis tier (set %s=1 to fail instead)", RequireRedisEnv)
	return ""
}

// RedisServer is a throwaway redis-server process on a loopback port,
// started by the tests so that they can kill, stall, restart and flush it.
// It keeps nothing on disk.
type RedisServer struct {
	path string
	port int
	dir  string
	args []string
	// conf, when set, is a configuration file passed first (a sentinel
	// needs one it can rewrite).
	conf string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis starts a redis-server on a free loopback port, with extra
// configuration arguments (such as "--maxmemory", "1mb"), and registers
// its shutdown with tb.Cleanup.
func StartRedis(tb testing.TB, extraArgs ...string) *RedisServer {
	tb.Helper()
	path := RequireRedisServer(tb)
	s, err := startRedis(path, tb.TempDir(), extraArgs)
	if err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	tb.Cleanup(s.Stop)
	return s
}

func startRedis(path, dir string, extraArgs []string) (*RedisServer, error) {
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &RedisServer{path: path, port: port, dir: dir, args: extraArgs}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *RedisServer) start() error {
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args,
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", "",
		"--loglevel", "warning")
	args = append(args, s.args...)
	cmd := exec.Command(s.path, args...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.path, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	// A redis-server with nothing to load answers at once; while it runs
	// and does not, the machine is loaded, so the wait goes on, for up to
	// startTimeout. It ends at once if the process exits.
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited at start", s.port)
		default:
		}
		if lastErr = s.Ping(); lastErr == nil {
			// The port was free when chosen, but another process may have
			// taken it since: make sure the server answering is ours.
			pid, err := s.Info("server", "process_id")
			switch {
			case err != nil:
				lastErr = err // ask again
			case pid == strconv.Itoa(cmd.Process.Pid):
				return nil
			default:
				s.signal(syscall.SIGKILL)
				<-done
				return fmt.Errorf("port %d is served by another process (pid %s)", s.port, pid)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.signal(syscall.SIGKILL)
	<-done
	return fmt.Errorf("redis-server on port %d, running, did not answer PING within %s: %v", s.port, startTimeout, lastErr)
}

// startTimeout is how long a started redis-server may run without
// answering PING before the harness gives up on it.
const startTimeout = time.Minute

// Addr returns "127.0.0.1:port".
func (s *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// URL returns "redis://127.0.0.1:port/0".
func (s *RedisServer) URL() string { return "redis://" + s.Addr() + "/0" }

// Pid returns the process id of the running server, or 0.
func (s *RedisServer) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Ping sends PING on a new connection and expects PONG.
func (s *RedisServer) Ping() error {
	_, err := s.Do("PING")
	return err
}

// Do sends one command on a new connection and returns the first line of
// the reply (without its type byte for simple strings and integers, and
// the full payload for a bulk string). Tests use it for administration
// (FLUSHALL, SCRIPT FLUSH, INFO) independently of the clients under test.
func (s *RedisServer) Do(args ...string) (string, error) {
	var out string
	err := s.roundTrip(args, func(r *bufio.Reader) error {
		line, err := readLine(r)
		if err != nil {
			return err
		}
		switch line[0] {
		case '+', ':':
			out = line[1:]
		case '-':
			return errors.New(line[1:])
		case '$':
			out, err = readBulk(r, line)
			return err
		default:
			out = line
		}
		return nil
	})
	return out, err
}

// DoStrings sends one command on a new connection and returns its reply
// as a list of strings: an array's elements (nested arrays flattened, a
// nil element as ""), or the one string of any other reply.
func (s *RedisServer) DoStrings(args ...string) ([]string, error) {
	var out []string
	err := s.roundTrip(args, func(r *bufio.Reader) error {
		var read func() error
		read = func() error {
			line, err := readLine(r)
			if err != nil {
				return err
			}
			switch line[0] {
			case '+', ':':
				out = append(out, line[1:])
			case '-':
				return errors.New(line[1:])
			case '$':
				v, err := readBulk(r, line)
				out = append(out, v)
				return err
			case '*':
				n, err := strconv.Atoi(line[1:])
				if err != nil {
					return fmt.Errorf("array header %q: %w", line, err)
				}
				for range max(n, 0) {
					if err := read(); err != nil {
						return err
					}
				}
			default:
				return fmt.Errorf("unexpected reply %q", line)
			}
			return nil
		}
		return read()
	})
	return out, err
}

// roundTrip sends args as one command on a new connection and lets read
// read the reply.
func (s *RedisServer) roundTrip(args []string, read func(*bufio.Reader) error) error {
	conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return err
	}
	return read(bufio.NewReader(conn))
}

// readLine reads one line of a reply, without its CRLF; never empty.
func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	return line, nil
}

// readBulk reads the payload of the bulk string whose header is line ("" for
// a nil one).
func readBulk(r *bufio.Reader, line string) (string, error) {
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 {
		return "", err
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// Info returns the named field of INFO section (such as "used_memory" of
// "memory").
func (s *RedisServer) Info(section, field string) (string, error) {
	out, err := s.Do("INFO", section)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(out, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("INFO %s has no field %s", section, field)
}

// SettledUsedMemory returns INFO memory's used_memory minus
// mem_clients_normal (from one INFO reply) once two readings 100 ms apart
// agree, so that an incremental rehash of the keyspace (two hash tables
// for a while) has finished. The connections' query and reply buffers
// (mem_clients_normal) move by tens of kilobytes with the traffic and
// belong to no key, so they are left out. Memory benchmarks use it.
func (s *RedisServer) SettledUsedMemory() (int64, error) {
	read := func() (int64, error) {
		out, err := s.Do("INFO", "memory")
		if err != nil {
			return 0, err
		}
		fields := map[string]int64{}
		for line := range strings.SplitSeq(out, "\r\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok || k != "used_memory" && k != "mem_clients_normal" {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("INFO memory %s %q: %w", k, v, err)
			}
			fields[k] = n
		}
		if len(fields) != 2 {
			return 0, fmt.Errorf("INFO memory: used_memory or mem_clients_normal missing: %v", fields)
		}
		return fields["used_memory"] - fields["mem_clients_normal"], nil
	}
	prev, err := read()
	if err != nil {
		return 0, err
	}
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		cur, err := read()
		if err != nil {
			return 0, err
		}
		if cur == prev {
			return cur, nil
		}
		prev = cur
	}
	return 0, fmt.Errorf("used_memory did not settle within 5 s (last %d)", prev)
}

// Kill sends SIGKILL and waits for the process to exit: a crash.
func (s *RedisServer) Kill() {
	s.signal(syscall.SIGKILL)
	s.wait()
}

// Stall sends SIGSTOP: the server keeps its connections but answers
// nothing until [RedisServer.Resume].
func (s *RedisServer) Stall() { s.signal(syscall.SIGSTOP) }

// Resume sends SIGCONT to a stalled server.
func (s *RedisServer) Resume() { s.signal(syscall.SIGCONT) }

// Restart stops the server (SIGTERM, or SIGKILL after 5 s) if it runs, and
// starts a fresh one, empty, on the same port.
func (s *RedisServer) Restart() error {
	s.Stop()
	return s.start()
}

// Stop stops the server: SIGCONT (in case it is stalled), SIGTERM, and
// SIGKILL if it has not exited after 5 s. It is safe to call twice.
func (s *RedisServer) Stop() {
	s.signal(syscall.SIGCONT)
	s.signal(syscall.SIGTERM)
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.signal(syscall.SIGKILL)
		<-done
	}
}

func (s *RedisServer) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		select {
		case <-s.done:
		default:
			_ = s.cmd.Process.Signal(sig)
		}
	}
}

func (s *RedisServer) wait() {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// shared is the redis-server shared by the tests of one package.
var shared struct {
	once        sync.Once
	server      *RedisServer
	err         error
	dir         string
	mainRunning bool // set by Main, which stops the server at the end

	clusterOnce sync.Once
	cluster     *RedisCluster
	clusterErr  error
	clusterDirs []string
}

// SharedRedis returns the redis-server shared by the tests of this test
// binary, starting it on first use. The package's TestMain must call
// [Main] (or builtins.Main, which calls it) so that it is stopped when
// the tests end. Tests that share it use distinct keys (see
// [github.com/sluicehq/sluice/sluicetest.UniqueKey]) and must not flush,
// kill or reconfigure it; tests that do start their own with [StartRedis].
func SharedRedis(tb testing.TB) *RedisServer {
	tb.Helper()
	path := RequireRedisServer(tb)
	if !shared.mainRunning {
		tb.Fatalf("redistest.SharedRedis needs the package's TestMain to call redistest.Main (or builtins.Main, which calls it), which stops the server")
	}
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "sluicetest-redis-")
		if err != nil {
			shared.err = err
			return
		}
		shared.dir = dir
		shared.server, shared.err = startRedis(path, dir, nil)
	})
	if shared.err != nil {
		tb.Fatalf("start shared redis-server: %v", shared.err)
	}
	return shared.server
}

// Main runs the tests of a package and then stops the shared redis-server
// and the shared cluster, if they were started. Call it from TestMain:
// func TestMain(m *testing.M) { redistest.Main(m) }. A package whose tests
// also start jobs calls builtins.Main instead, which runs the job in a
// job process and calls Main otherwise.
func Main(m *testing.M) {
	shared.mainRunning = true
	code := m.Run()
	if shared.server != nil {
		shared.server.Stop()
	}
	if shared.cluster != nil {
		for _, n := range shared.cluster.Nodes {
			n.Stop()
		}
	}
	for _, dir := range shared.clusterDirs {
		_ = os.RemoveAll(dir)
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}
