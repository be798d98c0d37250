package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxMessageBytes bounds one message a client sends over stdio.
const MaxMessageBytes = 4 << 20

// ServeIO serves one client session for principal over a newline-delimited
// JSON-RPC stream (the stdio front), until the input ends or ctx is done.
//
// A line that is not a JSON-RPC message gets a JSON-RPC error response
// (parse error or invalid request, with the request's id when one can be
// read) and the session goes on: a client's malformed line does not end it.
func (g *Gateway) ServeIO(ctx context.Context, principal string, in io.Reader, out io.Writer) error {
	w := &syncWriter{w: out}
	pr, pw := io.Pipe()
	ss, err := g.Connect(ctx, principal, &mcp.IOTransport{Reader: pr, Writer: w})
	if err != nil {
		return err
	}
	go func() {
		pw.CloseWithError(filterLines(in, pw, w))
	}()
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
			return err
		}
		return nil
	case <-ctx.Done():
		ss.Close()
		<-done
		return ctx.Err()
	}
}

// syncWriter serializes writes: the SDK and the line filter share the
// output, and each writes whole lines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) Close() error { return nil }

// filterLines copies the JSON-RPC messages of in to sdk, one per line, and
// answers every other line on reply itself. It returns when in ends.
func filterLines(in io.Reader, sdk io.Writer, reply io.Writer) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(r)
		if len(line) > 0 || tooLong {
			if resp := checkLine(line, tooLong); resp != nil {
				if _, werr := reply.Write(resp); werr != nil {
					return werr
				}
			} else if _, werr := sdk.Write(append(line, '\n')); werr != nil {
				return werr
			}
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// readLine reads one line without its newline. A line longer than
// MaxMessageBytes is consumed and reported as tooLong.
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > MaxMessageBytes+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSpace(line), tooLong, err
	}
}

// checkLine returns nil for a line that is a JSON-RPC message (or a batch
// of them) the SDK can read, else the error response to send.
func checkLine(line []byte, tooLong bool) []byte {
	if tooLong {
		return errorLine(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes", MaxMessageBytes))
	}
	if !json.Valid(line) {
		return errorLine(nil, jsonrpc.CodeParseError, "parse error: the line is not valid JSON (each message must be one line of JSON)")
	}
	if line[0] == '[' {
		var batch []json.RawMessage
		if err := json.Unmarshal(line, &batch); err != nil || len(batch) == 0 {
			return errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: an empty batch")
		}
		for _, m := range batch {
			if err := checkMessage(m); err != nil {
				return errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request in batch: "+err.Error())
			}
		}
		return nil
	}
	if err := checkMessage(line); err != nil {
		return errorLine(requestID(line), jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	return nil
}

// checkMessage reports why a JSON value is not a JSON-RPC message: a
// request or notification (with a method), or a response (with exactly one
// of result and error).
func checkMessage(b []byte) error {
	if _, err := jsonrpc.DecodeMessage(b); err != nil {
		return err
	}
	var m struct {
		Method json.RawMessage `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if m.Method == nil && (m.Result == nil) == (m.Error == nil) {
		return errors.New("a message without a method must be a response, with exactly one of result and error")
	}
	return nil
}

// requestID returns the id of a malformed request when it is a valid id.
func requestID(line []byte) any {
	var m struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(line, &m) != nil {
		return nil
	}
	switch id := m.ID.(type) {
	case string:
		return id
	case float64:
		if id == float64(int64(id)) {
			return int64(id)
		}
	}
	return nil
}

func errorLine(id any, code int64, message string) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string        `json:"jsonrpc"`
		ID      any           `json:"id"`
		Error   jsonrpc.Error `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: code, Message: message}})
	return append(b, '\n')
}

// HTTPOptions configure the streamable HTTP front.
type HTTPOptions struct {
	// Tokens maps the hex SHA-256 of each bearer token to the principal
	// that presents it. A request with no token or an unknown one is
	// answered 401 and reaches nothing.
	Tokens map[string]string
	// IdleTimeout closes a session after this long without a request.
	// Default 30 minutes.
	IdleTimeout time.Duration
}

// HTTPHandler returns the streamable HTTP front. A session belongs to the
// principal whose token opened it; the SDK refuses its session id under any
// other token.
func (g *Gateway) HTTPHandler(opts HTTPOptions) (http.Handler, error) {
	tokens := map[[sha256.Size]byte]string{}
	for h, p := range opts.Tokens {
		b, err := hex.DecodeString(strings.ToLower(h))
		if err != nil || len(b) != sha256.Size {
			return nil, fmt.Errorf("token hash %q is not a hex SHA-256 (64 hex digits; compute it with: printf %%s \"$TOKEN\" | sha256sum)", h)
		}
		if !validName(p) {
			return nil, fmt.Errorf("token hash %s: principal %q is not a valid name", h, p)
		}
		var k [sha256.Size]byte
		copy(k[:], b)
		if q, dup := tokens[k]; dup && q != p {
			return nil, fmt.Errorf("token hash %s is given to two principals, %q and %q", h, q, p)
		}
		tokens[k] = p
	}
	if len(tokens) == 0 {
		return nil, errors.New("no bearer tokens: the HTTP front admits only clients with a configured token")
	}
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		p, ok := tokens[sha256.Sum256([]byte(token))]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p}, nil
	}
	idle := opts.IdleTimeout
	if idle <= 0 {
		idle = 30 * time.Minute
	}
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		ti := auth.TokenInfoFromContext(r.Context())
		if ti == nil || ti.UserID == "" {
			return nil // unreachable behind RequireBearerToken
		}
		return g.serverFor(ti.UserID)
	}, &mcp.StreamableHTTPOptions{Logger: g.sdkLogger, SessionTimeout: idle})
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h), nil
}
