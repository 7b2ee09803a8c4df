package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
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
	if u.UnixSocket != "" {
		sock := u.UnixSocket
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", sock)
		}
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
// for minutes does not hold it: the body is read through io.MultiReader,
// which drops its reader at EOF, and GetBody (which the HTTP/2 transport
// uses to send the request again on a connection the server closed before
// reading it) works until sent is called, when the answer's headers are in
// and nothing is retried. The body offers Read only: the HTTP/1 transport
// copies it through a length limit, and then copies what is left to
// io.Discard, where MultiReader's WriteTo would allocate a 32 KB buffer for
// each call.
func (c *upstreamClient) request(ctx context.Context, body []byte, stream bool) (req *http.Request, sent func(), err error) {
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, c.url, struct{ io.Reader }{io.MultiReader(bytes.NewReader(body))})
	if err != nil {
		return nil, nil, err
	}
	req.ContentLength = int64(len(body))
	var held atomic.Pointer[[]byte]
	held.Store(&body)
	req.GetBody = func() (io.ReadCloser, error) {
		b := held.Load()
		if b == nil {
			return nil, errBodySent
		}
		return io.NopCloser(io.MultiReader(bytes.NewReader(*b))), nil
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
	return req, func() { held.Store(nil) }, nil
}

// errBodySent: the request was answered; it is not sent again.
var errBodySent = errors.New("gateway: the request body was let go after the answer began")
