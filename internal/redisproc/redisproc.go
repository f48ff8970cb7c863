// Package redisproc starts a throwaway redis-server on a free loopback
// port, for the commands' --redis auto (sluice bench, sluice serve): no
// persistence, a temporary directory, stopped and removed by Stop.
// Tests use redistest.StartRedis instead, which ties the server to a
// testing.TB.
package redisproc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Server is a running redis-server.
type Server struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	// Pid is the server's process id.
	Pid int

	cmd    *exec.Cmd
	dir    string
	exited chan struct{}
}

// readyWithin is how long Start waits for the server to answer PING.
const readyWithin = 5 * time.Second

// Start runs redis-server from the PATH and returns once it answers PING.
func Start() (*Server, error) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server is not on the PATH")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "sluice-redis-")
	if err != nil {
		return nil, err
	}
	var output bytes.Buffer
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Pid: cmd.Process.Pid, cmd: cmd, dir: dir, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(readyWithin)
	for !s.answersPing() {
		select {
		case <-s.exited:
			s.Stop()
			return nil, fmt.Errorf("redis-server exited at start: %s", strings.TrimSpace(output.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("redis-server did not answer PING on %s within %s", s.Addr, readyWithin)
		}
	}
	return s, nil
}

func (s *Server) answersPing() bool {
	c, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.TrimSpace(line) == "+PONG"
}

// Stop kills the server, waits for it and removes its directory. It may
// be called more than once.
func (s *Server) Stop() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	_ = os.RemoveAll(s.dir)
}
