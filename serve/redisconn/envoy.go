package redisconn

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// FromEnvoy reads envoyproxy/ratelimit's Redis settings, given as that
// service reads them from its environment (its defaults applied, the
// booleans, numbers and durations already parsed), as it reads them
// (src/redis/driver_impl.go and src/settings/settings.go at 3fb702589d36):
//
//   - redisType, REDIS_TYPE: single, cluster or sentinel, in any case.
//   - url, REDIS_URL: single: one address, host:port or, over a Unix
//     socket, its path; cluster: comma-separated host:port of seed nodes;
//     sentinel: the master's name then the sentinels,
//     mastername,host:port[,host:port...]. Each address may also be a
//     redis://[user:password@]host:port[/db][?username=U&password=P&db=N]
//     URL whose credentials and database apply where the variables below
//     set none (for a sentinel's address, its credentials are the
//     sentinels'). There is no default port.
//   - socketType, REDIS_SOCKET_TYPE: tcp or unix; it applies to a single
//     node only (a Cluster and Sentinel are reached over tcp, whatever it
//     says, as envoyproxy/ratelimit does).
//   - auth, REDIS_AUTH: password, or user:password (split at the first
//     colon), for the servers that hold the data.
//   - sentinelAuth, REDIS_SENTINEL_AUTH: the same for the sentinels; read
//     for sentinel only.
//   - tls, REDIS_TLS: TLS to every server, the sentinels included;
//     [Spec].TLSConfig is left nil, for the caller to set from
//     REDIS_TLS_CLIENT_CERT and its siblings.
//   - poolSize, REDIS_POOL_SIZE: connections per node; 0: go-redis's
//     default (10 per GOMAXPROCS). radix v4 pipelines the concurrent
//     commands on each of its connections and go-redis sends one at a
//     time, so the same number serves fewer concurrent decisions here:
//     its default, 10, is better passed as 0 when the variable is unset.
//   - pipelineWindow, REDIS_PIPELINE_WINDOW: checked (not negative) and
//     otherwise unused. envoyproxy/ratelimit sets it as radix's write
//     flush interval on a Cluster only, batching the writes of concurrent
//     commands; go-redis has no such setting (one command per connection
//     at a time), and Sluice batches concurrent decisions itself, into
//     one script call, with a policy's coalesce.
//
// A bad value (an unknown type or socket type, an address that is not
// host:port, a sentinel list without a sentinel, a negative number) is an
// error that names its variable and masks the passwords of REDIS_URL.
func FromEnvoy(socketType, redisType, url, auth, sentinelAuth string, tls bool, poolSize int, pipelineWindow time.Duration) (Spec, error) {
	spec := Spec{Type: strings.ToLower(redisType), TLS: tls, PoolSize: poolSize}
	switch spec.Type {
	case TypeSingle, TypeCluster, TypeSentinel:
	default:
		return Spec{}, fmt.Errorf("REDIS_TYPE %q: want single, cluster or sentinel (in any case)", redisType)
	}
	if poolSize < 0 {
		return Spec{}, fmt.Errorf("REDIS_POOL_SIZE %d is negative", poolSize)
	}
	if pipelineWindow < 0 {
		return Spec{}, fmt.Errorf("REDIS_PIPELINE_WINDOW %s is negative", pipelineWindow)
	}
	if url == "" {
		return Spec{}, errors.New("REDIS_URL is empty")
	}
	quoted := strconv.Quote(maskPasswords(url)) // for errors
	spec.Username, spec.Password = splitAuth(auth)
	var nodes []string
	switch spec.Type {
	case TypeSingle:
		switch socketType {
		case "tcp":
		case "unix":
			spec.Network = "unix"
		default:
			return Spec{}, fmt.Errorf("REDIS_SOCKET_TYPE %q: want tcp or unix", socketType)
		}
		if spec.Network != "unix" && strings.Contains(url, ",") {
			return Spec{}, fmt.Errorf("REDIS_URL %s: a single node has one address (REDIS_TYPE=cluster takes several)", quoted)
		}
		nodes = []string{url}
	case TypeCluster:
		nodes = strings.Split(url, ",")
	case TypeSentinel:
		items := strings.Split(url, ",")
		if len(items) < 2 || items[0] == "" {
			return Spec{}, fmt.Errorf("REDIS_URL %s: want the master's name and the sentinels: mastername,host:port[,host:port...]", quoted)
		}
		spec.MasterName, nodes = items[0], items[1:]
		spec.SentinelUsername, spec.SentinelPassword = splitAuth(sentinelAuth)
	}
	var fromURL *envoyAddr
	for _, item := range nodes {
		a, err := parseEnvoyAddr(item, spec.Network == "unix")
		if err != nil {
			return Spec{}, fmt.Errorf("REDIS_URL %s: %w", quoted, err)
		}
		if fromURL != nil && a.creds() != fromURL.creds() {
			return Spec{}, fmt.Errorf("REDIS_URL %s: its redis:// addresses name different users, passwords or databases", quoted)
		}
		fromURL = &a
		spec.Addrs = append(spec.Addrs, a.addr)
	}
	// As radix does: what REDIS_AUTH (or REDIS_SENTINEL_AUTH, for the
	// sentinels' addresses) sets wins over the addresses' URLs.
	user, password := &spec.Username, &spec.Password
	if spec.Type == TypeSentinel {
		user, password = &spec.SentinelUsername, &spec.SentinelPassword
	}
	if *user == "" {
		*user = fromURL.user
	}
	if *password == "" {
		*password = fromURL.password
	}
	if fromURL.db != "" {
		db, err := strconv.Atoi(fromURL.db)
		switch {
		case err != nil || db < 0:
			return Spec{}, fmt.Errorf("REDIS_URL %s: database %q is not a number from 0 up", quoted, fromURL.db)
		case spec.Type == TypeSentinel && db != 0:
			return Spec{}, fmt.Errorf("REDIS_URL %s: a sentinel's address names database %d: sentinels have none", quoted, db)
		}
		spec.DB = db
	}
	if err := spec.Validate(); err != nil {
		return Spec{}, fmt.Errorf("REDIS_URL %s: %w", quoted, err)
	}
	return spec, nil
}

// maskPasswords masks the passwords of REDIS_URL's redis:// addresses,
// in their userinfo and in a password= parameter, for an error.
func maskPasswords(url string) string {
	items := strings.Split(url, ",")
	for i, item := range items {
		rest, ok := strings.CutPrefix(item, "redis://")
		if !ok {
			continue
		}
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			if user, _, hasPassword := strings.Cut(rest[:at], ":"); hasPassword {
				rest = user + ":xxxxx" + rest[at:]
			}
		}
		if p := strings.Index(rest, "password="); p >= 0 {
			p += len("password=")
			end := strings.IndexByte(rest[p:], '&')
			if end < 0 {
				end = len(rest) - p
			}
			rest = rest[:p] + "xxxxx" + rest[p+end:]
		}
		items[i] = "redis://" + rest
	}
	return strings.Join(items, ",")
}

// splitAuth reads REDIS_AUTH's forms: password, or user:password.
func splitAuth(auth string) (user, password string) {
	if u, p, ok := strings.Cut(auth, ":"); ok {
		return u, p
	}
	return "", auth
}

// envoyAddr is one address of REDIS_URL, with what a redis:// form of it
// carries.
type envoyAddr struct {
	addr, user, password, db string
}

func (a envoyAddr) creds() [3]string { return [3]string{a.user, a.password, a.db} }

// parseEnvoyAddr reads host:port (a path when unix), or a redis:// URL as
// radix's dialer reads it: its user and password from the userinfo, else
// from ?username= and ?password=; its database from the path, else ?db=.
func parseEnvoyAddr(item string, unix bool) (envoyAddr, error) {
	a := envoyAddr{addr: item}
	if strings.HasPrefix(item, "redis://") {
		u, err := url.Parse(item)
		if err != nil {
			return a, errors.New("an address is not a valid redis:// URL") // the error would quote the password
		}
		q := u.Query()
		a.addr, a.user, a.password, a.db = u.Host, q.Get("username"), q.Get("password"), q.Get("db")
		if n := u.User.Username(); n != "" {
			a.user = n
		}
		if p, ok := u.User.Password(); ok {
			a.password = p
		}
		if u.Path != "" && u.Path != "/" {
			a.db = u.Path[1:]
		}
	}
	if a.addr == "" {
		return a, errors.New("an empty address")
	}
	if !unix {
		if err := checkHostPort(a.addr); err != nil {
			return a, err
		}
	}
	return a, nil
}
