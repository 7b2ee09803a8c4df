package sealed

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
)

// maxSize is the largest Buffer New accepts (64 MiB). Unprivileged processes
// can usually lock far less (RLIMIT_MEMLOCK, often 8 MiB): large bodies are
// processed in chunks (see forEachChunk) rather than held whole.
const maxSize = 64 << 20

// Backing names reported by Buffer.Backing.
const (
	// backingMemfdSecret is memory from memfd_secret(2): locked, excluded
	// from core dumps and removed from the kernel's direct map.
	backingMemfdSecret = "memfd_secret"
	// backingMlock is an anonymous private mapping locked with mlock(2) and
	// marked MADV_DONTDUMP.
	backingMlock = "mlock"
	// backingUnlocked is an anonymous private mapping marked MADV_DONTDUMP
	// that could not be locked; only with Options.AllowUnlocked.
	backingUnlocked = "unlocked"
)

var (
	// ErrNotSupported is returned on operating systems without sealed memory.
	ErrNotSupported = errors.New("sealed: not supported on this operating system")
	// errInvalidSize is returned for a size that is not in 1..maxSize.
	errInvalidSize = errors.New("sealed: invalid buffer size")
	// ErrLockFailed is returned when the memory cannot be locked into RAM and
	// Options.AllowUnlocked is not set. It wraps the errno.
	ErrLockFailed = errors.New("sealed: cannot lock memory")
	// ErrAllocFailed is returned when the memory cannot be mapped at all.
	ErrAllocFailed = errors.New("sealed: cannot map memory")
	// ErrDestroyed is returned when a destroyed object is used.
	ErrDestroyed = errors.New("sealed: use after destroy")
	// errNotShareable is returned by Fd for a Buffer without a descriptor.
	errNotShareable = errors.New("sealed: buffer has no file descriptor")
	// errNotSealedFile is returned by MapShared and MapReadOnly for a
	// descriptor that is not sealed memory (a memfd_secret, or a sealed
	// memfd this package created) of the stated size.
	errNotSealedFile = errors.New("sealed: descriptor is not sealed memory")
)

// Options relax New. The zero value is the strictest: the memory must be
// locked.
type Options struct {
	// AllowUnlocked lets New return a Buffer that is not locked into RAM
	// (it may be swapped out) when locking fails. Such a buffer reports
	// Locked() == false and Backing() == backingUnlocked. It is still outside
	// the Go heap, excluded from core dumps and zeroed on Destroy.
	AllowUnlocked bool
}

// allocator is the platform part of a Buffer. alloc returns a mapping of at
// least size bytes; free zeroes and releases it.
type allocator interface {
	alloc(size int, opts Options) (mem []byte, backing string, err error)
	free(mem []byte, backing string)
	// allocShared is alloc backed by a file descriptor that can be passed
	// to another process (memfd_secret, or a sealed memfd).
	allocShared(size int, opts Options) (mem []byte, fd int, backing string, err error)
	// mapFd maps size bytes of a descriptor allocShared made (possibly in
	// another process). It does not close fd.
	mapFd(fd, size int, readOnly bool, opts Options) (mem []byte, backing string, err error)
	// unmap releases a mapping without zeroing it (read-only mappings of
	// memory another process owns) and closes fd when it is >= 0.
	unmap(mem []byte, backing string)
	closeFd(fd int)
}

// Buffer is a fixed-size region of sealed memory. The zero value and nil are
// empty, destroyed buffers. A Buffer is safe for concurrent use, but the
// slice returned by Bytes must not be used after Destroy.
type Buffer struct {
	mu       sync.Mutex
	data     []byte // len == cap == size; nil once destroyed
	mem      []byte // the whole mapping
	backing  string
	a        allocator
	fd       int  // the backing descriptor (NewShareable), or -1
	readOnly bool // MapReadOnly: never written, not zeroed by Destroy
}

// New returns a zeroed Buffer of size bytes. size must be in 1..maxSize.
// The caller must call Destroy when done.
func New(size int, opts Options) (*Buffer, error) {
	return newBuffer(size, opts, platformAllocator())
}

// NewFrom returns a new Buffer holding a copy of src. It does not modify
// src: callers that hold src on the heap should Wipe it.
func NewFrom(src []byte, opts Options) (*Buffer, error) {
	b, err := New(len(src), opts)
	if err != nil {
		return nil, err
	}
	copy(b.data, src)
	return b, nil
}

func newBuffer(size int, opts Options, a allocator) (*Buffer, error) {
	if size <= 0 || size > maxSize {
		return nil, fmt.Errorf("%w: %d bytes, want 1..%d", errInvalidSize, size, maxSize)
	}
	mem, backing, err := a.alloc(size, opts)
	if err != nil {
		return nil, err
	}
	return &Buffer{data: mem[:size:size], mem: mem, backing: backing, a: a, fd: -1}, nil
}

// NewShareable is New for memory that another process can map: the Buffer
// keeps the descriptor of its backing (memfd_secret, or else a memfd that is
// sealed against resizing, mlocked and marked MADV_DONTDUMP), which Fd
// returns and which is closed by Destroy. The descriptor is close-on-exec;
// pass a duplicate to a child process explicitly.
func NewShareable(size int, opts Options) (*Buffer, error) {
	return newShareable(size, opts, platformAllocator())
}

func newShareable(size int, opts Options, a allocator) (*Buffer, error) {
	if size <= 0 || size > maxSize {
		return nil, fmt.Errorf("%w: %d bytes, want 1..%d", errInvalidSize, size, maxSize)
	}
	mem, fd, backing, err := a.allocShared(size, opts)
	if err != nil {
		return nil, err
	}
	return &Buffer{data: mem[:size:size], mem: mem, backing: backing, a: a, fd: fd}, nil
}

// MapShared maps the first size bytes of fd, a descriptor of a Buffer made
// by NewShareable (typically in another process, received over a unix
// socket), as a Buffer of this process that owns the memory: Destroy zeroes
// it. MapShared always closes fd (the mapping keeps the memory alive). It
// refuses a descriptor that is not sealed memory of at least size bytes
// (errNotSealedFile), and a memfd that cannot be locked unless
// opts.AllowUnlocked.
func MapShared(fd, size int, opts Options) (*Buffer, error) {
	return mapShared(fd, size, false, opts, platformAllocator())
}

// MapReadOnly is MapShared for memory another process owns: the mapping is
// read-only (a write faults), and Destroy unmaps it without zeroing, since
// the owner zeroes it. It always closes fd.
func MapReadOnly(fd, size int, opts Options) (*Buffer, error) {
	return mapShared(fd, size, true, opts, platformAllocator())
}

func mapShared(fd, size int, readOnly bool, opts Options, a allocator) (*Buffer, error) {
	defer a.closeFd(fd)
	if size <= 0 || size > maxSize {
		return nil, fmt.Errorf("%w: %d bytes, want 1..%d", errInvalidSize, size, maxSize)
	}
	mem, backing, err := a.mapFd(fd, size, readOnly, opts)
	if err != nil {
		return nil, err
	}
	return &Buffer{data: mem[:size:size], mem: mem, backing: backing, a: a, fd: -1, readOnly: readOnly}, nil
}

// Fd returns the descriptor of a Buffer made by NewShareable. It stays owned
// by the Buffer: do not close it, and do not use it after Destroy.
func (b *Buffer) Fd() (int, error) {
	if b == nil {
		return -1, ErrDestroyed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.data == nil {
		return -1, ErrDestroyed
	}
	if b.fd < 0 {
		return -1, errNotShareable
	}
	return b.fd, nil
}

// Bytes returns the buffer's contents, len(Bytes()) == cap(Bytes()) == Len().
// Writes go to sealed memory; append would copy to the heap, so do not append.
// It returns nil after Destroy. The returned slice must not be
// used after Destroy: the memory is then unmapped and touching it crashes the
// process rather than exposing data.
func (b *Buffer) Bytes() []byte {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.data
}

// Len returns the buffer's size, or 0 after Destroy.
func (b *Buffer) Len() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.data)
}

// Backing reports the memory backing: backingMemfdSecret, backingMlock or
// backingUnlocked; "" after Destroy.
func (b *Buffer) Backing() string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.data == nil {
		return ""
	}
	return b.backing
}

// Locked reports whether the memory is locked into RAM. It is false after
// Destroy.
func (b *Buffer) Locked() bool {
	bk := b.Backing()
	return bk == backingMemfdSecret || bk == backingMlock
}

// Destroy zeroes the contents and releases the memory (a MapReadOnly buffer
// is only unmapped: its owner zeroes it), and closes the descriptor of a
// shareable buffer. It is idempotent and safe to call on nil.
func (b *Buffer) Destroy() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.data == nil {
		return
	}
	mem, backing := b.mem, b.backing
	b.data, b.mem = nil, nil
	if b.readOnly {
		b.a.unmap(mem, backing)
	} else {
		b.a.free(mem, backing)
	}
	if b.fd >= 0 {
		b.a.closeFd(b.fd)
		b.fd = -1
	}
}

// Wipe zeroes b. Use it on heap copies of secrets.
func Wipe(b []byte) {
	clear(b)
	runtime.KeepAlive(b)
}

// String describes the buffer without its contents.
func (b *Buffer) String() string {
	if b == nil {
		return "sealed.Buffer(nil)"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.data == nil {
		return "sealed.Buffer(destroyed)"
	}
	return fmt.Sprintf("sealed.Buffer(len=%d, backing=%s)", len(b.data), b.backing)
}

// GoString is String: %#v never prints contents.
func (b *Buffer) GoString() string { return b.String() }

// Format prints String for every verb, so no fmt verb prints contents.
func (b *Buffer) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(b.String())) }

// LogValue makes slog log String, never contents.
func (b *Buffer) LogValue() slog.Value { return slog.StringValue(b.String()) }
