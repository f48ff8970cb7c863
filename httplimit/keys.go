package httplimit

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc derives the rate-limit key of a request: the client, tenant or
// API key the limit applies to. An error makes the middleware answer 400.
type KeyFunc func(r *http.Request) (string, error)

// ErrNoKey is wrapped by the error of a KeyFunc that found nothing to key
// the request by.
var ErrNoKey = errors.New("httplimit: no rate-limit key in the request")

// RemoteAddr keys a request by the address of the peer that sent it
// (Request.RemoteAddr, never a header). IPv6 addresses are grouped by their
// /64 prefix, since one client usually holds a whole /64; see
// [RemoteAddrPrefix] to choose other prefix lengths. This is the default.
func RemoteAddr() KeyFunc { return RemoteAddrPrefix(32, 64) }

// RemoteAddrPrefix keys a request by its peer's address masked to v4 bits
// for IPv4 and v6 bits for IPv6.
func RemoteAddrPrefix(v4, v6 int) KeyFunc {
	return func(r *http.Request) (string, error) {
		addr, err := peerAddr(r)
		if err != nil {
			return "", err
		}
		return maskAddr(addr, v4, v6)
	}
}

// Header keys a request by the value of a header, such as an API key. A
// request without it is an error ([ErrNoKey]).
func Header(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", fmt.Errorf("%w: header %s is missing", ErrNoKey, name)
		}
		return v, nil
	}
}

// TrustedProxies keys a request by the client address behind proxies you
// run. If the peer is in one of the trusted prefixes, the X-Forwarded-For
// hops are read from the right, and the first one that is not itself a
// trusted proxy is the client; if the peer is not trusted, the header is
// ignored (a client could write anything in it) and the peer's address is
// the key. Addresses are grouped as by [RemoteAddr].
func TrustedProxies(prefixes ...string) (KeyFunc, error) {
	var trusted []netip.Prefix
	for _, p := range prefixes {
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("httplimit: trusted proxy %q: %w", p, err)
		}
		trusted = append(trusted, prefix.Masked())
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a.Unmap()) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) (string, error) {
		peer, err := peerAddr(r)
		if err != nil {
			return "", err
		}
		client := peer
		if isTrusted(peer) {
			hops := r.Header.Values("X-Forwarded-For")
			var all []string
			for _, h := range hops {
				all = append(all, strings.Split(h, ",")...)
			}
			for i := len(all) - 1; i >= 0; i-- {
				hop, err := netip.ParseAddr(strings.TrimSpace(all[i]))
				if err != nil {
					break // a malformed hop: stop at the last good one
				}
				client = hop
				if !isTrusted(hop) {
					break
				}
			}
		}
		return maskAddr(client, 32, 64)
	}, nil
}

func peerAddr(r *http.Request) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: remote address %q", ErrNoKey, r.RemoteAddr)
	}
	return addr.Unmap(), nil
}

func maskAddr(a netip.Addr, v4, v6 int) (string, error) {
	bits := v6
	if a.Is4() {
		bits = v4
	}
	p, err := a.WithZone("").Prefix(bits)
	if err != nil {
		return "", fmt.Errorf("httplimit: mask %s to /%d: %w", a, bits, err)
	}
	if bits == a.BitLen() {
		return p.Addr().String(), nil
	}
	return p.String(), nil
}
