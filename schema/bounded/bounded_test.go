package bounded

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// secret is content that must never appear in an error.
const secret = "s3cr3t-content"

func content(n int) []byte {
	return bytes.Repeat([]byte(secret), n/len(secret)+1)[:n]
}

// checkTooLarge asserts that err is a *TooLargeError for what and limit
// whose message quotes nothing of the content.
func checkTooLarge(t *testing.T, b []byte, err error, what string, limit int64) {
	t.Helper()
	if b != nil {
		t.Errorf("data returned with the error: %d bytes", len(b))
	}
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	tl, ok := errors.AsType[*TooLargeError](err)
	if !ok || tl.What != what || tl.Limit != limit {
		t.Fatalf("err = %#v, want What %q Limit %d", err, what, limit)
	}
	if want := what + " is over " + strconv.FormatInt(limit, 10) + " bytes"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if strings.Contains(err.Error(), secret[:4]) {
		t.Errorf("message quotes the content: %q", err)
	}
}

func TestRead(t *testing.T) {
	for _, limit := range []int64{0, 1, 511, 512, 513, 4096, 100_000} {
		at := content(int(limit))
		b, err := Read(bytes.NewReader(at), limit, "thing")
		if err != nil || !bytes.Equal(b, at) {
			t.Fatalf("limit %d, exactly at the limit: %d bytes, %v", limit, len(b), err)
		}
		if b == nil {
			t.Fatalf("limit %d: nil for an accepted read", limit)
		}
		b, err = Read(bytes.NewReader(content(int(limit)+1)), limit, "thing")
		checkTooLarge(t, b, err, "thing", limit)
	}
	b, err := Read(strings.NewReader("short"), 100, "thing")
	if err != nil || string(b) != "short" {
		t.Fatalf("under the limit: %q, %v", b, err)
	}
	// The largest limit does not overflow.
	b, err = Read(strings.NewReader("x"), math.MaxInt64, "thing")
	if err != nil || string(b) != "x" {
		t.Fatalf("MaxInt64 limit: %q, %v", b, err)
	}
	if b, err := Read(strings.NewReader(""), -1, "thing"); err == nil || errors.Is(err, ErrTooLarge) || b != nil {
		t.Fatalf("negative limit: %q, %v", b, err)
	}
}

// countingReader counts the bytes it hands out.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// TestReadStopsAtLimitPlusOne: an endless source is read only to limit+1.
func TestReadStopsAtLimitPlusOne(t *testing.T) {
	const limit = 10_000
	cr := &countingReader{r: endless{}}
	b, err := Read(cr, limit, "stream")
	checkTooLarge(t, b, err, "stream", limit)
	if cr.n != limit+1 {
		t.Fatalf("read %d bytes, want %d", cr.n, limit+1)
	}
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// failing hands out secret bytes until it has given after bytes, then
// fails; it remembers every buffer it wrote into.
type failing struct {
	after int
	err   error
	seen  [][]byte
}

func (f *failing) Read(p []byte) (int, error) {
	if f.after == 0 {
		return 0, f.err
	}
	n := min(len(p), f.after)
	copy(p, content(n))
	f.seen = append(f.seen, p[:n])
	f.after -= n
	return n, nil
}

func TestReadError(t *testing.T) {
	boom := errors.New("boom")
	// Errors before, within and after a buffer growth.
	for _, after := range []int{0, 100, 512, 5000} {
		f := &failing{after: after, err: boom}
		b, err := Read(f, 1<<20, "thing")
		if !errors.Is(err, boom) || errors.Is(err, ErrTooLarge) || b != nil {
			t.Fatalf("after %d: %q, %v", after, b, err)
		}
		for _, p := range f.seen {
			if bytes.ContainsFunc(p, func(r rune) bool { return r != 0 }) {
				t.Fatalf("after %d: bytes read before the error are not zeroed", after)
			}
		}
	}
	// Zeroed on refusal too.
	f := &failing{after: 5000, err: io.EOF}
	if _, err := Read(f, 4999, "thing"); !errors.Is(err, ErrTooLarge) {
		t.Fatal(err)
	}
	for _, p := range f.seen {
		if bytes.ContainsFunc(p, func(r rune) bool { return r != 0 }) {
			t.Fatal("bytes of a refused source are not zeroed")
		}
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	const limit = 1000
	at := filepath.Join(dir, "at")
	over := filepath.Join(dir, "over")
	if err := os.WriteFile(at, content(limit), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, content(limit+1), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := ReadFile(at, limit)
	if err != nil || !bytes.Equal(b, content(limit)) {
		t.Fatalf("exactly at the limit: %d bytes, %v", len(b), err)
	}
	b, err = ReadFile(over, limit)
	checkTooLarge(t, b, err, over, limit)
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(empty, limit); err != nil || len(b) != 0 {
		t.Fatalf("empty file: %q, %v", b, err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), limit); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	// A directory opens but does not read.
	if b, err := ReadFile(dir, limit); err == nil || errors.Is(err, ErrTooLarge) || b != nil {
		t.Fatalf("directory: %q, %v", b, err)
	}
}

func TestReadFS(t *testing.T) {
	const limit = 64
	fsys := fstest.MapFS{
		"d/at":   {Data: content(limit)},
		"d/over": {Data: content(limit + 1)},
	}
	b, err := ReadFS(fsys, "d/at", limit)
	if err != nil || !bytes.Equal(b, content(limit)) {
		t.Fatalf("exactly at the limit: %d bytes, %v", len(b), err)
	}
	b, err = ReadFS(fsys, "d/over", limit)
	checkTooLarge(t, b, err, "d/over", limit)
	if _, err := ReadFS(fsys, "d/missing", limit); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestReadBody(t *testing.T) {
	const limit = 100
	type result struct {
		b    []byte
		err  error
		conn string
	}
	do := func(body io.Reader, contentLength int64) result {
		r := httptest.NewRequest(http.MethodPost, "/", body)
		r.ContentLength = contentLength
		w := httptest.NewRecorder()
		b, err := ReadBody(w, r, limit)
		return result{b, err, w.Header().Get("Connection")}
	}
	for _, cl := range []int64{limit, -1} {
		res := do(bytes.NewReader(content(limit)), cl)
		if res.err != nil || !bytes.Equal(res.b, content(limit)) || res.conn != "" {
			t.Fatalf("Content-Length %d, exactly at the limit: %d bytes, %v, Connection %q", cl, len(res.b), res.err, res.conn)
		}
	}
	// Exactly the body whatever a Content-Length within the limit claims
	// (it only sizes the buffer).
	for _, cl := range []int64{-1, 0, 1, 59, 60, 61, limit} {
		res := do(bytes.NewReader(content(60)), cl)
		if res.err != nil || !bytes.Equal(res.b, content(60)) {
			t.Fatalf("Content-Length %d: %d bytes, %v", cl, len(res.b), res.err)
		}
	}
	// Over the limit with a true, an absent and a lying Content-Length.
	for _, cl := range []int64{limit + 1, -1, 10} {
		res := do(bytes.NewReader(content(limit+1)), cl)
		checkTooLarge(t, res.b, res.err, "request body", limit)
		// Only a refusal before reading sets the header here: the
		// recorder is not the server, which http.MaxBytesReader tells
		// to close (TestReadBodyServer).
		if cl > limit && res.conn != "close" {
			t.Errorf("Content-Length %d: Connection %q, want close", cl, res.conn)
		}
	}
	// An announced oversized body is refused without reading it.
	for _, cl := range []int64{limit + 1, 1 << 40} {
		cr := &countingReader{r: endless{}}
		res := do(cr, cl)
		checkTooLarge(t, res.b, res.err, "request body", limit)
		if cr.n != 0 {
			t.Errorf("Content-Length %d: read %d bytes of an announced oversized body", cl, cr.n)
		}
	}
	// An unannounced endless body is read only to limit+1.
	cr := &countingReader{r: endless{}}
	res := do(cr, -1)
	checkTooLarge(t, res.b, res.err, "request body", limit)
	if cr.n > limit+1 {
		t.Errorf("read %d bytes of an endless body", cr.n)
	}
	boom := errors.New("boom")
	res = do(&failing{after: 10, err: boom}, -1)
	if !errors.Is(res.err, boom) || errors.Is(res.err, ErrTooLarge) || res.b != nil {
		t.Fatalf("failing body: %q, %v", res.b, res.err)
	}
}

// TestReadBodyBuffer: a body is read into the buffer given when its
// capacity holds the Content-Length, over what the buffer held; a buffer
// too small is not used; a body over the limit is refused as without a
// buffer, the bytes read cleared; two buffers are refused.
func TestReadBodyBuffer(t *testing.T) {
	const limit = 100
	do := func(body []byte, buf ...[]byte) ([]byte, error) {
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		if len(body) > limit {
			r.ContentLength = -1 // read, and found over the limit
		}
		return ReadBody(httptest.NewRecorder(), r, limit, buf...)
	}
	buf := bytes.Repeat([]byte("z"), 4096)
	b, err := do(content(60), buf[:10])
	if err != nil || !bytes.Equal(b, content(60)) || &b[0] != &buf[0] {
		t.Fatalf("%q, %v: not read into the buffer given", b, err)
	}
	small := make([]byte, 0, 60)
	b, err = do(content(60), small)
	if err != nil || !bytes.Equal(b, content(60)) || &b[:1][0] == &small[:1][0] {
		t.Fatalf("%q, %v: read into a buffer too small for the body and EOF", b, err)
	}
	clear(buf)
	b, err = do(content(limit+1), buf[:0])
	checkTooLarge(t, b, err, "request body", limit)
	if bytes.ContainsFunc(buf, func(r rune) bool { return r != 0 }) {
		t.Error("the bytes read of a body over the limit were left in the buffer")
	}
	if _, err := do(content(1), buf, buf); err == nil {
		t.Error("two buffers accepted")
	}
}

// TestReadBodyServer runs ReadBody behind a real server: an oversized body
// is answered and the connection is not reused.
func TestReadBodyServer(t *testing.T) {
	const limit = 100
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := ReadBody(w, r, limit); errors.Is(err, ErrTooLarge) {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			return
		} else if err != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		n    int
		code int
	}{{limit, http.StatusNoContent}, {limit + 1, http.StatusRequestEntityTooLarge}, {1 << 20, http.StatusRequestEntityTooLarge}} {
		resp, err := srv.Client().Post(srv.URL, "application/octet-stream", bytes.NewReader(content(tc.n)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%d bytes: status %d, want %d", tc.n, resp.StatusCode, tc.code)
		}
		if tc.code != http.StatusNoContent && !resp.Close {
			t.Errorf("%d bytes: connection kept open", tc.n)
		}
	}
}

func TestDiscard(t *testing.T) {
	cr := &countingReader{r: endless{}}
	Discard(cr, 4096)
	if cr.n != 4096 {
		t.Fatalf("discarded %d bytes, want 4096", cr.n)
	}
	cr = &countingReader{r: strings.NewReader("short")}
	Discard(cr, 4096)
	if cr.n != 5 {
		t.Fatalf("discarded %d bytes, want 5", cr.n)
	}
	Discard(&failing{err: errors.New("boom")}, 10)
}
