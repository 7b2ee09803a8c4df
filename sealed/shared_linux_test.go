//go:build linux

package sealed

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestShareableBuffer: a shareable buffer's descriptor maps the same
// memory; a MapShared owner zeroes it on Destroy, a MapReadOnly viewer
// does not, on both backings.
func TestShareableBuffer(t *testing.T) {
	for _, noSecret := range []bool{false, true} {
		a := testAllocator(noSecret, nil, nil)
		b, err := newShareable(100, Options{AllowUnlocked: true}, a)
		if err != nil {
			t.Fatal(err)
		}
		want := backingMemfdSecret
		if noSecret || !secretMemAvailable(t) {
			want = backingMlock
		}
		if b.Backing() != want && !(want == backingMlock && b.Backing() == backingUnlocked) {
			t.Errorf("noSecret=%t: backing %s, want %s", noSecret, b.Backing(), want)
		}
		if !vmFlags(t, b.Bytes())["dd"] && b.Backing() != backingMemfdSecret {
			t.Errorf("noSecret=%t: memfd mapping not MADV_DONTDUMP", noSecret)
		}
		copy(b.Bytes(), "shared secret")
		fd, err := b.Fd()
		if err != nil {
			t.Fatal(err)
		}
		dup := func() int {
			d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		ro, err := mapShared(dup(), 100, true, Options{AllowUnlocked: true}, a)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(ro.Bytes(), []byte("shared secret")) {
			t.Fatal("read-only view does not see the contents")
		}
		ro.Destroy()
		if !bytes.HasPrefix(b.Bytes(), []byte("shared secret")) {
			t.Fatal("destroying a read-only view zeroed the owner's memory")
		}
		rw, err := mapShared(dup(), 100, false, Options{AllowUnlocked: true}, a)
		if err != nil {
			t.Fatal(err)
		}
		if rw.Backing() != b.Backing() {
			t.Errorf("mapped backing %s, owner %s", rw.Backing(), b.Backing())
		}
		if _, err := rw.Fd(); !errors.Is(err, errNotShareable) {
			t.Errorf("Fd of a mapped buffer: %v", err)
		}
		rw.Destroy()
		if !bytes.Equal(b.Bytes(), make([]byte, 100)) {
			t.Fatal("destroying the owning mapping did not zero the memory")
		}
		b.Destroy()
		if _, err := b.Fd(); !errors.Is(err, ErrDestroyed) {
			t.Errorf("Fd after Destroy: %v", err)
		}
	}
}

// TestMapRefusesOtherDescriptors: a regular file, a pipe, a memfd that is
// not ours or not sealed, and one shorter than asked are refused, and the
// descriptor is closed in every case.
func TestMapRefusesOtherDescriptors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	os.WriteFile(path, make([]byte, 8192), 0o600)
	file := func() int {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	pipe := func() int {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		unix.Close(p[1])
		return p[0]
	}
	memfd := func(name string, flags int, seal bool) func() int {
		return func() int {
			fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|flags)
			if err != nil {
				t.Fatal(err)
			}
			unix.Ftruncate(fd, 8192)
			if seal {
				unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK)
			}
			return fd
		}
	}
	short := func() int {
		b, err := newShareable(10, Options{AllowUnlocked: true}, testAllocator(true, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Destroy()
		fd, _ := b.Fd()
		d, _ := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		return d
	}
	for name, mk := range map[string]func() int{
		"file": file, "pipe": pipe,
		"foreign memfd":  memfd("other", unix.MFD_ALLOW_SEALING, true),
		"unsealed memfd": memfd(memfdName, 0, false),
		"short memfd":    short,
	} {
		fd := mk()
		size := 8192
		if name == "short memfd" {
			size = 2 * os.Getpagesize()
		}
		b, err := MapShared(fd, size, Options{AllowUnlocked: true})
		if !errors.Is(err, errNotSealedFile) || b != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := unix.Fstat(fd, &unix.Stat_t{}); !errors.Is(err, unix.EBADF) {
			t.Errorf("%s: descriptor %d left open", name, fd)
		}
	}
	if _, err := New(10, Options{}); err == nil {
		b, _ := New(10, Options{AllowUnlocked: true})
		if _, err := b.Fd(); !errors.Is(err, errNotShareable) {
			t.Errorf("Fd of a New buffer: %v", err)
		}
		b.Destroy()
	}
}
