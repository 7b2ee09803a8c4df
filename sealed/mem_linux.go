//go:build linux

package sealed

import (
	"fmt"
	"os"
	"strings"

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
		return mem, backingMemfdSecret, nil
	}
	// memfd_secret is unavailable (old kernel, secretmem disabled) or
	// failed: use a locked anonymous mapping.
	mem, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %d bytes: %w", ErrAllocFailed, n, err)
	}
	// MADV_WIPEONFORK (Linux 4.14+): a forked child sees zeros. Best effort.
	return a.protect(mem, unix.MADV_WIPEONFORK, opts)
}

// protect finishes a fresh mapping: MADV_DONTDUMP (required), the advice
// bestEffort (its failure ignored), then mlock (required unless
// opts.AllowUnlocked). mem is unmapped when a required step fails.
func (a linuxAllocator) protect(mem []byte, bestEffort int, opts Options) ([]byte, string, error) {
	if err := unix.Madvise(mem, unix.MADV_DONTDUMP); err != nil {
		_ = a.munmap(mem)
		return nil, "", fmt.Errorf("%w: madvise(MADV_DONTDUMP): %w", ErrAllocFailed, err)
	}
	_ = unix.Madvise(mem, bestEffort)
	if err := a.mlock(mem); err != nil {
		if !opts.AllowUnlocked {
			_ = a.munmap(mem)
			return nil, "", fmt.Errorf("%w: mlock %d bytes: %w", ErrLockFailed, len(mem), err)
		}
		return mem, backingUnlocked, nil
	}
	return mem, backingMlock, nil
}

func (a linuxAllocator) allocSecret(n int) ([]byte, error) {
	fd, err := a.memfdSecret()
	if err != nil {
		return nil, err
	}
	// The mapping keeps the memory alive; the descriptor is not needed.
	defer unix.Close(fd)
	return a.mapSecret(fd, n, false)
}

func (a linuxAllocator) free(mem []byte, backing string) {
	Wipe(mem)
	if backing == backingMlock {
		_ = unix.Munlock(mem)
	}
	// munmap only fails for invalid arguments; the memory is zeroed anyway.
	_ = a.munmap(mem)
}

// memfdName names the fallback memfd; MapShared checks it.
const memfdName = "clawea-sealed"

// allocShared makes a mapping backed by a descriptor: memfd_secret, or else
// a memfd sealed against resizing (so the receiver's mapping cannot be
// truncated under it), mapped shared, marked MADV_DONTDUMP and mlocked.
func (a linuxAllocator) allocShared(size int, opts Options) ([]byte, int, string, error) {
	n := pageRound(size)
	if fd, err := a.memfdSecret(); err == nil {
		mem, err := a.mapSecret(fd, n, false)
		if err == nil {
			return mem, fd, backingMemfdSecret, nil
		}
		unix.Close(fd)
	}
	fd, err := unix.MemfdCreate(memfdName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, -1, "", fmt.Errorf("%w: memfd_create: %w", ErrAllocFailed, err)
	}
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		unix.Close(fd)
		return nil, -1, "", fmt.Errorf("%w: ftruncate: %w", ErrAllocFailed, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil, -1, "", fmt.Errorf("%w: sealing the memfd: %w", ErrAllocFailed, err)
	}
	mem, backing, err := a.mapMemfd(fd, n, false, opts)
	if err != nil {
		unix.Close(fd)
		return nil, -1, "", err
	}
	return mem, fd, backing, nil
}

// mapSecret maps a memfd_secret descriptor of n bytes (sizing a new one).
func (a linuxAllocator) mapSecret(fd, n int, readOnly bool) ([]byte, error) {
	st, err := fstat(fd)
	if err != nil {
		return nil, err
	}
	if st.Size == 0 { // a new descriptor: size it
		if readOnly {
			return nil, errNotSealedFile
		}
		if err := unix.Ftruncate(fd, int64(n)); err != nil {
			return nil, err
		}
	} else if st.Size < int64(n) {
		return nil, errNotSealedFile
	}
	prot := unix.PROT_READ | unix.PROT_WRITE
	if readOnly {
		prot = unix.PROT_READ
	}
	// secretmem mappings are locked by the kernel (counted against
	// RLIMIT_MEMLOCK): mmap fails with EAGAIN when the limit is reached.
	mem, err := unix.Mmap(fd, 0, n, prot, unix.MAP_SHARED)
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

// mapMemfd maps a sealed memfd of n bytes: MADV_DONTDUMP (required),
// MADV_DONTFORK and mlock (required unless opts.AllowUnlocked).
func (a linuxAllocator) mapMemfd(fd, n int, readOnly bool, opts Options) ([]byte, string, error) {
	prot := unix.PROT_READ | unix.PROT_WRITE
	if readOnly {
		prot = unix.PROT_READ
	}
	mem, err := unix.Mmap(fd, 0, n, prot, unix.MAP_SHARED)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %d bytes: %w", ErrAllocFailed, n, err)
	}
	return a.protect(mem, unix.MADV_DONTFORK, opts)
}

// mapFd maps a descriptor made by allocShared, after checking what it is:
// a memfd_secret ("/secretmem"), or a memfd of ours sealed against
// shrinking, at least n bytes long.
func (a linuxAllocator) mapFd(fd, size int, readOnly bool, opts Options) ([]byte, string, error) {
	n := pageRound(size)
	target, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", errNotSealedFile, err)
	}
	switch {
	case strings.HasPrefix(target, "/secretmem"):
		st, err := fstat(fd)
		if err != nil || st.Size < int64(n) {
			return nil, "", fmt.Errorf("%w: memfd_secret shorter than %d bytes", errNotSealedFile, n)
		}
		mem, err := a.mapSecret(fd, n, readOnly)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %w", ErrAllocFailed, err)
		}
		return mem, backingMemfdSecret, nil
	case strings.HasPrefix(target, "/memfd:"+memfdName+" "):
		seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
		if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
			return nil, "", fmt.Errorf("%w: memfd not sealed against shrinking", errNotSealedFile)
		}
		st, err := fstat(fd)
		if err != nil || st.Size < int64(n) {
			return nil, "", fmt.Errorf("%w: memfd shorter than %d bytes", errNotSealedFile, n)
		}
		return a.mapMemfd(fd, n, readOnly, opts)
	}
	return nil, "", fmt.Errorf("%w: not a memfd_secret or sealed memfd", errNotSealedFile)
}

func fstat(fd int) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstat(fd, &st)
	return st, err
}

// unmap releases a mapping without zeroing it.
func (a linuxAllocator) unmap(mem []byte, backing string) {
	if backing == backingMlock {
		_ = unix.Munlock(mem)
	}
	_ = a.munmap(mem)
}

func (linuxAllocator) closeFd(fd int) { _ = unix.Close(fd) }
