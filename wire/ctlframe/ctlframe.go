// Package ctlframe is the framed transport of the attester's control socket
// (docs/spec/attester-api.md section 9, "clawea-control/3"): after an
// HTTP/1.1 Upgrade, requests and answers travel as length-prefixed frames,
// several in flight on one connection, each carrying what the control
// routes read of an HTTP request (method, path, a few header fields, body)
// or write of an answer (status, the signature header fields, body).
//
// The parser is strict: every length is bounded, every byte of a method,
// path and field is checked, field names are lower-case and ascend (so
// none repeats), and what Read accepts Append re-encodes to the same bytes
// (FuzzRead).
package ctlframe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
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

// Frame is a request frame (Method is set) or a response frame (Status is
// set). Stream is the client's stream id: not zero in a request, unique
// among its requests in flight, and the request's in its answer; an answer
// on stream 0 is the attester's last word before it closes the connection.
// Fields are the header fields by lower-case name; they travel in
// ascending order of name.
type Frame struct {
	Stream uint32
	Method string
	Path   string
	Status int
	Fields map[string]string
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

// Read reads one frame from r. On an error, stream is not zero when the
// frame was read whole and its stream id is known (the connection's
// framing is intact and the error answers that stream); otherwise the
// connection cannot go on. io.EOF: r ended cleanly between frames. A
// frame whose length is 0 or over MaxLen is refused before anything after
// its length is read.
func Read(r io.Reader) (f *Frame, stream uint32, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, 0, errTruncated
		}
		return nil, 0, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	switch {
	case n == 0:
		return nil, 0, errEmpty
	case n > MaxLen:
		return nil, 0, errTooLarge
	}
	b, err := readN(r, int(n))
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, 0, errTruncated
		}
		return nil, 0, err
	}
	switch b[0] {
	case typeRequest:
		return parseRequest(b[1:])
	case typeResponse:
		return parseResponse(b[1:])
	}
	return nil, 0, fmt.Errorf("%w 0x%02x", errType, b[0])
}

// firstRead is the most Read allocates for a frame before its bytes
// arrive.
const firstRead = 64 << 10

// readN reads exactly n bytes of r. Its buffer grows (doubling) with the
// bytes that arrived, from at most firstRead, so that a peer that
// announces a large frame and sends little of it holds little memory:
// the announced length alone never allocates more than firstRead.
func readN(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, 0, min(n, firstRead))
	for len(b) < n {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(n-len(b), len(b)))
		}
		k, err := io.ReadFull(r, b[len(b):min(cap(b), n)])
		b = b[:len(b)+k]
		if err != nil {
			return nil, err
		}
	}
	return b, nil
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
	// nameChars are RFC 9110's tchar without the upper-case letters.
	nameChars = charclass.Lower().Or(charclass.Digit(), charclass.Of("!#$%&'*+-.^_`|~"))
)

func parseRequest(p []byte) (*Frame, uint32, error) {
	c := &cursor{b: p}
	q := &Frame{Stream: c.u32("stream id")}
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

func parseResponse(p []byte) (*Frame, uint32, error) {
	c := &cursor{b: p}
	a := &Frame{Stream: c.u32("stream id"), Status: c.u16("status")}
	if c.err == nil {
		c.fail(checkStatus(a.Status))
	}
	a.Fields = c.fields()
	a.Body = c.b
	if c.err != nil {
		return nil, a.Stream, c.err
	}
	return a, a.Stream, nil
}

func checkStatus(status int) error {
	if status < 100 || status > 599 {
		return malformed("status %d: want 100 to 599", status)
	}
	return nil
}

// fields reads a field count and the fields, in ascending order of name.
func (c *cursor) fields() map[string]string {
	n := c.u8("field count")
	if c.err != nil || n == 0 {
		return nil
	}
	if n > maxFields {
		c.fail(malformed("%d header fields: at most %d", n, maxFields))
		return nil
	}
	fs := make(map[string]string, n)
	prev := ""
	for range n {
		name := string(c.take(c.u8("field name length"), "field name"))
		value := string(c.take(c.u16("field value length"), "field value"))
		if c.err != nil {
			return nil
		}
		if err := checkField(name, value); err != nil {
			c.fail(err)
			return nil
		}
		if name <= prev {
			c.fail(malformed("field %s: repeated or out of order (names ascend)", name))
			return nil
		}
		prev = name
		fs[name] = value
	}
	return fs
}

// checkField checks a field's name and value.
func checkField(name, value string) error {
	if name == "" || len(name) > maxFieldName || !nameChars.All(name) {
		return malformed("field name: want 1 to %d lower-case token characters", maxFieldName)
	}
	if len(value) > maxValue || !utf8.ValidString(value) {
		return malformed("field %s: value not UTF-8 or over %d bytes", name, maxValue)
	}
	if hasControl(value) {
		return malformed("field %s: value holds a control character", name)
	}
	return nil
}

// hasControl reports whether v holds a control character (Unicode Cc: C0,
// DEL, C1), checking ASCII bytes without decoding them.
func hasControl(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == 0x7f {
			return true
		} else if c >= utf8.RuneSelf {
			return strings.IndexFunc(v[i:], unicode.IsControl) >= 0
		}
	}
	return false
}

// Append appends f's frame (length prefix included) to b: a request when
// Method is set, else a response. A frame that Read would refuse is not
// encoded.
func (f *Frame) Append(b []byte) ([]byte, error) {
	t, head := byte(typeResponse), 1+4+2
	if f.Method != "" {
		if f.Stream == 0 {
			return nil, malformed("request on stream 0")
		}
		if f.Status != 0 {
			return nil, malformed("a request with a status")
		}
		if err := checkRequestLine(f.Method, f.Path); err != nil {
			return nil, err
		}
		t, head = typeRequest, 1+4+1+len(f.Method)+2+len(f.Path)
	} else if f.Path != "" {
		return nil, malformed("a response with a path")
	} else if err := checkStatus(f.Status); err != nil {
		return nil, err
	}
	names, n, err := sizeFields(f.Fields)
	if err != nil {
		return nil, err
	}
	if n += head + 1 + len(f.Body); n > MaxLen {
		return nil, errTooLarge
	}
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	b = append(b, t)
	b = binary.BigEndian.AppendUint32(b, f.Stream)
	if t == typeRequest {
		b = append(b, byte(len(f.Method)))
		b = append(b, f.Method...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(f.Path)))
		b = append(b, f.Path...)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(f.Status))
	}
	b = append(b, byte(len(names)))
	for _, k := range names {
		b = append(b, byte(len(k)))
		b = append(b, k...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(f.Fields[k])))
		b = append(b, f.Fields[k]...)
	}
	return append(b, f.Body...), nil
}

// sizeFields checks fields and returns their names in ascending order and
// their encoded size.
func sizeFields(fields map[string]string) ([]string, int, error) {
	if len(fields) > maxFields {
		return nil, 0, malformed("%d header fields: at most %d", len(fields), maxFields)
	}
	names := make([]string, 0, len(fields))
	n := 0
	for k, v := range fields {
		if err := checkField(k, v); err != nil {
			return nil, 0, err
		}
		names = append(names, k)
		n += 1 + len(k) + 2 + len(v)
	}
	slices.Sort(names)
	return names, n, nil
}
