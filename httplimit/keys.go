package httplimit

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// KeyFunc derives the rate-limit key of a request: the client, tenant or
// API key the limit applies to. An error makes the middleware answer 400,
// or 500 when it wraps [ErrKeyMisconfigured].
type KeyFunc func(r *http.Request) (string, error)

// ErrNoKey is wrapped by the error of a KeyFunc that found nothing to key
// the request by: the client's fault (the middleware answers 400).
var ErrNoKey = errors.New("httplimit: no rate-limit key in the request")

// NoKeyError is the error of a KeyFunc that found nothing to key the
// request by, with a Reason safe to show the client (the middleware puts
// it in the 400's detail; the text of any other error is never shown). It
// wraps [ErrNoKey].
type NoKeyError struct{ Reason string }

func (e *NoKeyError) Error() string { return ErrNoKey.Error() + ": " + e.Reason }

// Unwrap returns ErrNoKey.
func (e *NoKeyError) Unwrap() error { return ErrNoKey }

// ErrKeyMisconfigured is wrapped by the error of a KeyFunc that cannot key
// any request because of how the server is set up, e.g. [RemoteAddr] on a
// Unix-socket listener; the middleware answers 500, not 400.
var ErrKeyMisconfigured = errors.New("httplimit: the key function cannot key requests on this server")

// RemoteAddr keys a request by the address of the peer that sent it
// (Request.RemoteAddr, never a header). IPv4-mapped IPv6 addresses key as
// IPv4, and IPv6 addresses are grouped by their /64 prefix, since one
// client usually holds a whole /64; see [RemoteAddrPrefix] to choose other
// prefix lengths. This is the default.
//
// A RemoteAddr that is not an IP address (a Unix-socket listener's "@" or
// path, or none) is an error wrapping [ErrKeyMisconfigured]: use
// [TrustedProxies] with "unix" behind a proxy, [Header] or [Fixed].
func RemoteAddr() KeyFunc { return RemoteAddrPrefix(32, 64) }

// RemoteAddrPrefix keys a request by its peer's address masked to v4 bits
// for IPv4 and v6 bits for IPv6, as [RemoteAddr] does.
func RemoteAddrPrefix(v4, v6 int) KeyFunc {
	return func(r *http.Request) (string, error) {
		addr, err := peerAddr(r)
		if err != nil {
			return "", err
		}
		return maskAddr(addr, v4, v6)
	}
}

// maxHeaderKey is the longest header value that keys as itself.
const maxHeaderKey = 64

// Header keys a request by the value of a header, such as an API key. A
// request without it is an error ([ErrNoKey]).
//
// Since the client chooses the value, its length is bounded: a value of
// at most 64 bytes is the key itself, and a longer one (or one that starts
// with "sha256:") keys as "sha256:" and the unpadded base64url SHA-256 of
// the value, 50 bytes. Header never panics; check a name read from
// configuration with [ValidHeaderName], since a name that is not a valid
// HTTP field name matches no header.
func Header(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		if v == "" {
			return "", &NoKeyError{Reason: "header " + name + " is missing"}
		}
		if len(v) > maxHeaderKey || strings.HasPrefix(v, "sha256:") {
			sum := sha256.Sum256([]byte(v))
			return "sha256:" + base64.RawURLEncoding.EncodeToString(sum[:]), nil
		}
		return v, nil
	}
}

// ValidHeaderName returns an error naming the header if name is not a
// valid HTTP field name (an RFC 9110 token: letters, digits and
// !#$%&'*+-.^_`|~), which [Header] could never find in a request.
func ValidHeaderName(name string) error {
	if name == "" {
		return errors.New(`httplimit: header name "" is empty`)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return fmt.Errorf("httplimit: header name %q is not an HTTP field name (RFC 9110 token: letters, digits and !#$%%&'*+-.^_`|~)", name)
		}
	}
	return nil
}

// Fixed keys every request by key: one limit for the whole service, or
// for a Unix-socket listener with no proxy in front. An empty key makes
// every request an error wrapping [ErrKeyMisconfigured].
func Fixed(key string) KeyFunc {
	return func(*http.Request) (string, error) {
		if key == "" {
			return "", fmt.Errorf("%w: Fixed(\"\"): the key is empty", ErrKeyMisconfigured)
		}
		return key, nil
	}
}

// TrustedProxies keys a request by the client address behind proxies you
// run. If the peer is in one of the trusted prefixes, the X-Forwarded-For
// hops are read from the right, and the first one that is not itself a
// trusted proxy is the client; if the peer is not trusted, the header is
// ignored (a client could write anything in it) and the peer's address is
// the key. A hop may carry a port and IPv6 brackets ("192.0.2.1:4711",
// "[2001:db8::1]:4711"); zones are dropped, IPv4-mapped hops are their
// IPv4 address, and a malformed hop stops the walk at the last good one.
// Addresses are grouped as by [RemoteAddr].
//
// The pseudo-prefix "unix" trusts a Unix-socket peer: a RemoteAddr of "@"
// or "@name" (Linux), a path, or "" (an unnamed peer on BSDs and macOS),
// for a server listening on a Unix socket behind a proxy. Such a peer has
// no address of its own, so a request from it without a usable
// X-Forwarded-For is an error wrapping [ErrKeyMisconfigured]. Without
// "unix", such a RemoteAddr is that error whatever the header says.
func TrustedProxies(prefixes ...string) (KeyFunc, error) {
	var trusted []netip.Prefix
	unix := false
	for _, p := range prefixes {
		if p == "unix" {
			unix = true
			continue
		}
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("httplimit: trusted proxy %q (a CIDR prefix or \"unix\"): %w", p, err)
		}
		if prefix.Addr().Is4In6() && prefix.Bits() >= 96 {
			prefix = netip.PrefixFrom(prefix.Addr().Unmap(), prefix.Bits()-96)
		}
		trusted = append(trusted, prefix.Masked())
	}
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	return func(r *http.Request) (string, error) {
		peer, err := peerAddr(r)
		fromUnix := unix && isUnixPeer(r.RemoteAddr)
		if err != nil && !fromUnix {
			return "", err
		}
		if err == nil && !isTrusted(peer) {
			return maskAddr(peer, 32, 64)
		}
		client, ok := forwardedClient(r, isTrusted)
		switch {
		case ok:
			return maskAddr(client, 32, 64)
		case fromUnix:
			return "", fmt.Errorf("%w: the proxy on Unix socket %q sent no usable X-Forwarded-For", ErrKeyMisconfigured, r.RemoteAddr)
		default:
			return maskAddr(peer, 32, 64)
		}
	}, nil
}

// forwardedClient walks X-Forwarded-For from the right to the first hop
// that is not trusted, or the last good hop before a malformed one or the
// header's start. ok is false if the right-most hop is missing or
// malformed.
func forwardedClient(r *http.Request, trusted func(netip.Addr) bool) (client netip.Addr, ok bool) {
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop, good := parseAddr(strings.TrimSpace(hops[i]))
		if !good {
			break
		}
		client, ok = hop, true
		if !trusted(hop) {
			break
		}
	}
	return client, ok
}

// parseAddr parses an IP address, with or without a port, IPv6 with or
// without brackets; it drops the zone and unmaps IPv4-mapped addresses.
func parseAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().WithZone("").Unmap(), true
	}
	bracketed := len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']'
	if bracketed {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil || bracketed && !a.Is6() {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// isUnixPeer reports whether a RemoteAddr is how net/http shows a
// Unix-socket peer.
func isUnixPeer(remote string) bool {
	return remote == "" || remote[0] == '@' || remote[0] == '/'
}

func peerAddr(r *http.Request) (netip.Addr, error) {
	addr, ok := parseAddr(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, fmt.Errorf("%w: RemoteAddr %q is not an IP address (a Unix-socket listener?): "+
			"key by a header, by TrustedProxies with \"unix\" behind a proxy that sets X-Forwarded-For, or by a Fixed key",
			ErrKeyMisconfigured, r.RemoteAddr)
	}
	return addr, nil
}

func maskAddr(a netip.Addr, v4, v6 int) (string, error) {
	bits := v6
	if a.Is4() {
		bits = v4
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return "", fmt.Errorf("httplimit: mask %s to /%d: %w", a, bits, err)
	}
	if bits == a.BitLen() {
		return p.Addr().String(), nil
	}
	return p.String(), nil
}
