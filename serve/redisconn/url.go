package redisconn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// ParseURL reads the Redis URL of sluice-serve's --redis flag:
//
//	redis://[[user]:password@]host[:port][/db]            a single node
//	rediss://[[user]:password@]host[:port][/db]           the same over TLS
//	unix://[[user]:password@]/path/to/redis.sock[?db=N]   a single node on a Unix socket
//	redis+cluster://[[user]:password@]host[:port][,host[:port]...]
//	                                                      a Redis Cluster, through any of its nodes
//	rediss+cluster://...                                  the same over TLS
//	redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db][?sentinel_username=U&sentinel_password=P]
//	                                                      the primary the sentinels at these
//	                                                      addresses monitor as master
//	rediss+sentinel://...                                 the same over TLS, to the sentinels too
//
// The user and password, percent-encoded, authenticate to the servers
// that hold the data (in every form, Sentinel's included; a password
// alone, as ":password@", is sent as AUTH password); sentinel_username and
// sentinel_password authenticate to the sentinels. A port left out is
// 6379, a sentinel's 26379; an IPv6 host is bracketed ([::1]:6379). db
// defaults to 0; a Cluster has database 0 only. Every form also takes
// ?pool_size=N, the connections per node ([Spec].PoolSize). The scheme is
// read in any case; any other parameter, a repeated one, or a part a form
// does not have is an error. Errors never quote the password.
func ParseURL(s string) (Spec, error) {
	spec, err := parseURL(s)
	if err != nil {
		return Spec{}, fmt.Errorf("redis URL: %w", err)
	}
	if err := spec.Validate(); err != nil {
		return Spec{}, fmt.Errorf("redis URL: %w", err)
	}
	return spec, nil
}

const forms = "redis://, rediss://, unix://, redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://"

func parseURL(s string) (Spec, error) {
	var spec Spec
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return spec, fmt.Errorf("no scheme: want %s", forms)
	}
	kind, tlsOn := strings.ToLower(scheme), false
	if k, ok := strings.CutPrefix(kind, "rediss"); ok {
		kind, tlsOn = "redis"+k, true
	}
	switch kind {
	case "redis":
		spec.Type = TypeSingle
	case "unix":
		spec.Type, spec.Network = TypeSingle, "unix"
	case "redis+cluster":
		spec.Type = TypeCluster
	case "redis+sentinel":
		spec.Type = TypeSentinel
	default:
		return spec, fmt.Errorf("unknown scheme %q: want %s", scheme, forms)
	}
	spec.TLS = tlsOn
	rest, rawQuery, _ := strings.Cut(rest, "?")
	authority, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		var err error
		if spec.Username, spec.Password, err = userinfo(authority[:i]); err != nil {
			return spec, err
		}
		authority = authority[i+1:]
	}
	query, err := parseQuery(rawQuery, spec)
	if err != nil {
		return spec, err
	}
	if spec.PoolSize, err = intParam(query, "pool_size"); err != nil {
		return spec, err
	}
	if spec.Network == "unix" {
		if authority != "" {
			return spec, fmt.Errorf("a unix:// URL has no host (%q): write unix:///path/to/redis.sock", authority)
		}
		if path == "" || path == "/" {
			return spec, errors.New("no socket path: write unix:///path/to/redis.sock")
		}
		if spec.Addrs, err = unescapeAll(path); err != nil {
			return spec, err
		}
		spec.DB, err = intParam(query, "db")
		return spec, err
	}
	if authority == "" {
		return spec, errors.New("no host")
	}
	defaultPort := "6379"
	if spec.Type == TypeSentinel {
		defaultPort = "26379"
	}
	for _, h := range strings.Split(authority, ",") {
		addr, err := withPort(h, defaultPort)
		if err != nil {
			return spec, err
		}
		spec.Addrs = append(spec.Addrs, addr)
	}
	segments := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if path == "" || path == "/" {
		segments = nil
	}
	if spec.Type == TypeSentinel {
		if len(segments) == 0 || segments[0] == "" {
			return spec, errors.New("no master name: write redis+sentinel://host:port,host:port/master")
		}
		if spec.MasterName, err = url.PathUnescape(segments[0]); err != nil {
			return spec, fmt.Errorf("master name: %w", err)
		}
		segments = segments[1:]
		spec.SentinelUsername = query.Get("sentinel_username")
		spec.SentinelPassword = query.Get("sentinel_password")
	}
	switch len(segments) {
	case 0:
	case 1:
		db, err := strconv.Atoi(segments[0])
		if err != nil || db < 0 {
			return spec, fmt.Errorf("database %q is not a number from 0 up", segments[0])
		}
		spec.DB = db
	default:
		want := "/db"
		if spec.Type == TypeSentinel {
			want = "/master/db"
		}
		return spec, fmt.Errorf("path %q: want at most %s", path, want)
	}
	return spec, nil
}

// userinfo splits and unescapes user:password (or user alone).
func userinfo(s string) (user, password string, err error) {
	rawUser, rawPassword, _ := strings.Cut(s, ":")
	if user, err = url.PathUnescape(rawUser); err != nil {
		return "", "", errors.New("the user name is not percent-encoded properly")
	}
	if password, err = url.PathUnescape(rawPassword); err != nil {
		return "", "", errors.New("the password is not percent-encoded properly") // never quoted
	}
	return user, password, nil
}

func unescapeAll(path string) ([]string, error) {
	p, err := url.PathUnescape(path)
	if err != nil {
		return nil, fmt.Errorf("socket path: %w", err)
	}
	return []string{p}, nil
}

// withPort returns host:port, adding defaultPort to a host without one.
func withPort(h, defaultPort string) (string, error) {
	switch {
	case h == "":
		return "", errors.New("an empty host in the list")
	case strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]"):
		h = net.JoinHostPort(h[1:len(h)-1], defaultPort)
	case !strings.Contains(h, ":"):
		h = net.JoinHostPort(h, defaultPort)
	}
	return h, checkHostPort(h)
}

// parseQuery parses the query and refuses a parameter spec's form does not
// take, or one given twice.
func parseQuery(raw string, spec Spec) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	allowed := []string{"pool_size"}
	switch {
	case spec.Network == "unix":
		allowed = append(allowed, "db")
	case spec.Type == TypeSentinel:
		allowed = append(allowed, "sentinel_username", "sentinel_password")
	}
	for name, values := range q {
		if !slices.Contains(allowed, name) {
			return nil, fmt.Errorf("unknown parameter %q: this form takes %s", name, strings.Join(allowed, ", "))
		}
		if len(values) > 1 {
			return nil, fmt.Errorf("parameter %q given %d times", name, len(values))
		}
	}
	return q, nil
}

// intParam reads a parameter that is a number from 0 up; absent, 0.
func intParam(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q is not a number from 0 up", name, v)
	}
	return n, nil
}
