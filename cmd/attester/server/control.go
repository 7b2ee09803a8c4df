package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ErrSocketInUse is returned by ListenControlSocket when another attester
// holds the socket path.
var ErrSocketInUse = errors.New("control socket: in use by another attester")

// ControlListener is the control socket's listener. Close removes the socket
// and releases the lock; a listener that failed to start removes nothing.
type ControlListener struct {
	net.Listener
	lock   *os.File
	closed sync.Once
	err    error
}

// Close stops listening, unlinks the socket (the net package does it for a
// listener it created) and releases the lock file, once: the http.Server
// serving it and its owner may both close it, at the same time.
func (l *ControlListener) Close() error {
	l.closed.Do(func() {
		l.err = l.Listener.Close()
		if l.lock != nil {
			l.lock.Close()
		}
	})
	return l.err
}

// ListenControlSocket creates the control socket at path (mode 0660, in the
// directory's group) in a directory that is owned by the attester's uid,
// that its group may at most enter and list, and that others cannot reach
// (0750 or stricter; created 0700 if missing; refused with group write or
// any permission for others). Orchestrators reach the socket through the
// directory's group; nobody but the attester can replace it (attester-api
// section 2). An exclusive
// lock on path+".lock" is held while the socket exists: a second attester
// on the same path fails with ErrSocketInUse and touches nothing. A socket
// file left by a dead attester (no lock holder, nothing accepting) is
// replaced; anything else at the path is refused.
func ListenControlSocket(path string) (*ControlListener, error) {
	dir := filepath.Dir(path)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("control socket: %s is not a directory", dir)
	}
	if st.Mode().Perm()&0o027 != 0 {
		return nil, fmt.Errorf("control socket: directory %s has mode %04o; want 0750 or stricter (no group write, no access for others)", dir, st.Mode().Perm())
	}
	if uid, ok := fileOwner(st); ok && uid != os.Geteuid() {
		return nil, fmt.Errorf("control socket: directory %s is owned by uid %d, not by the attester (uid %d)", dir, uid, os.Geteuid())
	}
	lock, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("control socket: lock: %w", err)
	}
	if err := tryLock(lock); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w: %s (%v)", ErrSocketInUse, path, err)
	}
	fail := func(err error) (*ControlListener, error) {
		lock.Close()
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return fail(fmt.Errorf("control socket: %s exists and is not a socket", path))
		}
		// Held lock, but an attester of another version (or another
		// program) may still serve it: never take a live socket over.
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return fail(fmt.Errorf("%w: %s accepts connections", ErrSocketInUse, path))
		}
		if err := os.Remove(path); err != nil {
			return fail(fmt.Errorf("control socket: %w", err))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fail(fmt.Errorf("control socket: %w", err))
	}
	old := umask(0o177)
	ln, err := net.Listen("unix", path)
	umask(old)
	if err != nil {
		return fail(fmt.Errorf("control socket: %w", err))
	}
	// Created 0600 (the umask above), then given to the directory's group
	// and only then opened to that group: no other group can reach it in
	// between.
	if err := shareWithDirGroup(path, st); err != nil {
		ln.Close()
		return fail(fmt.Errorf("control socket: %w", err))
	}
	return &ControlListener{Listener: ln, lock: lock}, nil
}

// shareWithDirGroup gives the socket at path the group of its directory
// (dir) and mode 0660.
func shareWithDirGroup(path string, dir os.FileInfo) error {
	if gid, ok := fileGroup(dir); ok {
		if err := os.Lchown(path, -1, gid); err != nil {
			return err
		}
	}
	return os.Chmod(path, 0o660)
}
