package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// measure runs c against a redis-server of its own under callgrind.
func measure(ctx context.Context, c testCase, n int) (Result, error) {
	dir, err := os.MkdirTemp("", "sluice-instructions-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		return Result{}, err
	}
	logPath := filepath.Join(dir, "valgrind.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return Result{}, err
	}
	defer logFile.Close()
	cmd := exec.Command("valgrind", "--tool=callgrind", "--callgrind-out-file="+filepath.Join(dir, "callgrind.out"),
		"--toggle-collect=evalShaCommand",
		"redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("valgrind: %w (is it installed?)", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}()

	client := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer client.Close()
	if err := awaitPing(ctx, client, exited); err != nil {
		return Result{}, err
	}
	do, err := c.setup(ctx, client)
	if err != nil {
		return Result{}, err
	}
	// The first call loads the script (NOSCRIPT, then EVAL, uncounted)
	// and creates the state; it is one of the calls counted below.
	calls := max(n/c.perCall, 1)
	for i := 0; i < calls; i++ {
		if err := do(ctx); err != nil {
			return Result{}, fmt.Errorf("call %d: %w", i+1, err)
		}
	}
	stats, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		return Result{}, err
	}
	ran, err := evalshaCalls(stats)
	if err != nil {
		return Result{}, err
	}
	_ = client.ShutdownNoSave(ctx).Err() // the connection closes as it exits
	select {
	case <-exited:
		stopped = true
	case <-time.After(time.Minute):
		return Result{}, fmt.Errorf("redis-server did not exit after SHUTDOWN")
	}
	if keepDir != "" {
		name := regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(c.name, "_") + ".callgrind.out"
		if err := os.Rename(filepath.Join(dir, "callgrind.out"), filepath.Join(keepDir, name)); err != nil {
			return Result{}, err
		}
	}
	log, err := os.ReadFile(logPath)
	if err != nil {
		return Result{}, err
	}
	collected, err := collectedOf(string(log))
	if err != nil {
		return Result{}, err
	}
	return Result{Case: c.name, PerCall: c.perCall, Calls: ran, Instructions: collected,
		PerDecision: collected / ran / int64(c.perCall), Target: c.target}, nil
}

// quiet drops go-redis's log lines, such as the refused dials while
// valgrind starts the server.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func awaitPing(ctx context.Context, c *redis.Client, exited <-chan error) error {
	redis.SetLogger(quiet{})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := c.Ping(ctx).Err(); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("redis-server under valgrind did not answer in 2 minutes: %w", err)
		}
		select {
		case err := <-exited:
			return fmt.Errorf("redis-server under valgrind exited: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var evalshaRe = regexp.MustCompile(`(?m)^cmdstat_evalsha:calls=(\d+),`)

func evalshaCalls(info string) (int64, error) {
	m := evalshaRe.FindStringSubmatch(info)
	if m == nil {
		return 0, fmt.Errorf("no EVALSHA in INFO commandstats:\n%s", info)
	}
	return strconv.ParseInt(m[1], 10, 64)
}

var collectedRe = regexp.MustCompile(`Collected : (\d+)`)

func collectedOf(log string) (int64, error) {
	m := collectedRe.FindStringSubmatch(log)
	if m == nil {
		return 0, fmt.Errorf("no 'Collected' line in callgrind's output:\n%s", log)
	}
	return strconv.ParseInt(m[1], 10, 64)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func redisVersion() (string, error) {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("redis-server --version: %w", err)
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v, nil
		}
	}
	return strings.TrimSpace(string(out)), nil
}
