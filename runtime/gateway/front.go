package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// MaxMessageBytes bounds one message a client sends over stdio.
const MaxMessageBytes = 4 << 20

// ServeIO serves one client session for principal over a newline-delimited
// JSON-RPC stream (the stdio front), until the input ends or ctx is done.
// When ctx is done the calls already read are answered first, for at most
// StopTimeout (a call held for approval is answered when the gate is
// closed, which the command does when it stops): a client is not left
// without the answer to a call the gateway took. When the input ends, the
// host is closing the gateway and will soon kill it: the calls still
// running get inputEndGrace to be answered and are then cancelled, so
// that the gateway can stop its upstreams and exit first (Close).
//
// A line that is not a JSON-RPC message gets a JSON-RPC error response
// (parse error or invalid request, with the request's id when one can be
// read) and the session goes on: a client's malformed line does not end it.
func (g *Gateway) ServeIO(ctx context.Context, principal string, in io.Reader, out io.Writer) error {
	conn := newLineConn(in, out)
	// Why a gateway whose client is gone has not exited yet.
	conn.draining = func(why string, calls int, within time.Duration) {
		g.logger.Info("session ending: "+why+"; answering the calls already read", "principal", principal, "calls", calls, "within", within.String())
	}
	ss, err := g.Connect(ctx, principal, lineTransport{conn})
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	case <-ctx.Done():
		// No new message is read; Read ends the session once the calls
		// read are answered or StopTimeout has passed.
		conn.stop()
		select {
		case <-done:
		case <-time.After(StopTimeout + time.Second):
			ss.Close()
			<-done
		}
		return ctx.Err()
	}
}

// StopTimeout bounds how long a stopping stdio front waits for the
// answers to the calls it has read.
const StopTimeout = 5 * time.Second

// lineTransport hands the SDK a lineConn.
type lineTransport struct{ c *lineConn }

func (t lineTransport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// lineConn is the stdio front's connection: newline-delimited JSON-RPC,
// each line decoded once. A line that is not a message is answered here
// and never reaches the SDK: the MCP Go SDK v1.8.0's IOTransport ends the
// whole session on such a line (TestSDKEndsStdioSessionOnMalformedLine
// fails when it no longer does, and this reader can go). Batches (protocol versions before 2025-06-18) are answered with
// one array, as JSON-RPC asks; once a later version is negotiated, a batch
// is refused, as the HTTP front refuses it.
type lineConn struct {
	out      *SyncWriter
	incoming chan lineMsgs
	closed   chan struct{}
	once     sync.Once
	stopping chan struct{} // closed by stop
	stopOnce sync.Once

	queue []jsonrpc.Message // read side only

	batchMu sync.Mutex
	batches map[jsonrpc.ID]*lineBatch

	// pending holds the calls read and not yet answered: when the input
	// ends, the connection reports the end once they are answered or
	// inputEndGrace has passed (a client that writes its requests and
	// closes its output still gets the answers that come that soon).
	pendingMu sync.Mutex
	pending   map[jsonrpc.ID]bool
	// inUse holds the ids of the calls read whose answers are not yet
	// being written (under pendingMu): a call that repeats one is
	// refused, as its answer could not be told from the other's. An id
	// is free again once its answer is on its way, as in the SDK.
	inUse    map[jsonrpc.ID]bool
	answered chan struct{}
	// abandoned holds the calls answered by abandon (under pendingMu):
	// an answer the SDK writes later for one of them is dropped.
	abandoned map[jsonrpc.ID]bool
	// initID is the id of the initialize request read (under pendingMu);
	// version is the protocol version its answer negotiated.
	initID  jsonrpc.ID
	version atomic.Pointer[string]
	// draining, when set, is told once how many calls are still to be
	// answered when the input ends or the front stops, and for how long
	// they are waited for.
	draining     func(why string, calls int, within time.Duration)
	drainingOnce sync.Once
}

// inputEndGrace is how long the end of the input waits for the answers to
// the calls read before they are cancelled. A host that closes a stdio
// server's input kills it if it has not exited soon after (the TypeScript
// SDK sends SIGTERM after 2 s): the gateway spends at most this and
// Close's two closeGrace steps, under a second, before it exits.
const inputEndGrace = 200 * time.Millisecond

type lineMsgs struct {
	msgs  []jsonrpc.Message
	batch bool
	err   error
}

// lineBatch collects the responses to one incoming batch.
type lineBatch struct {
	pending   map[jsonrpc.ID]int
	responses []*jsonrpc.Response
}

func newLineConn(in io.Reader, out io.Writer) *lineConn {
	c := &lineConn{out: NewSyncWriter(out), incoming: make(chan lineMsgs), closed: make(chan struct{}), stopping: make(chan struct{}), batches: map[jsonrpc.ID]*lineBatch{},
		pending: map[jsonrpc.ID]bool{}, inUse: map[jsonrpc.ID]bool{}, answered: make(chan struct{}, 1)}
	go c.readLoop(in)
	return c
}

func (c *lineConn) readLoop(in io.Reader) {
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(r)
		if len(line) > 0 || tooLong {
			msgs, batch, reply := parseLine(line, tooLong)
			if v := c.version.Load(); batch && v != nil && *v >= firstUnbatched {
				msgs, reply = nil, errorLine(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: JSON-RPC batching is not supported in %s and later (this session: %s); send each message on a line of its own", firstUnbatched, *v))
			}
			if reply != nil {
				if _, werr := c.out.Write(reply); werr != nil {
					err = werr
				}
			} else {
				select {
				case c.incoming <- lineMsgs{msgs: msgs, batch: batch}:
				case <-c.closed:
					return
				}
			}
		}
		if err != nil {
			select {
			case c.incoming <- lineMsgs{err: err}:
			case <-c.closed:
			}
			return
		}
	}
}

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if len(c.queue) > 0 {
		m := c.queue[0]
		c.queue = c.queue[1:]
		return m, nil
	}
	for {
		// A stop comes before any message waiting: a select would pick
		// between them at random.
		select {
		case <-c.stopping:
			c.drain("the gateway is stopping", StopTimeout)
			return nil, io.EOF
		default:
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case <-c.stopping:
			c.drain("the gateway is stopping", StopTimeout)
			return nil, io.EOF
		case in := <-c.incoming:
			if in.err != nil {
				c.drain("its input ended", inputEndGrace)
				c.abandon()
				return nil, in.err
			}
			c.pendingMu.Lock()
			msgs := in.msgs[:0:0]
			for _, m := range in.msgs {
				if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
					if c.inUse[req.ID] {
						// The answer could not tell the two calls apart:
						// refuse this one, without its id, which belongs
						// to the call in progress.
						c.out.Write(errorLine(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: id %s is the id of a call not yet answered; give each call an id of its own", idText(req.ID))))
						continue
					}
					c.pending[req.ID] = true
					c.inUse[req.ID] = true
					if req.Method == "initialize" && c.version.Load() == nil {
						c.initID = req.ID
					}
				}
				msgs = append(msgs, m)
			}
			c.pendingMu.Unlock()
			if len(msgs) == 0 {
				continue
			}
			in.msgs = msgs
			if in.batch {
				b := &lineBatch{pending: map[jsonrpc.ID]int{}}
				for _, m := range in.msgs {
					if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
						b.pending[req.ID] = len(b.responses)
						b.responses = append(b.responses, nil)
					}
				}
				if len(b.pending) > 0 {
					c.batchMu.Lock()
					for id := range b.pending {
						c.batches[id] = b
					}
					c.batchMu.Unlock()
				}
			}
			c.queue = in.msgs[1:]
			return in.msgs[0], nil
		}
	}
}

// stop makes Read end the session, once the calls read are answered,
// instead of reading another message.
func (c *lineConn) stop() {
	c.stopOnce.Do(func() { close(c.stopping) })
}

// drain waits until every call read has been answered, the connection is
// closed, or timeout passes; a stop meanwhile shortens the wait to
// StopTimeout from then.
func (c *lineConn) drain(why string, timeout time.Duration) {
	deadline := time.After(timeout)
	stopping := c.stopping
	for {
		c.pendingMu.Lock()
		n := len(c.pending)
		c.pendingMu.Unlock()
		if n == 0 {
			return
		}
		if c.draining != nil {
			c.drainingOnce.Do(func() { c.draining(why, n, timeout) })
		}
		select {
		case <-c.answered:
		case <-c.closed:
			return
		case <-deadline:
			return
		case <-stopping:
			stopping = nil
			if timeout > StopTimeout {
				deadline = time.After(StopTimeout)
			}
		}
	}
}

// abandon answers every call read and not yet answered with an error
// saying the gateway stopped before it finished: the SDK cancels them when
// Read reports the end of the input, and writes no answer for a call it
// cancelled so.
func (c *lineConn) abandon() {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	for id := range c.pending {
		if !c.inUse[id] {
			continue // its answer is being written
		}
		if c.abandoned == nil {
			c.abandoned = map[jsonrpc.ID]bool{}
		}
		c.abandoned[id] = true
		delete(c.pending, id)
		c.out.Write(errorLine(id.Raw(), jsonrpc.CodeInternalError, fmt.Sprintf("the gateway's input ended before the call was answered, and the call was cancelled (answers are waited for %s after the input ends); it may or may not have taken effect", inputEndGrace)))
	}
}

func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.noteVersion(resp)
		c.pendingMu.Lock()
		dropped := c.abandoned[resp.ID]
		if !dropped {
			delete(c.inUse, resp.ID)
		}
		c.pendingMu.Unlock()
		if dropped {
			return nil
		}
		defer func() {
			c.pendingMu.Lock()
			delete(c.pending, resp.ID)
			c.pendingMu.Unlock()
			select {
			case c.answered <- struct{}{}:
			default:
			}
		}()
		c.batchMu.Lock()
		b := c.batches[resp.ID]
		var complete []*jsonrpc.Response
		if b != nil {
			delete(c.batches, resp.ID)
			b.responses[b.pending[resp.ID]] = resp
			delete(b.pending, resp.ID)
			if len(b.pending) == 0 {
				complete = b.responses
			}
		}
		c.batchMu.Unlock()
		if b != nil {
			if complete == nil {
				return nil
			}
			raw := make([]json.RawMessage, len(complete))
			for i, r := range complete {
				enc, err := jsonrpc.EncodeMessage(r)
				if err != nil {
					return err
				}
				raw[i] = enc
			}
			data, err := json.Marshal(raw)
			if err != nil {
				return err
			}
			_, err = c.out.Write(append(data, '\n'))
			return err
		}
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	_, err = c.out.Write(append(data, '\n'))
	return err
}

func (c *lineConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *lineConn) SessionID() string { return "" }

// SyncWriter serializes writes to one writer, so that writers sharing it
// each write whole lines: the stdio front's responses and its answers to
// malformed lines share its output, and the command's operational log
// and decision log share standard error.
type SyncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewSyncWriter returns a SyncWriter that writes to w.
func NewSyncWriter(w io.Writer) *SyncWriter { return &SyncWriter{w: w} }

func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// readLine reads one line without its newline. A line longer than
// MaxMessageBytes is consumed and reported as tooLong, with only its first
// idPrefixBytes kept as line, from which its id may be read (prefixID).
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > MaxMessageBytes+1 {
				tooLong = true
				if n := idPrefixBytes - len(line); n > 0 {
					line = append(line, chunk[:min(n, len(chunk))]...)
				}
				line = bytes.Clone(line[:min(len(line), idPrefixBytes)])
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

// parseLine decodes a line into the message (or the batch of messages) it
// holds, or returns the error response to send instead.
func parseLine(line []byte, tooLong bool) (msgs []jsonrpc.Message, batch bool, reply []byte) {
	if tooLong {
		return nil, false, errorLine(prefixID(line), jsonrpc.CodeInvalidRequest, fmt.Sprintf("message longer than %d bytes, the stdio front's limit: send large content by reference (a resource, a file), not inline", MaxMessageBytes))
	}
	if !json.Valid(line) {
		return nil, false, errorLine(nil, jsonrpc.CodeParseError, "parse error: the line is not valid JSON (each message must be one line of JSON)")
	}
	if line[0] == '[' {
		var raw []json.RawMessage
		if err := json.Unmarshal(line, &raw); err != nil || len(raw) == 0 {
			return nil, false, errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: an empty batch")
		}
		seen := map[jsonrpc.ID]bool{}
		for _, r := range raw {
			m, err := decodeMessage(r)
			if err != nil {
				return nil, false, errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request in batch: "+err.Error())
			}
			if req, ok := m.(*jsonrpc.Request); ok && req.IsCall() {
				if seen[req.ID] {
					return nil, false, errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: a batch repeats a request id")
				}
				seen[req.ID] = true
			}
			msgs = append(msgs, m)
		}
		return msgs, true, nil
	}
	m, err := decodeMessage(line)
	if err != nil {
		return nil, false, errorLine(requestID(line), jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	return []jsonrpc.Message{m}, false, nil
}

// firstUnbatched is the first protocol version without JSON-RPC batches.
const firstUnbatched = "2025-06-18"

// noteVersion keeps the protocol version an answer to initialize
// negotiated. The SDK writes it after the request was read, so initID is
// set by then.
func (c *lineConn) noteVersion(resp *jsonrpc.Response) {
	if resp.Error != nil || resp.Result == nil || c.version.Load() != nil {
		return
	}
	c.pendingMu.Lock()
	isInit := c.initID.IsValid() && resp.ID == c.initID
	c.pendingMu.Unlock()
	if !isInit {
		return
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(resp.Result, &r) == nil && r.ProtocolVersion != "" {
		c.version.Store(&r.ProtocolVersion)
	}
}

// decodeMessage decodes a JSON-RPC message: a request or notification
// (with a method), or a response (with exactly one of result and error).
func decodeMessage(b []byte) (jsonrpc.Message, error) {
	if k := nonObject(b); k != "" {
		return nil, fmt.Errorf("a JSON-RPC message is a JSON object, not %s", k)
	}
	m, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		// A number the SDK cannot read as an id (1e400) is refused as
		// any other id it would not answer as written.
		if ierr := numericIDError(b); ierr != nil {
			return nil, ierr
		}
		return nil, err
	}
	if req, ok := m.(*jsonrpc.Request); ok && req.Method == "" {
		return nil, errors.New("the method is empty")
	}
	if err := checkIntegerID(m, b); err != nil {
		return nil, err
	}
	if _, ok := m.(*jsonrpc.Response); ok {
		var r struct {
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, err
		}
		if (r.Result == nil) == (r.Error == nil) {
			return nil, errors.New("a message without a method must be a response, with exactly one of result and error")
		}
	}
	return m, nil
}

// numericIDError is integerIDError of message b's id when that is a
// number; nil for any other id, or none.
func numericIDError(b []byte) error {
	return numericLiteralError(rawID(b))
}

// numericLiteralError is integerIDError of the id lit when it is a number;
// nil for any other id, or none.
func numericLiteralError(lit []byte) error {
	if len(lit) > 0 && (lit[0] == '-' || lit[0] >= '0' && lit[0] <= '9') {
		return integerIDError(lit)
	}
	return nil
}

// httpBodyError is the JSON-RPC error response a POST body is refused with
// (in a 400 answer) before the SDK reads it, or nil to pass it on. It makes
// the checks the stdio front makes and the MCP Go SDK's HTTP transport
// (v1.8.0) does not (TestSDKTruncatesFloatIDs pins the first against the
// SDK alone; the others are pinned only by the front's own tests):
//
//   - a numeric id the SDK would not answer as written (1.5 as 1), in a
//     message or in any message of a batch;
//   - a message without a method that is not a response with exactly one
//     of result and error (the SDK accepts it with 202 and drops it);
//   - a batch that is not JSON, is empty, holds a message that is not a
//     JSON-RPC message or repeats a call's id (the SDK answers one of the
//     two calls), or comes in a session that negotiated 2025-06-18 or
//     later (the SDK reads the version only from the request's
//     MCP-Protocol-Version header, and takes its absence for 2025-03-26).
//
// version is the request's MCP-Protocol-Version header; sessionVersion
// returns the version the request's session negotiated, "" when there is
// none, and is called only for a batch. A body that is not JSON, and a
// message with a method, are otherwise left to the SDK, which says what is
// wrong with them. A call is parsed once, as rawID does, and nothing of it
// is copied.
func httpBodyError(body []byte, version string, sessionVersion func() string) []byte {
	if b := bytes.Trim(body, " \t\r\n"); len(b) > 0 && b[0] == '[' {
		return httpBatchError(b, version, sessionVersion)
	}
	var m struct {
		ID     segjson.RawMessage `json:"id"`
		Method segjson.RawMessage `json:"method"`
	}
	_, err := segjson.Parse(body, &m, segjson.DontMatchCaseInsensitiveStructFields|segjson.DontCopyRawMessage)
	switch {
	case err != nil && !json.Valid(body):
		return httpParseError
	case err == nil && m.Method != nil:
		// A request or notification, the common case: only its id is
		// checked here.
		if ierr := numericLiteralError(m.ID); ierr != nil {
			return errorLine(nil, jsonrpc.CodeInvalidRequest, "invalid request: "+ierr.Error())
		}
		return nil
	}
	// JSON that is not an object, or a message without a method (a
	// response, or not a message): rare, so decoded in full, as the stdio
	// front decodes it.
	if _, err := decodeMessage(body); err != nil {
		return errorLine(requestID(body), jsonrpc.CodeInvalidRequest, "invalid request: "+err.Error())
	}
	return nil
}

// httpParseError answers a POST body that is not JSON.
var httpParseError = errorLine(nil, jsonrpc.CodeParseError, "parse error: the request body is not valid JSON")

// httpBatchError is httpBodyError of a batch b: refused as the stdio front
// refuses a batch line, and in a session or request of a version without
// batches.
func httpBatchError(b []byte, version string, sessionVersion func() string) []byte {
	if !json.Valid(b) {
		return httpParseError
	}
	if _, _, reply := parseLine(b, false); reply != nil {
		return reply
	}
	if v := sessionVersion(); v >= firstUnbatched {
		return errorLine(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: JSON-RPC batching is not supported in %s and later (this session: %s); send each message in a request of its own", firstUnbatched, v))
	}
	if version >= firstUnbatched {
		return errorLine(nil, jsonrpc.CodeInvalidRequest, fmt.Sprintf("invalid request: JSON-RPC batching is not supported in %s and later (this request: %s); send each message in a request of its own", firstUnbatched, version))
	}
	return nil
}

// nonObject names the kind of the JSON value b when it is not an object
// ("a string", "null"); it is "" for an object, or what is not JSON.
func nonObject(b []byte) string {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return ""
	}
	switch c := b[0]; {
	case c == '"':
		return "a string"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || c >= '0' && c <= '9':
		return "a number"
	}
	return ""
}

// integerLiteral is a JSON number without fraction or exponent.
var integerLiteral = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

// checkIntegerID refuses a numeric id that is not an integer the answer
// can carry as written. The MCP Go SDK v1.8.0 reads every number as a
// float and keeps its integer part (TestSDKTruncatesFloatIDs fails when it
// no longer does, and this check can go), so 1.5 would be answered as 1 (the id of another
// call, perhaps), 1e30 as -9223372036854775808 and 2^53+1 as 2^53: a
// client could take the answer for another call's, or never see its own.
func checkIntegerID(m jsonrpc.Message, b []byte) error {
	if _, ok := messageID(m).Raw().(int64); !ok {
		return nil
	}
	return integerIDError(rawID(b))
}

// messageID is the id of a request or a response; the zero ID otherwise.
func messageID(m jsonrpc.Message) jsonrpc.ID {
	switch m := m.(type) {
	case *jsonrpc.Request:
		return m.ID
	case *jsonrpc.Response:
		return m.ID
	}
	return jsonrpc.ID{}
}

// integerIDError says why the numeric id lit cannot be answered as
// written, or is nil when it can.
func integerIDError(lit []byte) error {
	if integerLiteral.Match(lit) {
		if n, err := strconv.ParseInt(string(lit), 10, 64); err == nil && n >= -maxExactID && n <= maxExactID {
			return nil
		}
	}
	if len(lit) > 40 {
		lit = append(lit[:40:40], "..."...)
	}
	return fmt.Errorf("the id %s is not an integer from %d to %d; give a string id, or an integer in that range", lit, -maxExactID, maxExactID)
}

// maxExactID is the largest integer id answered as written: the SDK reads
// ids as floats, which hold every integer up to 2^53 exactly (and
// JavaScript clients no larger one).
const maxExactID = 1<<53 - 1

// rawID returns the value of a message's "id" member as written; nil when
// there is none. The name is matched exactly, as the SDK matches it (not
// case-insensitively, as encoding/json would), and of repeated members
// the last counts, as in the SDK. Other members are skipped, not copied:
// this runs on every call with a numeric id.
func rawID(b []byte) json.RawMessage {
	var m struct {
		ID segjson.RawMessage `json:"id"`
	}
	if _, err := segjson.Parse(b, &m, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil
	}
	return json.RawMessage(m.ID)
}

// idText is an id as a message shows it: a string quoted, an integer as
// it is.
func idText(id jsonrpc.ID) string {
	if s, ok := id.Raw().(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(id.Raw())
}

// requestID returns the id of a malformed request when it is a valid id:
// a string, or an integer that checkIntegerID would accept, as written.
func requestID(line []byte) any {
	return answerableID(rawID(line))
}

// idPrefixBytes is how much of a line over MaxMessageBytes is kept to read
// its id from.
const idPrefixBytes = 64 << 10

// prefixID returns the id of the message whose line starts with prefix,
// the rest of it unread, as requestID would: the value of the top-level
// object's last "id" member within prefix (matched exactly) when the
// members before it, and it, are whole within prefix and it is a valid
// id. It is nil otherwise; a later "id" member, which would count
// instead, cannot be seen. The scan is bounded by the prefix.
func prefixID(prefix []byte) any {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	dec.UseNumber() // a number as written, for integerIDError
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var id json.RawMessage
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			break
		}
		if key == "id" {
			// Of repeated members the last counts, as in rawID; one cut
			// by the prefix's end leaves the id unknown.
			if dec.Decode(&id) != nil {
				return nil
			}
			// A value that reaches the prefix's end may go on past it
			// (the number 12 of 1234): it is whole only when a byte
			// follows it.
			if dec.InputOffset() >= int64(len(prefix)) {
				return nil
			}
			continue
		}
		if !skipValue(dec) {
			break
		}
	}
	return answerableID(id)
}

// skipValue reads past the next value of dec, however deep; false when
// the input ends or is not JSON before the value does.
func skipValue(dec *json.Decoder) bool {
	for depth := 0; ; {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return true
		}
	}
}

// answerableID is the id written as id when it is one an answer carries
// as written (see requestID); nil otherwise.
func answerableID(id []byte) any {
	if len(id) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(id, &s) == nil {
		return s
	}
	if integerIDError(id) == nil {
		n, _ := strconv.ParseInt(string(id), 10, 64)
		return n
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
