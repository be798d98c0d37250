package authlimit

import (
	"net"
	"net/http"
	"net/netip"

	"github.com/realclientip/realclientip-go"
)

// Behind wraps h for a listener behind the reverse proxies trusted: a
// request that comes from one of them gets, as its RemoteAddr, the
// address of the client the proxies forwarded it for, so that Source (and
// whatever records where a request came from) names the client, not the
// proxy. That address is the rightmost in X-Forwarded-For not itself a
// trusted proxy's: the proxies append, so the entries to its left are the
// client's to write and are not believed. A request from any other
// address keeps its own, whatever its headers say; one from a trusted
// proxy without a usable X-Forwarded-For keeps the proxy's. With no
// proxy trusted, h is returned as it is.
func Behind(trusted []netip.Prefix, h http.Handler) http.Handler {
	if len(trusted) == 0 {
		return h
	}
	nets := make([]net.IPNet, len(trusted))
	for i, p := range trusted {
		p = p.Masked()
		nets[i] = net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
	}
	// The header name is one the library accepts: no error.
	forwarded, _ := realclientip.NewRightmostTrustedRangeStrategy("X-Forwarded-For", nets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if peer, ok := peerOf(r); ok && inAny(trusted, peer) {
			if client, err := netip.ParseAddr(forwarded.ClientIP(r.Header, r.RemoteAddr)); err == nil {
				r = r.WithContext(r.Context()) // a copy, not the caller's request
				r.RemoteAddr = netip.AddrPortFrom(client.Unmap().WithZone(""), 0).String()
			}
		}
		h.ServeHTTP(w, r)
	})
}

// peerOf is the address r's connection comes from.
func peerOf(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	return ap.Addr().Unmap().WithZone(""), true
}

func inAny(prefixes []netip.Prefix, a netip.Addr) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseProxy reads a trusted proxy as written in a configuration: an
// address ("10.0.0.7", "fd00::7") or a CIDR range ("10.0.0.0/8").
func ParseProxy(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		if a := p.Addr(); a.Is4In6() {
			// An IPv4 range written as IPv6 ("::ffff:10.0.0.0/104"): the
			// peers it is matched with are unmapped.
			if p.Bits() < 96 {
				return netip.Prefix{}, &net.ParseError{Type: "IP address or CIDR range", Text: s}
			}
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, &net.ParseError{Type: "IP address or CIDR range", Text: s}
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
