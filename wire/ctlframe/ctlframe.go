// Package ctlframe is the framed transport of the attester's control socket
// (docs/spec/attester-api.md section 9, "clawea-control/3"): after an
// HTTP/1.1 Upgrade, requests and answers travel as length-prefixed frames,
// several in flight on one connection, each carrying what the control
// routes read of an HTTP request (method, path, a few header fields, body)
// or write of an answer (status, the signature header fields, body).
//
// The parsers are strict: every length is bounded, every byte of a method,
// path and field is checked, duplicate field names are refused, and what a
// parser accepts re-encodes to the same bytes (FuzzRoundTrip).
package ctlframe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/clawea/attester/schema/charclass"
)

// Token is the HTTP Upgrade token that asks for this transport on the
// control socket (GET /v1/frames).
const Token = "clawea-control/3"

// MaxLen bounds a frame's length field (its type byte and payload): the
// largest request body a framed route accepts (8 MiB, the attestation's
// proof bundle) plus 64 KiB for the frame's own fields.
const MaxLen = 8<<20 + 64<<10

// Frame types.
const (
	typeRequest  = 0x01
	typeResponse = 0x02
)

// Field limits.
const (
	maxMethod    = 16
	maxPath      = 2048
	maxFields    = 8
	maxFieldName = 64
	maxValue     = 4096
)

// Field is one header field of a frame.
type Field struct {
	Name, Value string
}

// Request is a request frame: the client's stream id (not zero, unique
// among its requests in flight), the HTTP method and request-target, the
// header fields and the body.
type Request struct {
	Stream uint32
	Method string
	Path   string
	Fields []Field
	Body   []byte
}

// Response is a response frame. Stream 0 is the connection: the attester's
// last frame before it closes the connection, with a JSON error body.
type Response struct {
	Stream uint32
	Status int
	Fields []Field
	Body   []byte
}

var (
	errEmpty     = errors.New("ctlframe: frame length 0")
	errTooLarge  = fmt.Errorf("ctlframe: frame length over %d bytes", MaxLen)
	errTruncated = errors.New("ctlframe: truncated frame")
	errType      = errors.New("ctlframe: unknown frame type")
	errMalformed = errors.New("ctlframe: malformed frame")
)

// malformed is errMalformed naming what is wrong (never quoting a value).
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errMalformed}, args...)...)
}

// readFrame reads one frame from r: its type and payload (a new slice).
// io.EOF means r ended cleanly between frames; a frame whose length is 0
// or over MaxLen is refused before its payload is read.
func readFrame(r io.Reader) (byte, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, errTruncated
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	switch {
	case n == 0:
		return 0, nil, errEmpty
	case n > MaxLen:
		return 0, nil, errTooLarge
	}
	// The length is bounded above: the payload is read whole, at most
	// MaxLen bytes.
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, errTruncated
		}
		return 0, nil, err
	}
	return b[0], b[1:], nil
}

// ReadRequest reads one request frame from r. On an error, stream is not
// zero when the frame was read whole and its stream id is known (the
// connection's framing is intact and the error answers that stream);
// otherwise the connection cannot go on. io.EOF: r ended between frames.
func ReadRequest(r io.Reader) (req *Request, stream uint32, err error) {
	t, p, err := readFrame(r)
	if err != nil {
		return nil, 0, err
	}
	if t != typeRequest {
		return nil, 0, fmt.Errorf("%w 0x%02x (want a request, 0x01)", errType, t)
	}
	return parseRequest(p)
}

// ReadResponse reads one response frame from r.
func ReadResponse(r io.Reader) (*Response, error) {
	t, p, err := readFrame(r)
	if err != nil {
		return nil, err
	}
	if t != typeResponse {
		return nil, fmt.Errorf("%w 0x%02x (want a response, 0x02)", errType, t)
	}
	return parseResponse(p)
}

// cursor reads a payload's fields in order.
type cursor struct {
	b   []byte
	err error
}

func (c *cursor) take(n int, what string) []byte {
	if c.err != nil {
		return nil
	}
	if len(c.b) < n {
		c.err = malformed("%s: truncated", what)
		return nil
	}
	v := c.b[:n]
	c.b = c.b[n:]
	return v
}

func (c *cursor) u8(what string) int {
	if v := c.take(1, what); v != nil {
		return int(v[0])
	}
	return 0
}

func (c *cursor) u16(what string) int {
	if v := c.take(2, what); v != nil {
		return int(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (c *cursor) u32(what string) uint32 {
	if v := c.take(4, what); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

// fail records err unless an error is already recorded.
func (c *cursor) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

var (
	methodChars = charclass.Upper()
	// pathChars are the visible ASCII characters: no space, no control
	// character, nothing beyond ASCII.
	pathChars = charclass.Range('!', '~')
	// tokenChars are RFC 9110's tchar.
	tokenChars = charclass.Alnum().Or(charclass.Of("!#$%&'*+-.^_`|~"))
)

func parseRequest(p []byte) (*Request, uint32, error) {
	c := &cursor{b: p}
	q := &Request{Stream: c.u32("stream id")}
	if c.err != nil {
		return nil, 0, c.err
	}
	if q.Stream == 0 {
		return nil, 0, malformed("request on stream 0")
	}
	q.Method = string(c.take(c.u8("method length"), "method"))
	q.Path = string(c.take(c.u16("path length"), "path"))
	if c.err == nil {
		c.fail(checkRequestLine(q.Method, q.Path))
	}
	q.Fields = c.fields()
	q.Body = c.b
	if c.err != nil {
		return nil, q.Stream, c.err
	}
	return q, q.Stream, nil
}

// checkRequestLine checks a request frame's method and path.
func checkRequestLine(method, path string) error {
	switch {
	case method == "" || len(method) > maxMethod || !methodChars.All(method):
		return malformed("method: want 1 to %d upper-case ASCII letters", maxMethod)
	case path == "" || len(path) > maxPath || path[0] != '/' || !pathChars.All(path):
		return malformed("path: want 1 to %d bytes of visible ASCII starting with '/'", maxPath)
	}
	return nil
}

func parseResponse(p []byte) (*Response, error) {
	c := &cursor{b: p}
	a := &Response{Stream: c.u32("stream id"), Status: c.u16("status")}
	if c.err == nil && (a.Status < 100 || a.Status > 599) {
		c.fail(malformed("status %d: want 100 to 599", a.Status))
	}
	a.Fields = c.fields()
	a.Body = c.b
	if c.err != nil {
		return nil, c.err
	}
	return a, nil
}

// fields reads a field count and the fields.
func (c *cursor) fields() []Field {
	n := c.u8("field count")
	if c.err != nil {
		return nil
	}
	if n > maxFields {
		c.fail(malformed("%d header fields: at most %d", n, maxFields))
		return nil
	}
	var fs []Field
	if n > 0 {
		fs = make([]Field, 0, n)
	}
	for range n {
		f := Field{Name: string(c.take(c.u8("field name length"), "field name"))}
		f.Value = string(c.take(c.u16("field value length"), "field value"))
		if c.err != nil {
			return nil
		}
		if err := checkField(f, fs); err != nil {
			c.fail(err)
			return nil
		}
		fs = append(fs, f)
	}
	return fs
}

// checkField checks f's name and value, and that no field of before has
// its name (header field names are case-insensitive).
func checkField(f Field, before []Field) error {
	if f.Name == "" || len(f.Name) > maxFieldName || !tokenChars.All(f.Name) {
		return malformed("field name: want 1 to %d token characters", maxFieldName)
	}
	if len(f.Value) > maxValue || !utf8.ValidString(f.Value) {
		return malformed("field %s: value not UTF-8 or over %d bytes", f.Name, maxValue)
	}
	if strings.IndexFunc(f.Value, unicode.IsControl) >= 0 {
		return malformed("field %s: value holds a control character", f.Name)
	}
	for _, g := range before {
		if strings.EqualFold(g.Name, f.Name) {
			return malformed("field %s: repeated", f.Name)
		}
	}
	return nil
}

// Append appends q's frame (length prefix included) to b. A request that
// ReadRequest would refuse is not encoded.
func (q *Request) Append(b []byte) ([]byte, error) {
	if q.Stream == 0 {
		return nil, malformed("request on stream 0")
	}
	if err := checkRequestLine(q.Method, q.Path); err != nil {
		return nil, err
	}
	n := 1 + 4 + 1 + len(q.Method) + 2 + len(q.Path)
	b, err := begin(b, n, q.Fields, q.Body, typeRequest)
	if err != nil {
		return nil, err
	}
	b = binary.BigEndian.AppendUint32(b, q.Stream)
	b = append(b, byte(len(q.Method)))
	b = append(b, q.Method...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(q.Path)))
	b = append(b, q.Path...)
	return finish(b, q.Fields, q.Body), nil
}

// Append appends a's frame (length prefix included) to b. A response that
// ReadResponse would refuse is not encoded.
func (a *Response) Append(b []byte) ([]byte, error) {
	if a.Status < 100 || a.Status > 599 {
		return nil, malformed("status %d: want 100 to 599", a.Status)
	}
	b, err := begin(b, 1+4+2, a.Fields, a.Body, typeResponse)
	if err != nil {
		return nil, err
	}
	b = binary.BigEndian.AppendUint32(b, a.Stream)
	b = binary.BigEndian.AppendUint16(b, uint16(a.Status))
	return finish(b, a.Fields, a.Body), nil
}

// begin checks the fields, computes the frame's length (head bytes of
// fixed fields, then the fields and the body) and appends the length and
// the type.
func begin(b []byte, head int, fs []Field, body []byte, t byte) ([]byte, error) {
	if len(fs) > maxFields {
		return nil, malformed("%d header fields: at most %d", len(fs), maxFields)
	}
	n := head + 1 + len(body)
	for i, f := range fs {
		if err := checkField(f, fs[:i]); err != nil {
			return nil, err
		}
		n += 1 + len(f.Name) + 2 + len(f.Value)
	}
	if n > MaxLen {
		return nil, errTooLarge
	}
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	return append(b, t), nil
}

// finish appends the fields and the body.
func finish(b []byte, fs []Field, body []byte) []byte {
	b = append(b, byte(len(fs)))
	for _, f := range fs {
		b = append(b, byte(len(f.Name)))
		b = append(b, f.Name...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(f.Value)))
		b = append(b, f.Value...)
	}
	return append(b, body...)
}
