//go:build linux

package sealed

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// linuxAllocator implements allocator with memfd_secret or mlock. Its
// function fields are the system calls that can fail for environmental
// reasons; tests replace them to exercise the failure paths (they are not
// reachable from the public API).
type linuxAllocator struct {
	memfdSecret func() (int, error)
	mlock       func([]byte) error
	munmap      func([]byte) error
}

func platformAllocator() allocator {
	return linuxAllocator{memfdSecret: memfdSecret, mlock: unix.Mlock, munmap: unix.Munmap}
}

func memfdSecret() (int, error) {
	fd, _, errno := unix.Syscall(unix.SYS_MEMFD_SECRET, uintptr(unix.O_CLOEXEC), 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

func pageRound(n int) int {
	p := os.Getpagesize()
	return (n + p - 1) / p * p
}

func (a linuxAllocator) alloc(size int, opts Options) ([]byte, string, error) {
	n := pageRound(size)
	if mem, err := a.allocSecret(n); err == nil {
		return mem, BackingMemfdSecret, nil
	}
	// memfd_secret is unavailable (old kernel, secretmem disabled) or
	// failed: use a locked anonymous mapping.
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %d bytes: %w", ErrAllocFailed, n, err)
	}
	if err := unix.Madvise(mem, unix.MADV_DONTDUMP); err != nil {
		_ = a.munmap(mem)
		return nil, "", fmt.Errorf("%w: madvise(MADV_DONTDUMP): %w", ErrAllocFailed, err)
	}
	// MADV_WIPEONFORK (Linux 4.14+): a forked child sees zeros. Best effort.
	_ = unix.Madvise(mem, unix.MADV_WIPEONFORK)
	if err := a.mlock(mem); err != nil {
		if !opts.AllowUnlocked {
			_ = a.munmap(mem)
			return nil, "", fmt.Errorf("%w: mlock %d bytes: %w", ErrLockFailed, n, err)
		}
		return mem, BackingUnlocked, nil
	}
	return mem, BackingMlock, nil
}

func (a linuxAllocator) allocSecret(n int) (mem []byte, err error) {
	fd, err := a.memfdSecret()
	if err != nil {
		return nil, err
	}
	// The mapping keeps the memory alive; the descriptor is not needed.
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		return nil, err
	}
	// secretmem mappings are locked by the kernel (counted against
	// RLIMIT_MEMLOCK): mmap fails with EAGAIN when the limit is reached.
	mem, err = unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	// A shared mapping would be inherited by a forked child: refuse that.
	if err := unix.Madvise(mem, unix.MADV_DONTFORK); err != nil {
		_ = a.munmap(mem)
		return nil, err
	}
	// Not reachable by core dumps anyway; mark it for clarity. Best effort.
	_ = unix.Madvise(mem, unix.MADV_DONTDUMP)
	return mem, nil
}

func (a linuxAllocator) free(mem []byte, backing string) {
	Wipe(mem)
	if backing == BackingMlock {
		_ = unix.Munlock(mem)
	}
	// munmap only fails for invalid arguments; the memory is zeroed anyway.
	_ = a.munmap(mem)
}
