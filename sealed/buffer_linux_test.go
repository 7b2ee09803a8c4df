//go:build linux

package sealed

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// testAllocator returns the real Linux allocator with optional failures
// injected and a record of what was unmapped.
type allocRecord struct {
	unmapped    [][]byte // copies of each mapping's contents at munmap time
	unmappedPtr []uintptr
}

func testAllocator(noSecret bool, mlockErr error, rec *allocRecord) linuxAllocator {
	a := platformAllocator().(linuxAllocator)
	if noSecret {
		a.memfdSecret = func() (int, error) { return -1, unix.ENOSYS }
	}
	if mlockErr != nil {
		a.mlock = func([]byte) error { return mlockErr }
	}
	if rec != nil {
		a.munmap = func(m []byte) error {
			rec.unmapped = append(rec.unmapped, bytes.Clone(m))
			rec.unmappedPtr = append(rec.unmappedPtr, uintptr(unsafe.Pointer(&m[0])))
			return unix.Munmap(m)
		}
	}
	return a
}

func secretMemAvailable(t *testing.T) bool {
	t.Helper()
	fd, err := memfdSecret()
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// vmFlags returns the smaps VmFlags of the mapping that starts at p, or skips
// the test when /proc/self/smaps cannot be read.
func vmFlags(t *testing.T, p []byte) map[string]bool {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	start := uintptr(unsafe.Pointer(&p[0]))
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if lo, _, ok := strings.Cut(line, "-"); ok && !strings.Contains(lo, ":") && !strings.Contains(lo, " ") {
			v, err := strconv.ParseUint(lo, 16, 64)
			in = err == nil && uintptr(v) == start
			continue
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			flags := map[string]bool{}
			for _, fl := range strings.Fields(strings.TrimPrefix(line, "VmFlags:")) {
				flags[fl] = true
			}
			return flags
		}
	}
	t.Fatalf("mapping at %#x not found in /proc/self/smaps", start)
	return nil
}

func TestNewRefusesBadSizes(t *testing.T) {
	for _, n := range []int{0, -1, -1 << 40, maxSize + 1, 1 << 40} {
		b, err := New(n, Options{})
		if !errors.Is(err, errInvalidSize) || b != nil {
			t.Errorf("New(%d) = %v, %v; want nil, ErrInvalidSize", n, b, err)
		}
	}
}

func TestBufferLifecycle(t *testing.T) {
	for _, n := range []int{1, 32, 4095, 4096, 4097, 1 << 20} {
		b, err := New(n, Options{})
		if err != nil {
			t.Fatalf("New(%d): %v", n, err)
		}
		p := b.Bytes()
		if len(p) != n || cap(p) != n || b.Len() != n {
			t.Fatalf("New(%d): len %d cap %d Len %d", n, len(p), cap(p), b.Len())
		}
		if !bytes.Equal(p, make([]byte, n)) {
			t.Fatalf("New(%d): not zeroed", n)
		}
		if bk := b.Backing(); bk != backingMemfdSecret && bk != backingMlock {
			t.Fatalf("New(%d): backing %q", n, bk)
		}
		if !b.Locked() {
			t.Fatalf("New(%d): not locked", n)
		}
		p[n-1], p[0] = 0xBB, 0xAA
		if q := b.Bytes(); q[0] != 0xAA || (n > 1 && q[n-1] != 0xBB) {
			t.Fatalf("New(%d): writes not visible", n)
		}
		b.Destroy()
		if b.Bytes() != nil || b.Len() != 0 || b.Backing() != "" || b.Locked() {
			t.Fatalf("after Destroy: Bytes %v Len %d Backing %q Locked %t", b.Bytes() != nil, b.Len(), b.Backing(), b.Locked())
		}
		b.Destroy() // idempotent
	}
}

func TestNilAndZeroBuffer(t *testing.T) {
	for _, b := range []*Buffer{nil, {}} {
		if b.Bytes() != nil || b.Len() != 0 || b.Backing() != "" || b.Locked() {
			t.Errorf("%v: not empty", b)
		}
		b.Destroy()
		b.Destroy()
	}
}

func TestNewFrom(t *testing.T) {
	src := []byte("sixteen byte key")
	b, err := NewFrom(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy()
	if !bytes.Equal(b.Bytes(), src) {
		t.Fatal("NewFrom did not copy")
	}
	if _, err := NewFrom(nil, Options{}); !errors.Is(err, errInvalidSize) {
		t.Fatalf("NewFrom(nil): %v", err)
	}
}

func TestBackingPrefersMemfdSecret(t *testing.T) {
	if !secretMemAvailable(t) {
		t.Skip("memfd_secret not available on this kernel")
	}
	b, err := New(64, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy()
	if b.Backing() != backingMemfdSecret {
		t.Fatalf("backing %q, want %q", b.Backing(), backingMemfdSecret)
	}
	fl := vmFlags(t, b.Bytes())
	for _, want := range []string{"lo", "dd", "dc"} { // locked, dontdump, dontcopy (fork)
		if !fl[want] {
			t.Errorf("memfd_secret mapping lacks VmFlag %q: %v", want, fl)
		}
	}
}

func TestMlockBacking(t *testing.T) {
	b, err := newBuffer(64, Options{}, testAllocator(true, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy()
	if b.Backing() != backingMlock || !b.Locked() {
		t.Fatalf("backing %q locked %t", b.Backing(), b.Locked())
	}
	fl := vmFlags(t, b.Bytes())
	for _, want := range []string{"lo", "dd"} {
		if !fl[want] {
			t.Errorf("mlock mapping lacks VmFlag %q: %v", want, fl)
		}
	}
}

func TestLockFailedNoFallback(t *testing.T) {
	rec := &allocRecord{}
	for _, errno := range []error{unix.EPERM, unix.ENOMEM, unix.EAGAIN} {
		b, err := newBuffer(64, Options{}, testAllocator(true, errno, rec))
		if b != nil {
			t.Fatalf("mlock %v: got a buffer (%v), want none", errno, b)
		}
		if !errors.Is(err, ErrLockFailed) || !errors.Is(err, errno) {
			t.Fatalf("mlock %v: err %v, want ErrLockFailed wrapping the errno", errno, err)
		}
	}
	if len(rec.unmapped) != 3 {
		t.Fatalf("failed mappings unmapped %d times, want 3", len(rec.unmapped))
	}
}

func TestAllowUnlocked(t *testing.T) {
	rec := &allocRecord{}
	b, err := newBuffer(100, Options{AllowUnlocked: true}, testAllocator(true, unix.EPERM, rec))
	if err != nil {
		t.Fatal(err)
	}
	if b.Backing() != backingUnlocked || b.Locked() {
		t.Fatalf("backing %q locked %t, want %q false", b.Backing(), b.Locked(), backingUnlocked)
	}
	if fl := vmFlags(t, b.Bytes()); !fl["dd"] || fl["lo"] {
		t.Errorf("unlocked mapping VmFlags %v, want dd and not lo", fl)
	}
	copy(b.Bytes(), "usable")
	b.Destroy()
	if len(rec.unmapped) != 1 || !bytes.Equal(rec.unmapped[0], make([]byte, len(rec.unmapped[0]))) {
		t.Fatal("unlocked buffer not zeroed and unmapped on Destroy")
	}
	// A lockable allocation with AllowUnlocked is still locked.
	b, err = New(100, Options{AllowUnlocked: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy()
	if !b.Locked() {
		t.Fatalf("AllowUnlocked without lock failure: backing %q", b.Backing())
	}
}

func TestDestroyZeroesThenUnmaps(t *testing.T) {
	cases := []struct {
		name     string
		noSecret bool
		mlockErr error
		opts     Options
	}{
		{"default", false, nil, Options{}},
		{"mlock", true, nil, Options{}},
		{"unlocked", true, unix.EPERM, Options{AllowUnlocked: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &allocRecord{}
			b, err := newBuffer(5000, c.opts, testAllocator(c.noSecret, c.mlockErr, rec))
			if err != nil {
				t.Fatal(err)
			}
			p := b.Bytes()
			for i := range p {
				p[i] = 0xA5
			}
			start := uintptr(unsafe.Pointer(&p[0]))
			b.Destroy()
			b.Destroy()
			if len(rec.unmapped) != 1 {
				t.Fatalf("munmap called %d times, want 1", len(rec.unmapped))
			}
			m := rec.unmapped[0]
			if rec.unmappedPtr[0] != start || len(m) < 5000 || len(m)%os.Getpagesize() != 0 {
				t.Fatalf("unmapped %#x+%d, want the buffer's mapping at %#x", rec.unmappedPtr[0], len(m), start)
			}
			if !bytes.Equal(m, make([]byte, len(m))) {
				t.Fatal("mapping not zeroed before munmap")
			}
		})
	}
}

func TestWipe(t *testing.T) {
	b := []byte("secret")
	Wipe(b)
	if !bytes.Equal(b, make([]byte, 6)) {
		t.Fatal("Wipe left data")
	}
	Wipe(nil)
}

func TestBufferNeverPrintsContents(t *testing.T) {
	const marker = "MARKER-7f3a"
	b, err := NewFrom([]byte(marker), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy()
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T", "%p"} {
		outs = append(outs, fmt.Sprintf(verb, b))
	}
	outs = append(outs, fmt.Sprint(b), fmt.Sprintf("%v", []*Buffer{b}), fmt.Sprintf("%+v", struct{ B *Buffer }{b}))
	var logBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logBuf, nil)).Info("x", "buf", b)
	outs = append(outs, logBuf.String())
	//lint:ignore SA9005 the point is that marshaling a Buffer reveals nothing
	j, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	outs = append(outs, string(j))
	hexMarker := fmt.Sprintf("%x", marker)
	for _, o := range outs {
		if strings.Contains(o, marker) || strings.Contains(strings.ToLower(o), hexMarker) {
			t.Errorf("output exposes contents: %q", o)
		}
	}
	if got := fmt.Sprintf("%v", b); !strings.Contains(got, "len=11") {
		t.Errorf("String() = %q, want the length", got)
	}
}

func TestConcurrentDestroy(t *testing.T) {
	b, err := New(32, Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			_ = b.Len()
			b.Destroy()
		}()
	}
	for range 4 {
		<-done
	}
	if b.Bytes() != nil {
		t.Fatal("not destroyed")
	}
}
