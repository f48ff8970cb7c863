package redisconn

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// Conns counts the connections of the clients that [Open] makes with it in
// [Spec.Conns]: the network connections to the servers that hold the
// data (the single node; every Cluster node the client connects to, its
// seeds included; the primary that Sentinel names, not the sentinels).
//
// A connection is counted as created when its dial succeeds (connected,
// and TLS's handshake done, before go-redis's own: HELLO, AUTH, SELECT),
// whatever go-redis then does with it: pool it, give it to a pipeline or
// a subscription, or close it at once (a handshake that fails, a probe of
// a server that was down). It is counted as closed when the client closes
// it, once: on an error, at a failover, past an idle or lifetime limit, at
// the client's Close. A connection the server ends (CLIENT KILL, its
// timeout) stays open here until the client notices and closes its end:
// at its next use, or when the pool checks it before a use.
//
// The counts are kept by wrapping each connection (its Close counts), not
// read from go-redis's pool statistics: PoolStats' TotalConns leaves out
// the pipeline and subscription pools, a Cluster's nodes out of the
// current slot map, and connections dialed and dropped before they are
// pooled, so that Created - TotalConns is not a count of closes.
//
// The zero value counts from zero; one Conns may serve several clients,
// and then counts all of theirs. It is safe for concurrent use.
type Conns struct {
	created, closed atomic.Uint64
}

// ConnCounts are [Conns]' counts at one instant.
type ConnCounts struct {
	Created uint64 // connections made
	Open    uint64 // of those, the ones not closed: Created - Closed
	Closed  uint64 // of those, the ones the client closed
}

// Counts returns the counts. Open is Created - Closed exactly, and never
// negative: Closed is read first, and a connection is counted as created
// before it can be closed.
func (c *Conns) Counts() ConnCounts {
	closed := c.closed.Load()
	created := c.created.Load()
	return ConnCounts{Created: created, Open: created - closed, Closed: closed}
}

// track counts conn as created and returns it wrapped, so that its Close
// counts it as closed.
func (c *Conns) track(conn net.Conn) net.Conn {
	c.created.Add(1)
	t := &trackedConn{Conn: conn, conns: c}
	if sc, ok := conn.(syscall.Conn); ok {
		// go-redis checks an idle connection's socket through
		// syscall.Conn (a TCP connection's, not TLS's): keep it visible.
		return &trackedSyscallConn{t, sc}
	}
	return t
}

// trackedConn is a connection [Conns] counts.
type trackedConn struct {
	net.Conn
	conns  *Conns
	closed atomic.Bool
}

// Close closes the connection and counts it as closed, the first time.
func (t *trackedConn) Close() error {
	if t.closed.CompareAndSwap(false, true) {
		t.conns.closed.Add(1)
	}
	return t.Conn.Close()
}

// NetConn returns the wrapped connection, as crypto/tls.Conn's NetConn
// does: go-redis looks through it for the socket.
func (t *trackedConn) NetConn() net.Conn { return t.Conn }

// trackedSyscallConn is a trackedConn whose connection is a syscall.Conn.
type trackedSyscallConn struct {
	*trackedConn
	sc syscall.Conn
}

func (t *trackedSyscallConn) SyscallConn() (syscall.RawConn, error) { return t.sc.SyscallConn() }

// connsHook is the go-redis hook that counts a client's connections.
type connsHook struct{ conns *Conns }

func (h connsHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil || conn == nil {
			return conn, err
		}
		return h.conns.track(conn), nil
	}
}

func (connsHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (connsHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
