package httplimit_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/sluicehq/sluice/httplimit"
)

// Behind a load balancer in 10.0.0.0/8 and a local proxy on a Unix socket,
// the client is the right-most X-Forwarded-For hop that is not a proxy;
// a peer that is not trusted is keyed by its own address.
func ExampleTrustedProxies() {
	key, err := httplimit.TrustedProxies("10.0.0.0/8", "unix")
	if err != nil {
		panic(err)
	}
	for _, remote := range []string{"10.0.0.2:51234", "@", "198.51.100.1:443"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", "[::ffff:203.0.113.7]:4711, 10.0.0.3")
		k, err := key(r)
		fmt.Printf("%-16s %s %v\n", remote, k, err)
	}

	// A Unix-socket peer without "unix" among the prefixes: the server's
	// setup, not the client's fault.
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "@"
	_, err = httplimit.RemoteAddr()(r)
	fmt.Println(errors.Is(err, httplimit.ErrKeyMisconfigured))
	// Output:
	// 10.0.0.2:51234   203.0.113.7 <nil>
	// @                203.0.113.7 <nil>
	// 198.51.100.1:443 198.51.100.1 <nil>
	// true
}

// A header value longer than 64 bytes keys by its SHA-256, so a client
// cannot make its keys in Redis as long as it likes.
func ExampleHeader() {
	key := httplimit.Header("X-API-Key")
	for _, v := range []string{"k-123", strings.Repeat("x", 256<<10)} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-API-Key", v)
		k, _ := key(r)
		fmt.Println(k)
	}
	fmt.Println(httplimit.ValidHeaderName("X API Key"))
	// Output:
	// k-123
	// sha256:1Qm_9kKjU_iFguioRuyuBBwzO3nFenok_zEPvbfpFOk
	// httplimit: header name "X API Key" is not an HTTP field name (RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~)
}
