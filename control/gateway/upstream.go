package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
)

// upstreamClient sends calls to one configured upstream: no proxy from
// the environment, no redirects, TLS 1.2 or later with the system roots,
// the connect and header timeouts of its configuration.
type upstreamClient struct {
	name   string
	u      Upstream
	url    string
	client *http.Client
	open   atomic.Int64
}

func newUpstreamClient(name string, u Upstream) *upstreamClient {
	d := &net.Dialer{Timeout: u.ConnectTimeout}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   u.ConnectTimeout,
		ResponseHeaderTimeout: u.HeaderTimeout,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     !u.Local,
		MaxIdleConnsPerHost:   u.MaxConcurrent,
		DisableCompression:    true,
	}
	dial := d.DialContext
	if u.UnixSocket != "" {
		sock := u.UnixSocket
		dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		}
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &upstreamConn{Conn: c}, nil
	}
	path := "/chat/completions"
	if u.API == apiAnthropicMessages {
		path = "/v1/messages"
	}
	return &upstreamClient{
		name: name, u: u, url: strings.TrimSuffix(u.BaseURL, "/") + path,
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
}

// request builds the upstream request: the body unchanged, the
// credential added, no header of the harness. The request keeps no
// reference to the body once it has been sent, so an answer that streams
// for minutes does not hold it: a reader of the body drops it at EOF, and
// GetBody (which the HTTP/2 transport uses to send the request again on a
// connection the server closed before reading it) works until the
// returned body's sent is called, when the answer's headers are in and
// nothing is retried. Its letGo ends every read of the body, one under way
// included, so that the caller may reuse the buffer: the transport can
// still be writing the body when the answer has begun (an upstream that
// answered before reading it all); written says it has written it all. The body offers Read only: the HTTP/1
// transport copies it through a length limit into the connection
// (upstreamConn.ReadFrom), and then copies what is left to io.Discard,
// where a WriteTo would allocate a 32 KB buffer for each call.
func (c *upstreamClient) request(ctx context.Context, body []byte, stream bool) (*http.Request, *upstreamBody, error) {
	ub := &upstreamBody{b: body, retry: new(atomic.Pointer[upstreamBody]), wrote: new(atomic.Bool)}
	// The request (its GetBody, its context's trace) holds these, not
	// the body.
	retry, wrote := ub.retry, ub.wrote
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, &bodyReader{ub: ub})
	if err != nil {
		return nil, nil, err
	}
	req.ContentLength = int64(len(body))
	retry.Store(ub)
	req.GetBody = func() (io.ReadCloser, error) {
		b := retry.Load()
		if b == nil {
			return nil, errBodySent
		}
		return io.NopCloser(&bodyReader{ub: b}), nil
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json")
	if stream {
		h.Set("Accept", "text/event-stream")
	}
	switch c.u.API {
	case apiOpenAIChat:
		if c.u.APIKey != "" {
			h.Set("Authorization", "Bearer "+c.u.APIKey)
		}
	case apiAnthropicMessages:
		if c.u.APIKey != "" {
			h.Set("x-api-key", c.u.APIKey)
		}
		h.Set("anthropic-version", c.u.AnthropicVersion)
	}
	return req, ub, nil
}

// upstreamBody is a request body as the transport reads it.
type upstreamBody struct {
	mu sync.Mutex
	b  []byte
	// gone: letGo was called; every read fails.
	gone bool
	// drained: a reader returned the body's last byte: the transport
	// holds all of it (in its buffers or the connection's).
	drained bool
	// wrote: the transport wrote the whole request (WroteRequest).
	wrote *atomic.Bool
	// retry holds the body GetBody reads, until sent (GetBody holds
	// retry, not the body).
	retry *atomic.Pointer[upstreamBody]
}

// sent ends GetBody: the answer began, nothing is sent again.
func (ub *upstreamBody) sent() { ub.retry.Store(nil) }

// written reports whether the transport has the whole body: a reader
// returned its last byte, or the transport wrote the whole request
// (WroteRequest, which its write goroutine may report after Do has
// returned the answer). None of its reads is under way or to come but a
// retry's, which sent ends.
func (ub *upstreamBody) written() bool {
	if ub.wrote.Load() {
		return true
	}
	ub.mu.Lock()
	defer ub.mu.Unlock()
	return ub.drained
}

// letGo ends every read of the body: when it returns, no reader reads
// the buffer, nor will.
func (ub *upstreamBody) letGo() {
	ub.sent()
	ub.mu.Lock()
	ub.b, ub.gone = nil, true
	ub.mu.Unlock()
}

// bodyReader reads an upstreamBody from the start; it lets go of it at EOF.
type bodyReader struct {
	ub  *upstreamBody
	off int
}

func (r *bodyReader) Read(p []byte) (int, error) {
	ub := r.ub
	if ub == nil {
		return 0, io.EOF
	}
	ub.mu.Lock()
	defer ub.mu.Unlock()
	if ub.gone {
		return 0, errBodySent
	}
	n := copy(p, ub.b[r.off:])
	r.off += n
	if r.off == len(ub.b) {
		r.ub, ub.drained = nil, true
		return n, io.EOF
	}
	return n, nil
}

// errBodySent: the request was answered; it is not sent again.
var errBodySent = errors.New("gateway: the request body was let go after the answer began")

// upstreamConn is a connection to an upstream. The HTTP/1 transport
// writes a request body by handing the body, limited to its
// Content-Length, to its connection's ReadFrom once the headers are
// flushed. A TCP or unix connection's own ReadFrom copies it through a new
// 32 KB buffer for each call, one write per 32 KB; this one copies through
// a pooled buffer of copyBuf bytes. (Under TLS the transport writes to its
// TLS connection, which writes records to this one: ReadFrom is not used
// there.)
type upstreamConn struct{ net.Conn }

// copyBuf is the size of the pooled buffers a request body is written
// through: a 100 KB body takes two writes.
const copyBuf = 64 << 10

var copyBufs = sync.Pool{New: func() any { return new([copyBuf]byte) }}

func (c *upstreamConn) ReadFrom(r io.Reader) (int64, error) {
	bp := copyBufs.Get().(*[copyBuf]byte)
	defer copyBufs.Put(bp)
	// The writer offers Write only, so that CopyBuffer does not hand r
	// back to the connection's own ReadFrom.
	return io.CopyBuffer(struct{ io.Writer }{c.Conn}, r, bp[:])
}
