// Package redisconn opens a [sluice.Store] on Redis for a server process:
// a single node, a Redis Cluster or a primary found through Sentinel,
// described by a [Spec]. A Spec comes from a URL ([ParseURL], the forms of
// sluice-serve's --redis flag) or from envoyproxy/ratelimit's REDIS_*
// environment variables ([FromEnvoy]); [Open] connects with go-redis v9,
// with the settings a rate limiter wants (docs/failure.md), and checks
// that Redis answers before it returns.
package redisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/goredisstore"
)

// The deployments a [Spec] describes.
const (
	TypeSingle   = "single"   // one Redis server
	TypeCluster  = "cluster"  // a Redis Cluster, reached through any of its nodes
	TypeSentinel = "sentinel" // the primary that Sentinel names, followed across failovers
)

// Spec describes the Redis deployment to open. The zero values of the
// optional fields are the defaults.
type Spec struct {
	// Type is TypeSingle, TypeCluster or TypeSentinel.
	Type string
	// Network is "tcp" (the default when empty) or "unix" (a socket
	// path in Addrs[0]); only a single node is reached over "unix".
	Network string
	// Addrs are host:port addresses: the server (exactly one), a
	// Cluster's seed nodes (any of them; the others are discovered), or
	// the sentinels.
	Addrs []string
	// MasterName is the name under which the sentinels monitor the
	// primary (Sentinel only).
	MasterName string
	// DB is the database number (single and Sentinel; a Cluster has
	// database 0 only).
	DB int
	// Username and Password authenticate to the servers that hold the
	// data (Username empty: the password alone, as AUTH password).
	Username, Password string
	// SentinelUsername and SentinelPassword authenticate to the
	// sentinels (Sentinel only).
	SentinelUsername, SentinelPassword string
	// TLS turns TLS on for every connection, the sentinels' included.
	TLS bool
	// TLSConfig, with TLS, is the TLS configuration (client certificates,
	// roots); nil: the system's roots, the server name taken from each
	// address.
	TLSConfig *tls.Config
	// PoolSize is the number of connections per node; 0: go-redis's
	// default, 10 per GOMAXPROCS. go-redis sends one command per
	// connection at a time, so under concurrency the pool is the queue.
	PoolSize int
	// Conns, when not nil, counts the connections that [Open]'s client
	// opens to the servers holding the data (see [Conns]).
	Conns *Conns
}

// DialTimeout is the bound on each dial: a rate limiter on the path of
// every request must not wait long for a connection (docs/failure.md).
const DialTimeout = 200 * time.Millisecond

// PingTimeout bounds [Open]'s check that Redis answers when the caller's
// context has no deadline.
const PingTimeout = 5 * time.Second

// Validate reports what is wrong with s, or nil.
func (s Spec) Validate() error {
	switch s.Type {
	case TypeSingle, TypeCluster, TypeSentinel:
	default:
		return fmt.Errorf("unknown Redis type %q: want %s, %s or %s", s.Type, TypeSingle, TypeCluster, TypeSentinel)
	}
	switch s.Network {
	case "", "tcp":
	case "unix":
		if s.Type != TypeSingle {
			return fmt.Errorf("a %s is reached over tcp, not %s", s.Type, s.Network)
		}
	default:
		return fmt.Errorf("unknown network %q: want tcp or unix", s.Network)
	}
	if len(s.Addrs) == 0 {
		return errors.New("no address")
	}
	if s.Type == TypeSingle && len(s.Addrs) != 1 {
		return fmt.Errorf("a single node has one address, not %d (%s)", len(s.Addrs), strings.Join(s.Addrs, ","))
	}
	for _, a := range s.Addrs {
		if s.Network == "unix" {
			if a == "" {
				return errors.New("an empty socket path")
			}
			continue
		}
		if err := checkHostPort(a); err != nil {
			return err
		}
	}
	if (s.Type == TypeSentinel) != (s.MasterName != "") {
		if s.MasterName == "" {
			return errors.New("no master name: Sentinel needs one")
		}
		return fmt.Errorf("a master name (%q) is for Sentinel only", s.MasterName)
	}
	if s.DB < 0 {
		return fmt.Errorf("database %d is negative", s.DB)
	}
	if s.Type == TypeCluster && s.DB != 0 {
		return fmt.Errorf("a Redis Cluster has database 0 only, not %d", s.DB)
	}
	if s.Type != TypeSentinel && (s.SentinelUsername != "" || s.SentinelPassword != "") {
		return errors.New("sentinel credentials are for Sentinel only")
	}
	if s.PoolSize < 0 {
		return fmt.Errorf("pool size %d is negative", s.PoolSize)
	}
	return nil
}

// checkHostPort accepts host:port with a port from 1 to 65535.
func checkHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: want host:port", addr)
	}
	if host == "" {
		return fmt.Errorf("address %q: no host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("address %q: port %q is not a number from 1 to 65535", addr, port)
	}
	return nil
}

// String returns s in the URL form [ParseURL] reads, with the passwords
// masked, for logs and errors.
func (s Spec) String() string {
	const mask = "xxxxx"
	scheme := "redis"
	if s.TLS {
		scheme = "rediss"
	}
	if s.Network == "unix" {
		scheme = "unix"
	}
	switch s.Type {
	case TypeCluster, TypeSentinel:
		scheme += "+" + s.Type
	}
	var b strings.Builder
	b.WriteString(scheme + "://")
	if s.Username != "" || s.Password != "" {
		b.WriteString(url.PathEscape(s.Username))
		if s.Password != "" {
			b.WriteString(":" + mask)
		}
		b.WriteString("@")
	}
	b.WriteString(strings.Join(s.Addrs, ","))
	var q []string
	switch {
	case s.Type == TypeSentinel:
		b.WriteString("/" + url.PathEscape(s.MasterName))
		if s.DB != 0 {
			b.WriteString("/" + strconv.Itoa(s.DB))
		}
		if s.SentinelUsername != "" {
			q = append(q, "sentinel_username="+url.QueryEscape(s.SentinelUsername))
		}
		if s.SentinelPassword != "" {
			q = append(q, "sentinel_password="+mask)
		}
	case s.Network == "unix":
		if s.DB != 0 {
			q = append(q, "db="+strconv.Itoa(s.DB))
		}
	case s.Type == TypeSingle:
		b.WriteString("/" + strconv.Itoa(s.DB))
	}
	if s.PoolSize != 0 {
		q = append(q, "pool_size="+strconv.Itoa(s.PoolSize))
	}
	if len(q) > 0 {
		b.WriteString("?" + strings.Join(q, "&"))
	}
	return b.String()
}

// Open connects to the deployment s describes with a go-redis v9 client
// (a Client, ClusterClient or FailoverClient) set as a rate limiter needs
// it: MaxRetries -1 (a resent script may charge a request twice),
// ContextTimeoutEnabled (a call's context bounds it on the socket) and a
// [DialTimeout] dial. It then checks that Redis answers a PING (on a
// Cluster, every primary; under Sentinel, the primary the sentinels name)
// within ctx, or [PingTimeout] when ctx has no deadline, and returns a
// [goredisstore] Store on the client and the func that closes the client.
// With s.Conns, every connection the client makes, the check's included,
// is counted in it. On error nothing is left open.
func Open(ctx context.Context, s Spec) (sluice.Store, func() error, error) {
	if err := s.Validate(); err != nil {
		return nil, nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, PingTimeout)
		defer cancel()
	}
	var tlsConfig *tls.Config
	if s.TLS {
		tlsConfig = s.TLSConfig
		if tlsConfig == nil {
			tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	var (
		client interface {
			redis.Scripter
			Close() error
		}
		ping func() error
	)
	switch s.Type {
	case TypeSingle:
		c := redis.NewClient(&redis.Options{
			Network: s.Network, Addr: s.Addrs[0], DB: s.DB,
			Username: s.Username, Password: s.Password, TLSConfig: tlsConfig, PoolSize: s.PoolSize,
			MaxRetries: -1, ContextTimeoutEnabled: true, DialTimeout: DialTimeout,
		})
		if s.Conns != nil {
			c.AddHook(connsHook{s.Conns})
		}
		client, ping = c, func() error { return c.Ping(ctx).Err() }
	case TypeCluster:
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:    s.Addrs,
			Username: s.Username, Password: s.Password, TLSConfig: tlsConfig, PoolSize: s.PoolSize,
			MaxRetries: -1, ContextTimeoutEnabled: true, DialTimeout: DialTimeout,
		})
		if s.Conns != nil {
			// Before any call: go-redis makes a node's client when a
			// call first needs the node.
			c.OnNewNode(func(node *redis.Client) { node.AddHook(connsHook{s.Conns}) })
		}
		client, ping = c, func() error { return pingPrimaries(ctx, c) }
	case TypeSentinel:
		c := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: s.MasterName, SentinelAddrs: s.Addrs, DB: s.DB,
			Username: s.Username, Password: s.Password,
			SentinelUsername: s.SentinelUsername, SentinelPassword: s.SentinelPassword,
			TLSConfig: tlsConfig, PoolSize: s.PoolSize,
			MaxRetries: -1, ContextTimeoutEnabled: true, DialTimeout: DialTimeout,
		})
		if s.Conns != nil {
			// On the primary's client: the sentinels' connections are
			// made by a client of go-redis's own, without the hook.
			c.AddHook(connsHook{s.Conns})
		}
		client, ping = c, func() error { return c.Ping(ctx).Err() }
	}
	if err := ping(); err != nil {
		_ = client.Close()
		return nil, nil, fmt.Errorf("%s: Redis does not answer: %w", s, err)
	}
	store, err := goredisstore.New(client)
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return store, client.Close, nil
}

// pingPrimaries pings every primary of the Cluster's slot map, and asks
// each whether it finds the Cluster ok (every slot served).
func pingPrimaries(ctx context.Context, c *redis.ClusterClient) error {
	return c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		if err := node.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("primary %s: %w", node.Options().Addr, err)
		}
		info, err := node.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("primary %s: CLUSTER INFO: %w", node.Options().Addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("primary %s does not find the Cluster ok (cluster_state is not ok)", node.Options().Addr)
		}
		return nil
	})
}
