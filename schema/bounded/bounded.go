// Package bounded is the one bounded reader of the module (STYLE item 23):
// every file, stream and HTTP body that the attester, the verifier and
// their tools read whole goes through it.
//
// Each function reads at most limit+1 bytes, so that a source over the
// limit is told apart from one exactly at it without reading the rest, and
// refuses an oversized source with a *TooLargeError (errors.Is
// ErrTooLarge) that names what was read and the limit, never its content.
// On any error nothing is returned and the bytes already read are zeroed,
// so a refused secret (a key file) does not linger in a dropped buffer.
//
// A guard test (guard_test.go) fails when code outside this package uses
// io.LimitReader, io.LimitedReader or http.MaxBytesReader.
package bounded

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"strconv"
)

// ErrTooLarge is matched (errors.Is) by every *TooLargeError.
var ErrTooLarge = errors.New("bounded: over the size limit")

// TooLargeError reports a source over its limit.
type TooLargeError struct {
	// What names the source (a path, "request body", ...), never its
	// content.
	What string
	// Limit is the largest accepted size in bytes.
	Limit int64
}

func (e *TooLargeError) Error() string {
	return e.What + " is over " + strconv.FormatInt(e.Limit, 10) + " bytes"
}

// Is reports whether target is ErrTooLarge.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// Read reads r to EOF, at most limit bytes; what names r in errors. Read
// errors are returned as they are.
func Read(r io.Reader, limit int64, what string) ([]byte, error) {
	return read(r, limit, what, 0)
}

// ReadFile reads the file at path, at most limit bytes; errors name the
// path. Open and read errors are returned as they are (an *fs.PathError
// from os.Open; errors.Is(err, fs.ErrNotExist) for a missing file).
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, limit, path, sizeHint(f))
}

// ReadFS reads the file name of fsys, at most limit bytes; errors name the
// file. Open and read errors are returned as they are.
func ReadFS(fsys fs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f, limit, name, sizeHint(f))
}

// ReadBody reads the body of r, at most limit bytes, with the semantics of
// http.MaxBytesReader: a body over the limit makes the server close the
// connection after the response. A Content-Length over the limit is
// refused before anything is read. Errors name "request body"; other read
// errors (a client that hung up, a read deadline) are returned as they are.
// A caller that reuses buffers (a pool) may give one, buf: the body is
// read into it when its capacity holds the Content-Length (what it held
// is overwritten), else into a new buffer; a buffer outgrown while reading
// is cleared, as ever. At most one buffer is given.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64, buf ...[]byte) ([]byte, error) {
	const what = "request body"
	if limit < 0 {
		return nil, negativeLimit(what)
	}
	if r.ContentLength > limit {
		// The connection cannot be reused without reading the body: close
		// it, as http.MaxBytesReader does when it hits the limit.
		w.Header().Set("Connection", "close")
		return nil, &TooLargeError{What: what, Limit: limit}
	}
	if len(buf) > 1 {
		return nil, fmt.Errorf("bounded: %d buffers given for %s", len(buf), what)
	}
	var dst []byte
	if len(buf) == 1 {
		dst = buf[0][:0]
	}
	b, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, dst)
	if err != nil {
		// The whole buffer: http.MaxBytesReader reads one byte past
		// the limit into it, beyond what it returns.
		clear(b[:cap(b)])
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &TooLargeError{What: what, Limit: limit}
		}
		return nil, err
	}
	return b, nil
}

// Discard reads and drops at most limit bytes of r, so that an HTTP client
// connection can be reused after a response whose body is not wanted.
// Errors are ignored: the connection is then simply not reused.
func Discard(r io.Reader, limit int64) {
	_, _ = io.Copy(io.Discard, &io.LimitedReader{R: r, N: max(limit, 0)})
}

func read(r io.Reader, limit int64, what string, hint int64) ([]byte, error) {
	if limit < 0 {
		return nil, negativeLimit(what)
	}
	n := limit
	if n < math.MaxInt64 {
		n++
	}
	b, err := readAll(&io.LimitedReader{R: r, N: n}, min(hint, n), nil)
	if err == nil && int64(len(b)) > limit {
		err = &TooLargeError{What: what, Limit: limit}
	}
	if err != nil {
		clear(b)
		return nil, err
	}
	return b, nil
}

func negativeLimit(what string) error {
	return fmt.Errorf("bounded: negative limit for %s", what)
}

// sizeHint returns the size a regular file reports, or 0.
func sizeHint(f fs.File) int64 {
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		return fi.Size()
	}
	return 0
}

// readAll reads r to EOF into one buffer sized from hint (a file size or a
// Content-Length within the limit) plus room to see EOF, instead of
// io.ReadAll's doubling from 512 bytes; a wrong hint only costs a
// regrowth. It reads into dst when its capacity holds that. It returns
// what it read with the error.
func readAll(r io.Reader, hint int64, dst []byte) ([]byte, error) {
	size := bytes.MinRead
	if hint > 0 && hint <= math.MaxInt-bytes.MinRead {
		size += int(hint)
	}
	b := dst[:0]
	if cap(b) < size {
		b = make([]byte, 0, size)
	}
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				return b, nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			// Grow by append's policy; the old buffer is zeroed first
			// so that no copy of what was read is left behind.
			nb := append(b, 0)[:len(b)]
			clear(b)
			b = nb
		}
	}
}
