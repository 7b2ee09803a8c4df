//go:build linux

package control

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/sealed"
)

// run opens the pack and rebuilds its prompt in a worker. A refusal of
// the pack wraps the sentinel an in-process promptpack.OpenPack and
// Opened.Rebuild would have returned (a template error is an
// *openclawsig.TemplateError); errRebuildBusy and errRebuildWorker say the pack could not
// be checked.
func (r *rebuilder) run(ctx context.Context, req rebuildRequest) (*rebuildResult, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	select {
	case r.sem <- struct{}{}:
		defer func() { <-r.sem }()
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", errRebuildBusy, ctx.Err())
	}
	keyFd, err := r.key.Fd()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errRebuildWorker, err)
	}
	h := workerHeader{
		Version: 1, Manifest: req.Manifest, ReportHashB64u: b64u.Encode(req.ReportHash[:]),
		Trusted: req.Trusted, AllowUnlocked: r.mem.AllowUnlocked, KeyLen: r.key.Len(), PackLen: len(req.Pack),
	}
	if len(req.Admission) > 0 {
		rt := req.Runtime
		h.Admission, h.Runtime = req.Admission, &rt
	}
	hdr, err := json.Marshal(h)
	if err != nil || len(hdr) > maxHeader {
		return nil, fmt.Errorf("%w: request header: %v", errRebuildWorker, err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: socketpair: %w", errRebuildWorker, err)
	}
	childEnd := os.NewFile(uintptr(fds[1]), "rebuild-child")
	defer childEnd.Close()
	parentEnd := os.NewFile(uintptr(fds[0]), "rebuild-parent")
	pc, err := net.FileConn(parentEnd)
	parentEnd.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errRebuildWorker, err)
	}
	defer pc.Close()
	uc, ok := pc.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("%w: not a unix socket", errRebuildWorker)
	}

	var prefix [4]byte
	binary.BigEndian.PutUint32(prefix[:], uint32(len(hdr)))
	cmd := exec.CommandContext(ctx, r.exe, workerArg)
	cmd.Env = []string{workerEnv + "=" + workerEnvValue}
	cmd.Stdin = io.MultiReader(bytes.NewReader(prefix[:]), bytes.NewReader(hdr), bytes.NewReader(req.Pack))
	// stdout and stderr go to /dev/null: nothing the worker prints (a
	// panic included) reaches a log.
	cmd.ExtraFiles = []*os.File{childEnd} // fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%w: start: %w", errRebuildWorker, err)
	}
	childEnd.Close()
	// A duplicate of the key's descriptor, in flight until the worker
	// (hardened by then) receives it; closed here once sent.
	kd, err := unix.FcntlInt(uintptr(keyFd), unix.F_DUPFD_CLOEXEC, 0)
	if err == nil {
		_, _, err = uc.WriteMsgUnix([]byte(keyMsg), unix.UnixRights(kd), nil)
		unix.Close(kd)
	}
	var (
		rep  workerReply
		fd   = -1
		rerr error
	)
	if err != nil {
		rerr = fmt.Errorf("sending the key: %w", err)
		_ = cmd.Process.Kill()
	} else {
		rep, fd, rerr = workerReceive(ctx, uc)
	}
	werr := cmd.Wait()
	if rerr != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		if werr != nil {
			return nil, fmt.Errorf("%w: %w (%w)", errRebuildWorker, rerr, werr)
		}
		return nil, fmt.Errorf("%w: %w", errRebuildWorker, rerr)
	}
	if !rep.OK {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, refusalError(rep)
	}
	if fd < 0 {
		return nil, fmt.Errorf("%w: no prompt descriptor", errRebuildWorker)
	}
	tools, err := b64u.DecodeHash(rep.ToolSchemasHashB64u)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("%w: no tool schemas hash", errRebuildWorker)
	}
	// MapShared refuses a size outside a Buffer's and closes fd.
	prompt, err := sealed.MapShared(fd, rep.PromptBytes, r.mem)
	if err != nil {
		return nil, fmt.Errorf("%w: mapping the prompt: %w", errRebuildWorker, err)
	}
	if werr != nil {
		prompt.Destroy()
		return nil, fmt.Errorf("%w: %w", errRebuildWorker, werr)
	}
	return &rebuildResult{Prompt: prompt, PromptHashB64u: rep.PromptHashB64u, ReportHashB64u: rep.ReportHashB64u, PackID: rep.PackID, Chars: rep.Chars, ToolSchemasHash: tools}, nil
}

// workerReceive reads the worker's one message. fd is the descriptor that came
// with it, or -1; every other descriptor is closed.
func workerReceive(ctx context.Context, uc *net.UnixConn) (workerReply, int, error) {
	if d, ok := ctx.Deadline(); ok {
		uc.SetReadDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { uc.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, maxReply)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
	fd := -1
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		if perr == nil {
			for _, m := range msgs {
				got, rerr := unix.ParseUnixRights(&m)
				if rerr != nil {
					continue
				}
				for _, g := range got {
					if fd < 0 {
						fd = g
					} else {
						unix.Close(g)
						err = errors.Join(err, errors.New("more than one descriptor"))
					}
				}
			}
		}
	}
	if err != nil {
		return workerReply{}, fd, fmt.Errorf("reading the reply: %w", err)
	}
	if n == 0 {
		return workerReply{}, fd, errors.New("the worker closed the socket without a reply")
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return workerReply{}, fd, errors.New("truncated reply")
	}
	var rep workerReply
	dec := json.NewDecoder(bytes.NewReader(buf[:n]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil || dec.More() {
		return workerReply{}, fd, errors.New("malformed reply")
	}
	return rep, fd, nil
}
