package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/clawea/attester/schema/b64u"
)

// ErrSocketInUse is returned by ListenControlSocket when another attester
// holds the socket path.
var ErrSocketInUse = errors.New("control socket: in use by another attester")

// ControlListener is the control socket's listener. Close removes the socket
// and releases the lock; a listener that failed to start removes nothing.
type ControlListener struct {
	net.Listener
	lock *os.File
}

// Close stops listening, unlinks the socket (the net package does it for a
// listener it created) and releases the lock file.
func (l *ControlListener) Close() error {
	err := l.Listener.Close()
	if l.lock != nil {
		l.lock.Close()
		l.lock = nil
	}
	return err
}

// ListenControlSocket creates the control socket at path (mode 0600) in a
// directory that is owned by the attester's uid with mode 0700 (created if
// missing; refused if group or others have any permission). An exclusive
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
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("control socket: directory %s has mode %04o; want 0700 (no group or other access)", dir, st.Mode().Perm())
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
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return fail(fmt.Errorf("control socket: %w", err))
	}
	return &ControlListener{Listener: ln, lock: lock}, nil
}

// peerKey is the context key of the control connection's peer uid.
type peerKey struct{}

// peer is what ConnContext learned about a control connection.
type peer struct {
	uid int
	ok  bool // false: the credentials could not be read
}

// ControlConnContext is the http.Server ConnContext of the control socket:
// it records the peer's uid (SO_PEERCRED) for the authorization check.
func ControlConnContext(ctx context.Context, c net.Conn) context.Context {
	p := peer{}
	if uc, ok := c.(*net.UnixConn); ok {
		p.uid, p.ok = peerUID(uc)
	}
	return context.WithValue(ctx, peerKey{}, p)
}

// Capability text form: "clawea-cap-v1." and 43 characters of b64u (32
// random bytes).
const (
	capPrefix = "clawea-cap-v1."
	capBytes  = 32
)

// newCapability returns a fresh capability and the SHA-256 the run keeps.
func newCapability() (string, [32]byte, error) {
	var b [capBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", [32]byte{}, err
	}
	return capPrefix + b64u.Encode(b[:]), sha256.Sum256(b[:]), nil
}

// parseBearer extracts the capability's hash from an Authorization header.
// Only the syntax is checked; the error is 401.
func parseBearer(h string) ([32]byte, error) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return [32]byte{}, errNoCredential
	}
	rest, ok := strings.CutPrefix(tok, capPrefix)
	if !ok || len(rest) != 43 {
		return [32]byte{}, errNoCredential
	}
	raw, err := b64u.Decode(rest)
	if err != nil || len(raw) != capBytes {
		return [32]byte{}, errNoCredential
	}
	return sha256.Sum256(raw), nil
}

var errNoCredential = &HTTPError{Code: http.StatusUnauthorized, Msg: "a run capability is required: Authorization: Bearer clawea-cap-v1.<43 b64u characters>"}

// capEqual compares capability hashes in constant time.
func capEqual(a, b [32]byte) bool { return subtle.ConstantTimeCompare(a[:], b[:]) == 1 }
