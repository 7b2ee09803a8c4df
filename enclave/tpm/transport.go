package tpm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// TPM command/response framing limits. TPM 2.0 implementations use 4 KiB
// buffers; anything larger is refused.
const (
	maxCommandSize  = 8 << 10
	maxResponseSize = 8 << 10
	tpmHeaderSize   = 10

	// defaultIOTimeout bounds one TPM operation over TCP when ctx has no
	// deadline.
	defaultIOTimeout = 2 * time.Minute
)

// errTransportBroken is returned after an I/O error: the command stream may
// be out of step, so the connection is not used again.
var errTransportBroken = errors.New("tpm: transport broken by an earlier error")

// tcpTransport speaks the raw TPM 2.0 command protocol over a stream socket,
// as swtpm's "--server type=tcp" data channel does: a command is its TPM
// header and body; the response is read by the size in its header. (go-tpm's
// transport/tcp speaks the Microsoft simulator protocol instead, which needs a
// platform channel that swtpm's --ctrl socket does not provide.)
type tcpTransport struct {
	mu     sync.Mutex
	conn   net.Conn
	broken bool
}

func dialTCP(ctx context.Context, addr string) (*tcpTransport, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &tcpTransport{conn: conn}, nil
}

// bind makes ctx's cancellation and deadline interrupt I/O on the connection
// until the returned stop function is called.
func (t *tcpTransport) bind(ctx context.Context) (stop func()) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(defaultIOTimeout)
	}
	_ = t.conn.SetDeadline(deadline)
	stopAfter := context.AfterFunc(ctx, func() {
		_ = t.conn.SetDeadline(time.Unix(1, 0))
	})
	return func() { stopAfter() }
}

// Send implements go-tpm's transport.TPM.
func (t *tcpTransport) Send(cmd []byte) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.broken {
		return nil, errTransportBroken
	}
	if len(cmd) < tpmHeaderSize || len(cmd) > maxCommandSize {
		return nil, fmt.Errorf("tpm: command is %d bytes", len(cmd))
	}
	rsp, err := t.roundTrip(cmd)
	if err != nil {
		t.broken = true
		return nil, err
	}
	return rsp, nil
}

func (t *tcpTransport) roundTrip(cmd []byte) ([]byte, error) {
	if _, err := t.conn.Write(cmd); err != nil {
		return nil, fmt.Errorf("tpm: write command: %w", err)
	}
	var hdr [tpmHeaderSize]byte
	if _, err := io.ReadFull(t.conn, hdr[:]); err != nil {
		return nil, fmt.Errorf("tpm: read response header: %w", err)
	}
	size := binary.BigEndian.Uint32(hdr[2:6])
	if size < tpmHeaderSize || size > maxResponseSize {
		return nil, fmt.Errorf("tpm: response size %d out of range", size)
	}
	rsp := make([]byte, size)
	copy(rsp, hdr[:])
	if _, err := io.ReadFull(t.conn, rsp[tpmHeaderSize:]); err != nil {
		return nil, fmt.Errorf("tpm: read response body: %w", err)
	}
	return rsp, nil
}

// Close implements io.Closer.
func (t *tcpTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.broken = true
	return t.conn.Close()
}
