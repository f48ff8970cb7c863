package httplimit_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

func request(remote string, xff ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for _, h := range xff {
		r.Header.Add("X-Forwarded-For", h)
	}
	return r
}

func TestRemoteAddr(t *testing.T) {
	key := httplimit.RemoteAddr()
	cases := map[string]string{
		"192.0.2.7:5555":             "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443": "2001:db8:1:2::/64", // the same /64
		"[::ffff:192.0.2.7]:80":      "192.0.2.7",         // IPv4-mapped
		"[fe80::1%eth0]:80":          "fe80::/64",
		"[2001:db8:1:3:3:4:5:6]:443": "2001:db8:1:3::/64",
	}
	for remote, want := range cases {
		got, err := key(request(remote, "203.0.113.9"))
		require.NoError(t, err, remote)
		require.Equal(t, want, got, "%s (X-Forwarded-For is ignored)", remote)
	}
	wide, err := httplimit.RemoteAddrPrefix(24, 48)(request("192.0.2.7:1"))
	require.NoError(t, err)
	require.Equal(t, "192.0.2.0/24", wide)
	got, err := httplimit.RemoteAddrPrefix(32, 128)(request("[fe80::1%eth0]:80"))
	require.NoError(t, err)
	require.Equal(t, "fe80::1", got, "the zone is stripped")
}

func TestTrustedProxies(t *testing.T) {
	key, err := httplimit.TrustedProxies("10.0.0.0/8", "2001:db8:ffff::/48")
	require.NoError(t, err)
	cases := []struct {
		name   string
		remote string
		xff    []string
		want   string
	}{
		{"untrusted peer: the header is ignored", "198.51.100.1:1", []string{"203.0.113.9"}, "198.51.100.1"},
		{"trusted peer: the right-most untrusted hop", "10.1.1.1:1", []string{"203.0.113.9, 198.51.100.2"}, "198.51.100.2"},
		{"trusted hops are skipped", "10.1.1.1:1", []string{"203.0.113.9, 10.2.2.2"}, "203.0.113.9"},
		{"over several header lines", "10.1.1.1:1", []string{"1.2.3.4", "203.0.113.9", "10.3.3.3"}, "203.0.113.9"},
		{"a malformed hop stops the walk", "10.1.1.1:1", []string{"203.0.113.9, garbage, 10.2.2.2"}, "10.2.2.2"},
		{"no header: the peer", "10.1.1.1:1", nil, "10.1.1.1"},
		{"IPv6 proxy and client", "[2001:db8:ffff::1]:1", []string{"2001:db8:5:6::7"}, "2001:db8:5:6::/64"},
	}
	for _, c := range cases {
		got, err := key(request(c.remote, c.xff...))
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got, c.name)
	}
	_, err = httplimit.TrustedProxies("10.0.0.0/33")
	require.Error(t, err)
}

// TestSpoofedForwardedForKeepsOneKey: a client that rotates
// X-Forwarded-For on every request, from a peer that is not a trusted
// proxy, stays one client, end to end.
func TestSpoofedForwardedForKeepsOneKey(t *testing.T) {
	trusted, err := httplimit.TrustedProxies("10.0.0.0/8")
	require.NoError(t, err)
	for name, key := range map[string]httplimit.KeyFunc{"remote-addr": httplimit.RemoteAddr(), "trusted-proxies": trusted} {
		t.Run(name, func(t *testing.T) {
			srv := newServer(t, []httplimit.Policy{{Name: "ip", Limiter: tokenBucket(t, newMemStore(t)), Limit: sluice.PerMinute(5), Key: key}})
			codes := map[int]int{}
			for i := range 20 {
				resp := get(t, srv.URL, map[string]string{"X-Forwarded-For": "203.0.113." + strconv.Itoa(i)})
				codes[resp.StatusCode]++
			}
			require.Equal(t, map[int]int{200: 5, 429: 15}, codes, "one bucket for the one real client")
		})
	}
}

// TestTrustedProxiesUnmapsForwardedFor: an IPv4-mapped hop is its IPv4
// client, both as the key and when deciding whether it is a trusted proxy.
func TestTrustedProxiesUnmapsForwardedFor(t *testing.T) {
	key, err := httplimit.TrustedProxies("10.0.0.0/8")
	require.NoError(t, err)
	cases := map[string]string{
		"::ffff:203.0.113.7":              "203.0.113.7",
		"::ffff:203.0.113.8":              "203.0.113.8", // not ::/64, shared with every mapped client
		"203.0.113.8":                     "203.0.113.8", // the same client
		"203.0.113.9, ::ffff:10.2.2.2":    "203.0.113.9", // a mapped trusted proxy is skipped
		"[::ffff:203.0.113.7]:4711":       "203.0.113.7",
		"::ffff:203.0.113.7, 10.2.2.2:80": "203.0.113.7",
	}
	for xff, want := range cases {
		got, err := key(request("10.1.1.1:1", xff))
		require.NoError(t, err, xff)
		require.Equal(t, want, got, xff)
	}

	// A trusted prefix written IPv4-mapped trusts the IPv4 peers it names.
	mapped, err := httplimit.TrustedProxies("::ffff:10.0.0.0/104")
	require.NoError(t, err)
	got, err := mapped(request("10.1.1.1:1", "203.0.113.9"))
	require.NoError(t, err)
	require.Equal(t, "203.0.113.9", got)
	got, err = mapped(request("[::ffff:10.1.1.1]:1", "203.0.113.9"))
	require.NoError(t, err)
	require.Equal(t, "203.0.113.9", got)
}

// TestTrustedProxiesParsesHops: hops with a port, bracketed IPv6 with or
// without a port, and zones key as the address; a malformed hop still
// stops the walk at the last good one.
func TestTrustedProxiesParsesHops(t *testing.T) {
	key, err := httplimit.TrustedProxies("10.0.0.0/8", "fe80::/10")
	require.NoError(t, err)
	cases := map[string]string{
		"203.0.113.20:4711":              "203.0.113.20",
		"[2001:db8::1]":                  "2001:db8::/64",
		"[2001:db8::1]:4711":             "2001:db8::/64",
		" [2001:db8::1]:4711 ":           "2001:db8::/64",
		"2001:db8::1%eth0":               "2001:db8::/64",
		"[2001:db8::1%eth0]:4711":        "2001:db8::/64",
		"203.0.113.9, 10.2.2.2:80":       "203.0.113.9", // a trusted hop with a port is skipped
		"203.0.113.9, [fe80::1%eth0]:80": "203.0.113.9", // and one with a zone
	}
	for xff, want := range cases {
		got, err := key(request("10.1.1.1:1", xff))
		require.NoError(t, err, xff)
		require.Equal(t, want, got, xff)
	}
	for _, bad := range []string{"garbage", "", "203.0.113.9:", "203.0.113.9:99999", "203.0.113.9:x", "[203.0.113.9]",
		"[2001:db8::1", "2001:db8::1]:80", "[2001:db8::1]:", "[[2001:db8::1]]", "203.0.113.9%eth0"} {
		got, err := key(request("10.1.1.1:1", "198.51.100.7, "+bad+", 10.2.2.2"))
		require.NoError(t, err, bad)
		require.Equal(t, "10.2.2.2", got, "%q is malformed: the walk stops at the last good hop", bad)
	}

	// A zoned trusted peer is trusted (netip.Prefix.Contains is false for
	// any address with a zone).
	got, err := key(request("[fe80::1%eth0]:80", "203.0.113.9"))
	require.NoError(t, err)
	require.Equal(t, "203.0.113.9", got)
}

// TestKeyMisconfigured: a RemoteAddr that is not an IP address (a
// Unix-socket listener, an empty one) is the server's setup, not the
// client's fault: ErrKeyMisconfigured, with a message that names the
// value and what to use instead.
func TestKeyMisconfigured(t *testing.T) {
	trusted, err := httplimit.TrustedProxies("10.0.0.0/8")
	require.NoError(t, err)
	keys := map[string]httplimit.KeyFunc{
		"RemoteAddr": httplimit.RemoteAddr(), "RemoteAddrPrefix": httplimit.RemoteAddrPrefix(24, 48), "TrustedProxies": trusted,
	}
	for name, key := range keys {
		for _, remote := range []string{"", "@", "@abstract", "/run/app.sock", "not an address", "192.0.2.7:http"} {
			_, err := key(request(remote, "203.0.113.9"))
			require.ErrorIs(t, err, httplimit.ErrKeyMisconfigured, "%s, RemoteAddr %q", name, remote)
			require.NotErrorIs(t, err, httplimit.ErrNoKey, "%s, RemoteAddr %q", name, remote)
			msg := err.Error()
			require.Contains(t, msg, strconv.Quote(remote))
			for _, hint := range []string{"header", "TrustedProxies", "X-Forwarded-For", "Fixed"} {
				require.Contains(t, msg, hint, "%s: the message suggests a key function that works", name)
			}
		}
	}
}

// TestTrustedProxiesUnixSocket: with "unix" among the prefixes, a
// Unix-socket peer is a trusted proxy; a proxy that sends no usable
// X-Forwarded-For is a misconfiguration.
func TestTrustedProxiesUnixSocket(t *testing.T) {
	key, err := httplimit.TrustedProxies("unix", "10.0.0.0/8")
	require.NoError(t, err)
	cases := []struct {
		remote string
		xff    []string
		want   string
	}{
		{"@", []string{"203.0.113.9"}, "203.0.113.9"},
		{"@abstract", []string{"203.0.113.9"}, "203.0.113.9"},
		{"/run/proxy.sock", []string{"203.0.113.9"}, "203.0.113.9"},
		{"", []string{"203.0.113.9"}, "203.0.113.9"}, // an unnamed peer on BSDs and macOS
		{"@", []string{"203.0.113.9, 10.2.2.2"}, "203.0.113.9"},
		{"@", []string{"203.0.113.9, garbage, 10.2.2.2"}, "10.2.2.2"},
		{"@", []string{"10.2.2.2"}, "10.2.2.2"}, // only proxies: the left-most
		{"10.1.1.1:1", []string{"203.0.113.9"}, "203.0.113.9"},
		{"198.51.100.1:1", []string{"203.0.113.9"}, "198.51.100.1"},
		{"10.1.1.1:1", []string{"garbage"}, "10.1.1.1"},
	}
	for _, c := range cases {
		got, err := key(request(c.remote, c.xff...))
		require.NoError(t, err, "%q %q", c.remote, c.xff)
		require.Equal(t, c.want, got, "%q %q", c.remote, c.xff)
	}
	for _, xff := range [][]string{nil, {""}, {"garbage"}, {"203.0.113.9, garbage"}} {
		_, err := key(request("@", xff...))
		require.ErrorIs(t, err, httplimit.ErrKeyMisconfigured, "X-Forwarded-For %q from a Unix-socket proxy", xff)
		require.Contains(t, err.Error(), "X-Forwarded-For")
	}
	_, err = key(request("not an address", "203.0.113.9"))
	require.ErrorIs(t, err, httplimit.ErrKeyMisconfigured, "unix trusts Unix-socket peers, not any RemoteAddr")
	_, err = httplimit.TrustedProxies("UNIX")
	require.Error(t, err)
}

// TestUnixSocketListener checks, on a real Unix-socket listener, what
// net/http puts in RemoteAddr and that the key functions treat it so.
func TestUnixSocketListener(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix sockets")
	}
	dir, err := os.MkdirTemp("", "sluice") // short: socket paths are limited to ~100 bytes
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	require.NoError(t, err)
	trusted, err := httplimit.TrustedProxies("unix")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, remoteErr := httplimit.RemoteAddr()(r)
		key, err := trusted(r)
		_, _ = fmt.Fprintf(w, "%v|%v|%s|%v", r.RemoteAddr, errors.Is(remoteErr, httplimit.ErrKeyMisconfigured), key, err)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://proxy/", nil)
	require.NoError(t, err)
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	remote, _, _ := strings.Cut(string(body), "|")
	require.True(t, remote == "" || remote[0] == '@' || remote[0] == '/', "RemoteAddr %q", remote)
	require.Equal(t, remote+"|true|203.0.113.9|<nil>", string(body))
}

// TestFixed: every request shares the one key, whatever its peer; an
// empty key is a misconfiguration.
func TestFixed(t *testing.T) {
	key := httplimit.Fixed("whole-service")
	for _, remote := range []string{"192.0.2.7:1", "@", ""} {
		got, err := key(request(remote))
		require.NoError(t, err)
		require.Equal(t, "whole-service", got)
	}
	_, err := httplimit.Fixed("")(request("192.0.2.7:1"))
	require.ErrorIs(t, err, httplimit.ErrKeyMisconfigured)
}

// TestHeaderBoundsLongValues: a client-chosen header value longer than 64
// bytes keys by its SHA-256, so that twenty 256 KiB API keys cost twenty
// short keys in Redis, not 6.7 MiB.
func TestHeaderBoundsLongValues(t *testing.T) {
	key := httplimit.Header("X-API-Key")
	withKey := func(v string) *http.Request {
		r := request("192.0.2.7:1")
		r.Header.Set("X-API-Key", v)
		return r
	}
	short := strings.Repeat("k", 64)
	got, err := key(withKey(short))
	require.NoError(t, err)
	require.Equal(t, short, got, "up to 64 bytes: the value itself")

	long := strings.Repeat("a", 256<<10)
	sum := sha256.Sum256([]byte(long))
	got, err = key(withKey(long))
	require.NoError(t, err)
	require.LessOrEqual(t, len(got), 71)
	require.Equal(t, "sha256:"+base64.RawURLEncoding.EncodeToString(sum[:]), got)
	require.LessOrEqual(t, len(sluice.Key(got, "http", "per-key")), 100, "the Redis key")

	again, err := key(withKey(long))
	require.NoError(t, err)
	require.Equal(t, got, again, "the same long value: the same key")
	other, err := key(withKey(long[1:] + "b"))
	require.NoError(t, err)
	require.NotEqual(t, got, other, "two long values: two keys")
	sixtyFive, err := key(withKey(short + "k"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(sixtyFive, "sha256:") && len(sixtyFive) == 50, sixtyFive)

	// A short value cannot pose as the hash of a long one.
	posing, err := key(withKey(got))
	require.NoError(t, err)
	require.NotEqual(t, got, posing)
}

// TestValidHeaderName: a header name must be an RFC 9110 token; Header
// itself never panics, whatever the name.
func TestValidHeaderName(t *testing.T) {
	for _, name := range []string{"X-API-Key", "x_tenant", "!#$%&'*+-.^_`|~09azAZ"} {
		require.NoError(t, httplimit.ValidHeaderName(name), name)
	}
	for _, name := range []string{"", "X API", "X-Key:", "X\tKey", "(x)", "Ключ", "X\nKey", "\x7f"} {
		err := httplimit.ValidHeaderName(name)
		require.Error(t, err, "%q", name)
		require.Contains(t, err.Error(), strconv.Quote(name))
		require.NotPanics(t, func() {
			_, err := httplimit.Header(name)(request("192.0.2.7:1"))
			require.ErrorIs(t, err, httplimit.ErrNoKey)
		})
	}
}
