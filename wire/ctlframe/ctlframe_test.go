package ctlframe

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// vecRequest is the request vector of attester-api section 9.2.
var vecRequest = &Frame{
	Stream: 7, Method: "POST", Path: "/v1/runs/run_abc/tool-calls",
	Fields: map[string]string{"content-type": "application/json", "authorization": "Bearer x"},
	Body:   []byte(`{"a":1}`),
}

const vecRequestHex = "00000066" + "01" + "00000007" + "04" + "504f5354" + "001b" +
	"2f76312f72756e732f72756e5f6162632f746f6f6c2d63616c6c73" + "02" +
	"0d" + "617574686f72697a6174696f6e" + "0008" + "4265617265722078" +
	"0c" + "636f6e74656e742d74797065" + "0010" + "6170706c69636174696f6e2f6a736f6e" +
	"7b2261223a317d"

// vecResponse is the response vector of section 9.2.
var vecResponse = &Frame{Stream: 7, Status: 200, Fields: map[string]string{"content-type": "application/json"}, Body: []byte("{}\n")}

const vecResponseHex = "0000002a" + "02" + "00000007" + "00c8" + "01" +
	"0c" + "636f6e74656e742d74797065" + "0010" + "6170706c69636174696f6e2f6a736f6e" + "7b7d0a"

func TestVectors(t *testing.T) {
	b, err := vecRequest.Append(nil)
	if err != nil || hex.EncodeToString(b) != vecRequestHex {
		t.Fatalf("request: %x %v\nwant %s", b, err, vecRequestHex)
	}
	q, stream, err := Read(bytes.NewReader(b))
	if err != nil || stream != 7 || q.Method != "POST" || q.Path != vecRequest.Path || len(q.Fields) != 2 || string(q.Body) != `{"a":1}` {
		t.Fatalf("read request: %+v %d %v", q, stream, err)
	}
	b, err = vecResponse.Append(nil)
	if err != nil || hex.EncodeToString(b) != vecResponseHex {
		t.Fatalf("response: %x %v\nwant %s", b, err, vecResponseHex)
	}
	a, stream, err := Read(bytes.NewReader(b))
	if err != nil || stream != 7 || a.Status != 200 || a.Method != "" || a.Fields["content-type"] != "application/json" || string(a.Body) != "{}\n" {
		t.Fatalf("read response: %+v %v", a, err)
	}
}

// frame builds a frame of type t around payload.
func frame(t byte, payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(payload)+1))
	return append(append(b, t), payload...)
}

// reqPayload builds a request payload by hand, so that the negative
// vectors can hold what Append refuses to write.
func reqPayload(stream uint32, method, path string, fields [][2]string, body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, stream)
	b = append(b, byte(len(method)))
	b = append(b, method...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(path)))
	b = append(b, path...)
	b = append(b, byte(len(fields)))
	for _, f := range fields {
		b = append(b, byte(len(f[0])))
		b = append(b, f[0]...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(f[1])))
		b = append(b, f[1]...)
	}
	return append(b, body...)
}

func TestReadRefuses(t *testing.T) {
	ok := reqPayload(1, "GET", "/v1/gate/policy", nil, "")
	long := binary.BigEndian.AppendUint32(nil, MaxLen+1)
	for _, tc := range []struct {
		name   string
		in     []byte
		want   error
		stream uint32 // the stream the error answers; 0: the connection ends
	}{
		{"zero length", []byte{0, 0, 0, 0}, errEmpty, 0},
		{"over the bound", append(long, 1), errTooLarge, 0},
		{"truncated prefix", []byte{0, 0}, errTruncated, 0},
		{"truncated payload", frame(typeRequest, ok)[:10], errTruncated, 0},
		{"a request's payload as a response", frame(typeResponse, ok), errMalformed, 1},
		{"unknown type", frame(0x7f, ok), errType, 0},
		{"stream 0", frame(typeRequest, reqPayload(0, "GET", "/x", nil, "")), errMalformed, 0},
		{"short stream id", frame(typeRequest, []byte{0, 1}), errMalformed, 0},
		{"empty method", frame(typeRequest, reqPayload(3, "", "/x", nil, "")), errMalformed, 3},
		{"lower-case method", frame(typeRequest, reqPayload(3, "get", "/x", nil, "")), errMalformed, 3},
		{"long method", frame(typeRequest, reqPayload(3, strings.Repeat("A", 17), "/x", nil, "")), errMalformed, 3},
		{"relative path", frame(typeRequest, reqPayload(3, "GET", "x", nil, "")), errMalformed, 3},
		{"space in path", frame(typeRequest, reqPayload(3, "GET", "/a b", nil, "")), errMalformed, 3},
		{"control in path", frame(typeRequest, reqPayload(3, "GET", "/a\nb", nil, "")), errMalformed, 3},
		{"non-ASCII path", frame(typeRequest, reqPayload(3, "GET", "/é", nil, "")), errMalformed, 3},
		{"long path", frame(typeRequest, reqPayload(3, "GET", "/"+strings.Repeat("a", maxPath), nil, "")), errMalformed, 3},
		{"path past the payload", frame(typeRequest, reqPayload(3, "GET", "/x", nil, "")[:10]), errMalformed, 3},
		{"bad field name", frame(typeRequest, reqPayload(3, "GET", "/x", [][2]string{{"bad name", "v"}}, "")), errMalformed, 3},
		{"upper-case field name", frame(typeRequest, reqPayload(3, "GET", "/x", [][2]string{{"Authorization", "v"}}, "")), errMalformed, 3},
		{"fields out of order", frame(typeRequest, reqPayload(3, "GET", "/x", [][2]string{{"content-type", "a"}, {"authorization", "b"}}, "")), errMalformed, 3},
		{"empty field name", frame(typeRequest, reqPayload(3, "GET", "/x", [][2]string{{"", "v"}}, "")), errMalformed, 3},
		{"control in value", frame(typeRequest, reqPayload(3, "GET", "/x", [][2]string{{"a", "v\r\nX: y"}}, "")), errMalformed, 3},
		{"C1 control in value", frame(typeRequest, reqPayload(3, "GET", "/x", [][2]string{{"a", "v\u0085"}}, "")), errMalformed, 3},
		{"bad UTF-8 in value", frame(typeRequest, reqPayload(3, "GET", "/x", [][2]string{{"a", "v\xff"}}, "")), errMalformed, 3},
		{"repeated field", frame(typeRequest, reqPayload(3, "GET", "/x", [][2]string{{"authorization", "a"}, {"authorization", "b"}}, "")), errMalformed, 3},
		{"long value", frame(typeRequest, reqPayload(3, "GET", "/x", [][2]string{{"a", strings.Repeat("v", maxValue+1)}}, "")), errMalformed, 3},
		{"too many fields", frame(typeRequest, reqPayload(3, "GET", "/x", [][2]string{{"a", ""}, {"b", ""}, {"c", ""}, {"d", ""}, {"e", ""}, {"f", ""}, {"g", ""}, {"h", ""}, {"i", ""}}, "")), errMalformed, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, stream, err := Read(bytes.NewReader(tc.in))
			if !errors.Is(err, tc.want) || q != nil || stream != tc.stream {
				t.Fatalf("got %+v stream %d %v, want %v on stream %d", q, stream, err, tc.want, tc.stream)
			}
		})
	}
	if _, _, err := Read(bytes.NewReader(nil)); err != io.EOF {
		t.Fatalf("empty input: %v, want io.EOF", err)
	}
}

// TestOversizedNotRead proves that a frame over the bound is refused from
// its length alone: nothing after the length prefix is read.
func TestOversizedNotRead(t *testing.T) {
	r := &countingReader{r: bytes.NewReader(append(binary.BigEndian.AppendUint32(nil, 0xffffffff), make([]byte, 1<<16)...))}
	if _, _, err := Read(r); !errors.Is(err, errTooLarge) || r.n != 4 {
		t.Fatalf("%v after reading %d bytes", err, r.n)
	}
}

// TestAnnouncedLengthNotAllocated: a frame that announces MaxLen bytes
// and sends a few holds memory for what arrived, not for what it
// announced; a whole large frame still reads.
func TestAnnouncedLengthNotAllocated(t *testing.T) {
	short := append(binary.BigEndian.AppendUint32(nil, MaxLen), typeRequest, 0, 0, 0, 1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const runs = 16
	for range runs {
		if _, _, err := Read(bytes.NewReader(short)); !errors.Is(err, errTruncated) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if allocs := (after.TotalAlloc - before.TotalAlloc) / runs; allocs > MaxLen/16 {
		t.Fatalf("a frame announcing %d bytes and sending 5 allocated %d bytes", MaxLen, allocs)
	}
	big := &Frame{Stream: 7, Method: "POST", Path: "/v1/x", Body: bytes.Repeat([]byte("a"), MaxLen-1024)}
	raw, err := big.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := Read(bytes.NewReader(raw))
	if err != nil || !bytes.Equal(got.Body, big.Body) {
		t.Fatalf("a frame of %d bytes: %v", len(raw), err)
	}
}

func TestAppendRefuses(t *testing.T) {
	for _, f := range []*Frame{
		{Stream: 1, Status: 99},
		{Stream: 1, Status: 600},
		{Stream: 1},
		{Stream: 1, Status: 200, Path: "/"},
		{Stream: 1, Method: "GET", Path: "/", Status: 200},
		{Stream: 0, Method: "GET", Path: "/"},
		{Stream: 1, Status: 200, Fields: map[string]string{"x": "a\x00"}},
		{Stream: 1, Status: 200, Fields: map[string]string{"X": "a"}},
		{Stream: 1, Status: 200, Body: make([]byte, MaxLen)},
	} {
		if b, err := f.Append(nil); err == nil {
			t.Errorf("%+v encoded: %x", f.Fields, b[:16])
		}
	}
	bad := binary.BigEndian.AppendUint32(nil, 1)
	bad = append(bad, 0, 50, 0)
	if _, stream, err := Read(bytes.NewReader(frame(typeResponse, bad))); !errors.Is(err, errMalformed) || stream != 1 {
		t.Fatalf("status 50: %v", err)
	}
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// FuzzRead: Read never panics, reads nothing past the frame its length
// announces (nor past the length prefix when it refuses the length), and
// what it accepts Append re-encodes to exactly the bytes it read.
func FuzzRead(f *testing.F) {
	for _, v := range []*Frame{vecRequest, vecResponse} {
		b, _ := v.Append(nil)
		f.Add(b)
	}
	f.Add(frame(typeRequest, reqPayload(1, "GET", "/v1/gate/policy", nil, "")))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &countingReader{r: bytes.NewReader(data)}
		fr, stream, err := Read(r)
		if len(data) >= 4 {
			if n := binary.BigEndian.Uint32(data); (n == 0 || n > MaxLen) && r.n > 4 {
				t.Fatalf("read %d bytes of a frame whose length %d is refused", r.n, n)
			} else if r.n > 4+int(n) {
				t.Fatalf("read %d bytes past a frame of %d", r.n, n)
			}
		}
		if err != nil {
			if fr != nil {
				t.Fatal("a frame returned with an error")
			}
			return
		}
		if stream != fr.Stream || (fr.Method != "" && stream == 0) {
			t.Fatalf("stream %d for frame stream %d", stream, fr.Stream)
		}
		out, err := fr.Append(nil)
		if err != nil {
			t.Fatalf("accepted but not encodable: %v", err)
		}
		if !bytes.Equal(out, data[:r.n]) {
			t.Fatalf("re-encoded %x, read %x", out, data[:r.n])
		}
	})
}
