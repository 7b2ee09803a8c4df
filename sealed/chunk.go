package sealed

import (
	"errors"
	"fmt"
	"io"
)

// forEachChunk reads r to EOF through one sealed scratch Buffer of chunkSize
// bytes and calls fn with each chunk in order (every chunk is full except
// possibly the last; an empty r calls fn never). The scratch is zeroed after
// each call and destroyed before forEachChunk returns. fn must not retain the
// slice. The first error stops the loop: an error from r is returned wrapped
// (the partial chunk is not passed to fn), an error from fn as is. When the
// input size is not trusted, fn bounds it: it counts the chunks and stops
// the loop with an error past the limit.
func forEachChunk(r io.Reader, chunkSize int, opts Options, fn func(chunk []byte) error) error {
	scratch, err := New(chunkSize, opts)
	if err != nil {
		return err
	}
	defer scratch.Destroy()
	buf := scratch.Bytes()
	for {
		n, rerr := io.ReadFull(r, buf)
		last := errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF)
		if rerr != nil && !last {
			Wipe(buf)
			return fmt.Errorf("sealed: reading chunk: %w", rerr)
		}
		if n > 0 {
			ferr := fn(buf[:n])
			Wipe(buf[:n])
			if ferr != nil {
				return ferr
			}
		}
		if last {
			return nil
		}
	}
}
