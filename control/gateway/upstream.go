package gateway

import (
	"context"
	"crypto/tls"
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
// reference to the body once it has been sent (no GetBody: a POST is not
// retried), so an answer that streams for minutes does not hold it.
func (c *upstreamClient) request(ctx context.Context, body []byte, stream bool) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, &sentBody{b: body})
	if err != nil {
		return nil, err
	}
	req.ContentLength = int64(len(body))
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
	return req, nil
}

// sentBody reads a request body once and then lets it go.
type sentBody struct{ b []byte }

func (s *sentBody) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		s.b = nil
		return 0, io.EOF
	}
	n := copy(p, s.b)
	s.b = s.b[n:]
	if len(s.b) == 0 {
		s.b = nil
	}
	return n, nil
}

// WriteTo sends the rest of the body in one write (io.Copy uses it: the
// transport then writes the body with one system call, not one per 32 KB).
func (s *sentBody) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(s.b)
	s.b = s.b[n:]
	if len(s.b) == 0 {
		s.b = nil
	}
	return int64(n), err
}

func (s *sentBody) Close() error {
	s.b = nil
	return nil
}
