package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/policyc/policyc/compiler"
	"github.com/policyc/policyc/runtime/decide"
	"github.com/policyc/policyc/runtime/gateway/internal/testupstream"
	"github.com/policyc/policyc/runtime/table"
)

// benchRoleEnv, in the environment of this test binary, makes it serve as
// one of BenchmarkThroughputProcesses's processes instead of running tests:
// "upstream" or "gateway". Either prints its URL on a line of its own and
// serves until its standard input ends.
const benchRoleEnv = "POLICYC_BENCH_ROLE"

// benchUpstreamEnv is the upstream's URL, given to the gateway process.
const benchUpstreamEnv = "POLICYC_BENCH_UPSTREAM"

// benchProfileEnv, when set to a path prefix, makes each process of
// BenchmarkThroughputProcesses write its CPU profile to the prefix followed
// by ".upstream" or ".gateway".
const benchProfileEnv = "POLICYC_BENCH_CPUPROFILE"

// serveBenchRole runs this process as the named role and returns its exit
// status.
func serveBenchRole(role string) int {
	if os.Getenv("GOGC") == "" {
		// The gateway runs with the command's collection policy. The
		// upstream runs at benchGCPercent, which the in-process benchmarks
		// used before the heap floor: more generous than the default of
		// 100 a Go server runs at, so its calls are cheap and the
		// gateway's hop weighs more in the ratio.
		if role == "gateway" {
			defer benchHeapFloor()()
		} else {
			debug.SetGCPercent(benchGCPercent)
		}
	}
	var h http.Handler
	var closeRole func()
	switch role {
	case "upstream":
		up := testupstream.New(testupstream.Options{Name: "github"})
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.Server }, nil)
		closeRole = func() {}
	case "gateway":
		g, handler, err := benchGatewayProcess(os.Getenv(benchUpstreamEnv))
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench gateway:", err)
			return 1
		}
		h, closeRole = handler, func() { g.Close() }
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want upstream or gateway\n", benchRoleEnv, role)
		return 2
	}
	if prefix := os.Getenv(benchProfileEnv); prefix != "" {
		f, err := os.Create(prefix + "." + role)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Printf("http://%s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin)
	srv.Close()
	closeRole()
	return 0
}

// benchGatewayProcess is the gateway of the benchmark's gateway process: the
// benchmark policy, a decision log in a real file, and the HTTP front the
// gateway command serves, with the token "bench-token" for alice.
func benchGatewayProcess(upstream string) (*Gateway, http.Handler, error) {
	if upstream == "" {
		return nil, nil, fmt.Errorf("%s is not set", benchUpstreamEnv)
	}
	res := compiler.Compile(compiler.Input{
		Files:  []compiler.File{{Name: "policy.cue", Data: []byte(benchPolicy)}},
		Source: table.Source{PolicyPath: "bench"},
		Serial: 1,
	})
	if res.Table == nil {
		return nil, nil, fmt.Errorf("the benchmark policy does not compile: %v", res.Diagnostics)
	}
	rt, err := decide.Load(res.Table)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "policyc-bench-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir) // the open file stays writable
	f, err := os.OpenFile(filepath.Join(dir, "decisions.jsonl"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, err
	}
	g, err := New(context.Background(), Config{
		Tables:      fixed(rt),
		Log:         NewJSONLog(f),
		CallTimeout: 30 * time.Second,
		Upstreams:   []Upstream{{Name: "github", URL: upstream}},
	})
	if err != nil {
		return nil, nil, err
	}
	h, err := g.HTTPHandler(HTTPOptions{Tokens: map[string]string{tokenHash("bench-token"): "alice"}})
	if err != nil {
		g.Close()
		return nil, nil, err
	}
	return g, h, nil
}

// startRole starts this test binary as a benchmark process in role and
// returns the URL it serves; the process ends when the benchmark does. A
// process that does not print its URL within ten seconds, or does not end
// within ten seconds of its input closing, is killed.
func startRole(b *testing.B, role string, env ...string) (string, int) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, benchRoleEnv+"="+role)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		kill := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
		defer kill.Stop()
		if err := cmd.Wait(); err != nil {
			b.Errorf("%s process: %v", role, err)
		}
	})
	kill := time.AfterFunc(10*time.Second, func() { cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	kill.Stop()
	if err != nil {
		b.Fatalf("%s process printed no URL: %v", role, err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid
}

// cpuTime is the CPU time process pid has used, user and system; 0 where
// there is no /proc.
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(data, ')')
	if err != nil || i < 0 {
		return 0
	}
	// After the command's name, in parentheses, come the state (field 3)
	// and so on: utime and stime are fields 14 and 15.
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, _ := strconv.ParseInt(s, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// peakRSS is the most memory process pid has had resident, in bytes; 0
// where there is no /proc.
func peakRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb * 1024
		}
	}
	return 0
}

// BenchmarkThroughputProcesses is BenchmarkThroughputHTTP with each party
// in a process of its own, as deployed: the upstream in one, the gateway in
// another (with the command's garbage collection policy, benchHeapFloor),
// and the 32 clients in the benchmark's. Besides the throughputs and their ratio
// it reports, from /proc, the CPU time each process spends per call and the
// gateway's peak resident memory:
//
//	go test ./runtime/gateway -run '^$' -bench ThroughputProcesses -benchtime=3000x
//
// POLICYC_BENCH_CPUPROFILE=prefix writes the upstream's and the gateway's
// CPU profiles to prefix.upstream and prefix.gateway.
func BenchmarkThroughputProcesses(b *testing.B) {
	benchGC(b, "inmemory") // the clients' process: benchGCPercent, as the upstream's
	const rounds = 5
	upURL, upPid := startRole(b, "upstream")
	gwURL, gwPid := startRole(b, "gateway", benchUpstreamEnv+"="+upURL)
	client := pooled()
	direct := openClients(b, func(tb testing.TB) *mcp.ClientSession {
		return connectClient(tb, &mcp.StreamableClientTransport{Endpoint: upURL, HTTPClient: client})
	}, "echo")
	gw := openClients(b, func(tb testing.TB) *mcp.ClientSession {
		return connectClient(tb, &mcp.StreamableClientTransport{Endpoint: gwURL, HTTPClient: &http.Client{Transport: bearer{"bench-token", client.Transport}}})
	}, "github__echo")
	defer func() { // before the processes end: they wait for these clients
		for _, cs := range append(direct, gw...) {
			cs.Close()
		}
	}()
	self := os.Getpid()
	// CPU time spent per phase: by the clients (this process), the
	// upstream and the gateway, in the direct phases and the gateway's.
	var cD, uD, cG, uG, gG time.Duration
	var d, g, ratio []float64
	b.ResetTimer()
	for range rounds {
		c0, u0 := cpuTime(self), cpuTime(upPid)
		dr := callAll(b, direct, "echo")
		c1, u1, g1 := cpuTime(self), cpuTime(upPid), cpuTime(gwPid)
		gr := callAll(b, gw, "github__echo")
		c2, u2, g2 := cpuTime(self), cpuTime(upPid), cpuTime(gwPid)
		cD, uD, cG, uG, gG = cD+c1-c0, uD+u1-u0, cG+c2-c1, uG+u2-u1, gG+g2-g1
		d, g, ratio = append(d, dr), append(g, gr), append(ratio, gr/dr)
	}
	b.StopTimer()
	perCall := func(t time.Duration) float64 { return float64(t.Microseconds()) / float64(rounds*b.N) }
	b.ReportMetric(medianOf(d), "direct-calls/s")
	b.ReportMetric(medianOf(g), "gateway-calls/s")
	b.ReportMetric(medianOf(ratio), "ratio")
	b.ReportMetric(slices.Min(ratio), "ratio-min")
	b.ReportMetric(slices.Max(ratio), "ratio-max")
	b.ReportMetric(perCall(cD), "direct:client-cpu-µs/call")
	b.ReportMetric(perCall(uD), "direct:upstream-cpu-µs/call")
	b.ReportMetric(perCall(cG), "gateway:client-cpu-µs/call")
	b.ReportMetric(perCall(uG), "gateway:upstream-cpu-µs/call")
	b.ReportMetric(perCall(gG), "gateway:gateway-cpu-µs/call")
	b.ReportMetric(peakRSS(gwPid)/(1<<20), "gateway-peak-MiB")
}
