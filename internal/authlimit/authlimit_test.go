package authlimit

import (
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func mustAllow(t *testing.T, l *Limiter, src string) {
	t.Helper()
	if wait, ok := l.Allow(src); !ok {
		t.Fatalf("%s refused (wait %v), want allowed", src, wait)
	}
}

func mustWait(t *testing.T, l *Limiter, src string, want time.Duration) {
	t.Helper()
	if wait, ok := l.Allow(src); ok || wait != want {
		t.Fatalf("%s: Allow = %v, %v; want refused with wait %v", src, wait, ok, want)
	}
}

// A source makes Burst failed attempts, then one per Every; another source
// is not slowed; a source that stops failing earns its whole burst back.
func TestBurstThenEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Burst: 3, Every: 10 * time.Second})
		for range 3 {
			mustAllow(t, l, "192.0.2.1")
			l.Failed("192.0.2.1")
		}
		mustWait(t, l, "192.0.2.1", 10*time.Second)
		mustAllow(t, l, "192.0.2.2")

		time.Sleep(4 * time.Second)
		mustWait(t, l, "192.0.2.1", 6*time.Second)
		time.Sleep(6 * time.Second)
		mustAllow(t, l, "192.0.2.1")
		l.Failed("192.0.2.1")
		mustWait(t, l, "192.0.2.1", 10*time.Second)

		time.Sleep(30 * time.Second)
		for range 3 {
			mustAllow(t, l, "192.0.2.1")
			l.Failed("192.0.2.1")
		}
		mustWait(t, l, "192.0.2.1", 10*time.Second)
	})
}

func TestDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{})
		for range DefaultBurst {
			mustAllow(t, l, "a")
			l.Failed("a")
		}
		mustWait(t, l, "a", DefaultEvery)
	})
}

// Guesses under way together when the bucket empties each still cost a
// token, down to a debt of one burst: a parallel burst buys a longer wait.
func TestParallelFailuresGoIntoDebt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Burst: 4, Every: time.Second})
		for range 100 {
			mustAllow(t, l, "a") // all asked before any fails
		}
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() { l.Failed("a") })
		}
		wg.Wait()
		mustWait(t, l, "a", 5*time.Second) // 4 tokens of debt, then one to spend
		time.Sleep(5 * time.Second)
		mustAllow(t, l, "a")
	})
}

// Only so many sources are remembered: full buckets are forgotten, and
// when every remembered source is in debt the next ones share a bucket,
// so guessing from many addresses is still bounded.
func TestMaxSources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Burst: 1, Every: time.Second, MaxSources: 2})
		l.Failed("a")
		l.Failed("b")
		mustWait(t, l, "a", time.Second)
		mustWait(t, l, "b", time.Second)
		mustAllow(t, l, "c") // the shared bucket is full
		l.Failed("c")
		mustWait(t, l, "d", time.Second) // c and d share it
		mustWait(t, l, "c", time.Second)

		time.Sleep(time.Second)
		l.Failed("e") // a and b are full again: forgotten, room for e
		mustWait(t, l, "e", time.Second)
		mustAllow(t, l, "a")
		if n := len(l.sources); n != 1 {
			t.Fatalf("%d sources remembered, want 1 (e)", n)
		}
	})
}

func TestInjectedClock(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := New(Options{Burst: 1, Every: time.Minute, Now: func() time.Time { return now }})
	l.Failed("a")
	mustWait(t, l, "a", time.Minute)
	now = now.Add(time.Minute)
	mustAllow(t, l, "a")
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "1", time.Nanosecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", 10 * time.Second: "10"} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestSource(t *testing.T) {
	for addr, want := range map[string]string{
		"192.0.2.7:51000":            "192.0.2.7",
		"[::ffff:192.0.2.7]:51000":   "192.0.2.7",
		"[2001:db8:1:2:aaaa::1]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:bbbb::9]:443": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":          "fe80::/64",
		"@":                          "@",
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = addr
		if got := Source(r); got != want {
			t.Errorf("Source(%q) = %q, want %q", addr, got, want)
		}
	}
}

func BenchmarkAllowFailed(b *testing.B) {
	l := New(Options{})
	for b.Loop() {
		l.Allow("192.0.2.1")
		l.Failed("192.0.2.1")
	}
}

// An IPv6 source's /48 network has networkShare sources' attempts: a
// guesser spreading over the /64s of one /48 is stopped once the network's
// bucket is spent, and so cannot fill the sources remembered with its
// /64s and push new clients into the shared bucket; a source of another
// network, and IPv4, are not slowed; the network's bucket refills
// networkShare times as fast as a source's.
func TestIPv6Network(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Burst: 2, Every: 16 * time.Second, MaxSources: 1000})
		src := func(i int) string { return fmt.Sprintf("2001:db8:1:%x::/64", i) }
		made := 0
		for i := 0; ; i++ {
			if _, ok := l.Allow(src(i)); !ok {
				break
			}
			l.Failed(src(i))
			made++
		}
		if want := 2 * networkShare; made != want {
			t.Fatalf("the /48 made %d failed attempts from as many /64s before it had to wait, want %d", made, want)
		}
		// Refused before its token is looked at: no more /64s are
		// remembered, however many it has.
		if n := len(l.sources); n != made+1 {
			t.Fatalf("%d sources remembered, want %d /64s and their /48", n, made+1)
		}
		mustWait(t, l, src(made+1), time.Second) // the network's refill, 16 s / 16
		mustAllow(t, l, "2001:db8:2:1::/64")
		mustAllow(t, l, "192.0.2.1")

		time.Sleep(time.Second)
		mustAllow(t, l, src(made+1))
		l.Failed(src(made + 1))
		mustWait(t, l, src(made+1), time.Second)
		// A /64 in debt waits for its own bucket, however full its
		// network's is.
		time.Sleep(2 * networkShare * time.Second)
		l.Failed(src(0))
		l.Failed(src(0))
		mustWait(t, l, src(0), 16*time.Second)
	})
}

// While the sources remembered are at their bound, an IPv6 client whose
// /64 is remembered and whose /48 is not is judged by its /64, as an IPv4
// client is, not by the shared bucket that guessers emptied.
func TestIPv6NetworkForgottenAtBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Burst: 2, Every: 16 * time.Second, MaxSources: 3})
		client := "2001:db8:9:1::/64"
		l.Failed(client)      // its /64 and its /48
		l.Failed("192.0.2.1") // the bound reached
		time.Sleep(2 * time.Second)
		l.Failed("192.0.2.2") // the sweep forgets the /48, full again
		if _, ok := l.sources[network(client)]; ok {
			t.Fatal("the client's network is still remembered")
		}
		l.Failed("192.0.2.3") // the shared bucket, emptied
		l.Failed("192.0.2.3")
		mustWait(t, l, "192.0.2.4", 16*time.Second)
		mustAllow(t, l, client)
	})
}

// Attempts let through together from ever new /64s of one /48 fill no
// more of the sources remembered than the network's burst and debt.
func TestIPv6NetworkParallelSources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(Options{Burst: 2, Every: 16 * time.Second, MaxSources: 1000})
		src := func(i int) string { return fmt.Sprintf("2001:db8:1:%x::/64", i) }
		for i := range 100 {
			mustAllow(t, l, src(i))
		}
		for i := range 100 {
			l.Failed(src(i))
		}
		if n, want := len(l.sources), 2*2*networkShare+1; n != want {
			t.Errorf("%d sources remembered, want %d: the network's burst and debt of /64s, and the network", n, want)
		}
		mustWait(t, l, src(100), 33*time.Second) // 32 in debt, one a second
	})
}
