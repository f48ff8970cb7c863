package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/store/memstore"
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
	_, err = key(request("not an address"))
	require.ErrorIs(t, err, httplimit.ErrNoKey)
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
			srv := newServer(t, []httplimit.Policy{{Name: "ip", Limiter: tokenBucket(t, memstore.New()), Limit: sluice.PerMinute(5), Key: key}})
			codes := map[int]int{}
			for i := range 20 {
				resp := get(t, srv.URL, map[string]string{"X-Forwarded-For": "203.0.113." + strconv.Itoa(i)})
				codes[resp.StatusCode]++
			}
			require.Equal(t, map[int]int{200: 5, 429: 15}, codes, "one bucket for the one real client")
		})
	}
}
