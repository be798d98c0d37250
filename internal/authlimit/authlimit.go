// Package authlimit slows down token guessing: it counts failed
// authentication attempts per source (a client's IP address) and says when
// a source must wait before it may try again.
//
// A front asks before it compares a token and reports a token it refuses:
//
//	l := authlimit.New(authlimit.Options{})
//	...
//	src := authlimit.Source(r)
//	if wait, ok := l.Allow(src); !ok {
//		w.Header().Set("Retry-After", authlimit.Seconds(wait))
//		// answer 429 Too Many Requests, without looking at the token
//		return
//	}
//	if !valid(token) {
//		l.Failed(src)
//		// answer 401
//		return
//	}
//
// Each source has a bucket of Burst failed attempts that refills by one
// every Every (defaults: 10 failures at once, then one every 10 s, so 6 a
// minute); only failures take from it, so a client with a good token is
// never slowed by its own use. While the bucket is empty every attempt
// from the source is refused, good token or not: the source is known only
// by its address, so approvers behind one address with a guesser share
// its wait. Attempts that were under way together when the bucket ran dry
// leave it in debt, at most Burst deep, so a burst of parallel guesses
// buys a longer wait, not more guesses.
//
// A source is an IPv4 address, or the /64 network of an IPv6 address (one
// host commonly has a whole /64). An IPv6 source's /48 network (one site,
// commonly) also has a bucket, of networkShare times the burst and rate:
// without it a guesser holding a /48 would have 65,536 sources, enough to
// fill the sources remembered and push every new client into the shared
// bucket past the bound. Behind a reverse proxy every client has
// the proxy's address, and the limit holds for all of them together,
// unless the listener names the proxy (Behind): X-Forwarded-For is
// believed only from a proxy named, since a guesser could set it.
package authlimit

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Defaults of Options.
const (
	DefaultBurst      = 10
	DefaultEvery      = 10 * time.Second
	DefaultMaxSources = 10000
)

// networkShare is how many sources' attempts an IPv6 source's /48 network
// has: its bucket holds networkShare bursts and refills networkShare times
// as fast.
const networkShare = 16

// Options configure a Limiter. The zero value is the defaults.
type Options struct {
	// Burst is how many failed attempts a source may make before it must
	// wait. Default 10.
	Burst int
	// Every is how often a source earns one more failed attempt once its
	// burst is spent. Default 10s.
	Every time.Duration
	// MaxSources bounds how many sources are remembered at once. A source
	// whose bucket is full is forgotten (it is as good as new); when more
	// sources than this are in debt at once, the sources past the bound
	// share one bucket. Default 10000.
	MaxSources int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Limiter counts failed attempts per source. It is safe for concurrent
// use.
type Limiter struct {
	burst int
	every time.Duration
	max   int
	now   func() time.Time

	mu        sync.Mutex
	sources   map[string]*rate.Limiter
	overflow  *rate.Limiter
	lastSweep time.Time
}

// New returns a Limiter with opts, zero fields meaning the defaults.
func New(opts Options) *Limiter {
	l := &Limiter{burst: opts.Burst, every: opts.Every, max: opts.MaxSources, now: opts.Now, sources: map[string]*rate.Limiter{}}
	if l.burst <= 0 {
		l.burst = DefaultBurst
	}
	if l.every <= 0 {
		l.every = DefaultEvery
	}
	if l.max <= 0 {
		l.max = DefaultMaxSources
	}
	if l.now == nil {
		l.now = time.Now
	}
	l.overflow = l.newBucket(1)
	return l
}

// newBucket is the bucket of a source (share 1) or of a network of share
// sources.
func (l *Limiter) newBucket(share int) *rate.Limiter {
	return rate.NewLimiter(rate.Every(l.every/time.Duration(share)), l.burst*share)
}

// network is the /48 network of an IPv6 source, the key of its bucket; ""
// for any other source.
func network(source string) string {
	p, err := netip.ParsePrefix(source)
	if err != nil || !p.Addr().Is6() || p.Bits() != 64 {
		return ""
	}
	n, _ := p.Addr().Prefix(48)
	return n.String()
}

// Allow reports whether source may make an attempt now. When it may not,
// wait is how long until it may; it is never below one second less a
// nanosecond (for a source; its network's refills faster), and Seconds
// spells it for a Retry-After header.
func (l *Limiter) Allow(source string) (wait time.Duration, ok bool) {
	now := l.now()
	wait, ok = l.allow(source, 1, now)
	if n := network(source); n != "" {
		if w, nok := l.allow(n, networkShare, now); !nok {
			wait, ok = max(wait, w), false
		}
	}
	return wait, ok
}

// allow is Allow for the bucket of key, of share sources. A source not
// remembered while the sources are at their bound has the shared bucket;
// a network not remembered has a full one (its sources are judged by
// their own).
func (l *Limiter) allow(key string, share int, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	b := l.sources[key]
	if b == nil && share == 1 && len(l.sources) >= l.max {
		b = l.overflow
	}
	l.mu.Unlock()
	if b == nil {
		return 0, true
	}
	tokens := b.TokensAt(now)
	if tokens >= 1 {
		return 0, true
	}
	return time.Duration(math.Ceil((1 - tokens) * float64(l.every/time.Duration(share)))), false
}

// Failed counts a failed attempt from source (and from its network). A
// source of a network at its debt's limit is not remembered anew: attempts
// that were let through together, from ever new /64s of one /48, fill no
// more of the sources remembered than that network's burst and debt.
func (l *Limiter) Failed(source string) {
	now := l.now()
	remember := true
	if n := network(source); n != "" {
		if b := l.bucket(n, networkShare, now, true); b != nil {
			remember = take(b, now)
		}
	}
	if b := l.bucket(source, 1, now, remember); b != nil {
		take(b, now)
	}
}

// take takes a token from b, down to a debt of one burst: attempts let
// through together may fail after the bucket is empty, and each takes a
// token all the same. It reports false when b is at that debt already.
func take(b *rate.Limiter, now time.Time) bool {
	if b.TokensAt(now) <= -float64(b.Burst()) {
		return false
	}
	b.ReserveN(now, 1)
	return true
}

// bucket returns key's bucket, of share sources, making one (when add is
// set) if there is room. Past the bound a source has the shared bucket and
// a network none; not added, none (nil).
func (l *Limiter) bucket(key string, share int, now time.Time, add bool) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.sources[key]; b != nil || !add {
		return b
	}
	if len(l.sources) >= l.max && now.Sub(l.lastSweep) >= l.every {
		l.lastSweep = now
		for k, b := range l.sources {
			if b.TokensAt(now) >= float64(b.Burst()) {
				delete(l.sources, k)
			}
		}
	}
	if len(l.sources) >= l.max {
		if share > 1 {
			return nil
		}
		return l.overflow
	}
	b := l.newBucket(share)
	l.sources[key] = b
	return b
}

// Seconds spells wait as a Retry-After value: whole seconds, rounded up,
// at least 1.
func Seconds(wait time.Duration) string {
	return strconv.FormatInt(max(1, int64(math.Ceil(wait.Seconds()))), 10)
}

// Source returns the source of r: its remote IPv4 address, or the /64
// network of its IPv6 address; the remote address as it is when it is
// neither.
func Source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}
