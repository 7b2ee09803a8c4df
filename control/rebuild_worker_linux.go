//go:build linux

package control

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/sealed"
)

// workerMain is the worker: it answers one rebuildRequest received as described in the
// package comment and returns the exit code. It refuses to run (exit 2,
// one line on stderr) unless the environment and descriptors are those a
// rebuilder sets up. It never writes plaintext anywhere but into the sealed
// buffer it hands over.
func workerMain(stdin io.Reader, stderr io.Writer) int {
	if err := checkWorkerEnv(); err != nil {
		fmt.Fprintln(stderr, "attester:", err)
		return 2
	}
	// Same hardening as the service: no core dump, no ptrace by peers.
	if err := sealed.HardenProcess(); err != nil {
		return 3
	}
	rep, fd, err := workerRebuild(stdin)
	if err != nil {
		// A broken request is not a refusal of the pack: exit without an
		// answer, which the parent reports as a worker failure.
		return 3
	}
	if err := workerSend(rep, fd); err != nil {
		return 3
	}
	// The prompt buffer (if any) now belongs to the parent: it is not
	// destroyed here, which would zero the parent's copy. Exiting unmaps
	// it; everything else this process held dies with it.
	return 0
}

func checkWorkerEnv() error {
	if os.Getenv(workerEnv) != workerEnvValue {
		return errNotWorker
	}
	typ, err := unix.GetsockoptInt(sockFD, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || typ != unix.SOCK_SEQPACKET {
		return errNotWorker
	}
	return nil
}

// receiveKey reads the message that carries the key's descriptor.
func receiveKey() (int, error) {
	buf := make([]byte, len(keyMsg)+1)
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := unix.Recvmsg(sockFD, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, err
	}
	var got []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if fds, err := unix.ParseUnixRights(&m); err == nil {
				got = append(got, fds...)
			}
		}
	}
	if string(buf[:n]) != keyMsg || flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 || len(got) != 1 {
		for _, fd := range got {
			unix.Close(fd)
		}
		return -1, errors.New("malformed key message")
	}
	return got[0], nil
}

// workerRebuild opens and rebuilds; it returns the reply and the descriptor of the
// prompt buffer (or -1), or an error when the request itself is broken.
func workerRebuild(stdin io.Reader) (workerReply, int, error) {
	h, pack, err := readRequest(stdin)
	if err != nil {
		return workerReply{}, -1, err
	}
	opts := sealed.Options{AllowUnlocked: h.AllowUnlocked}
	keyFd, err := receiveKey()
	if err != nil {
		return workerReply{}, -1, err
	}
	keyBuf, err := sealed.MapReadOnly(keyFd, h.KeyLen, opts)
	if err != nil {
		return refusalReply(err), -1, nil
	}
	key, err := envelope.ParsePrivateKey(keyBuf.Bytes())
	keyBuf.Destroy() // unmaps only: the parent owns the key
	if err != nil {
		return workerReply{}, -1, errors.New("malformed key")
	}
	want, err := b64u.DecodeHash(h.ReportHashB64u)
	if err != nil {
		return workerReply{}, -1, errors.New("malformed report hash")
	}
	m, err := envelope.ParseManifest(h.Manifest)
	if err != nil {
		return refusalReply(err), -1, nil
	}
	opened, err := promptpack.OpenPack(pack, m, key, want, promptpack.OpenOptions{AllowUnlocked: h.AllowUnlocked})
	if err != nil {
		return refusalReply(err), -1, nil
	}
	defer opened.Destroy()
	rb, err := opened.Rebuild(h.Trusted)
	if err != nil {
		return refusalReply(err), -1, nil
	}
	defer rb.Wipe()
	if len(h.Admission) > 0 {
		// The policy was parsed by the parent at start-up; its canonical
		// form parses here too, or the request is broken.
		pol, err := admission.Parse(h.Admission)
		if err != nil {
			return workerReply{}, -1, errors.New("malformed admission policy")
		}
		if err := pol.AdmitRun(opened.Pack(), *h.Runtime); err != nil {
			return refusalReply(err), -1, nil
		}
	}
	toolsH, err := opened.Pack().ToolSchemasHash()
	if err != nil {
		return refusalReply(err), -1, nil
	}
	out, err := sealed.NewShareable(len(rb.Prompt), opts)
	if err != nil {
		return refusalReply(err), -1, nil
	}
	copy(out.Bytes(), rb.Prompt)
	fd, err := out.Fd()
	if err != nil {
		return workerReply{}, -1, err
	}
	return workerReply{
		OK: true, PromptBytes: len(rb.Prompt), PromptHashB64u: rb.PromptHashB64u(), ReportHashB64u: rb.ReportHashB64u(),
		PackID: rb.PackID, Chars: rb.Report.Final.SystemPromptChars, ToolSchemasHashB64u: toolsH,
	}, fd, nil
}

func readRequest(r io.Reader) (*workerHeader, []byte, error) {
	var prefix [4]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, nil, err
	}
	n := binary.BigEndian.Uint32(prefix[:])
	if n == 0 || n > maxHeader {
		return nil, nil, errors.New("bad header length")
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, nil, err
	}
	var h workerHeader
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil || dec.More() {
		return nil, nil, errors.New("malformed header")
	}
	if h.Version != 1 || h.PackLen < 1 || h.PackLen > maxWorkerPack || h.KeyLen < 1 || h.KeyLen > 4096 || (len(h.Admission) > 0) != (h.Runtime != nil) {
		return nil, nil, errors.New("bad header values")
	}
	pack := make([]byte, h.PackLen)
	if _, err := io.ReadFull(r, pack); err != nil {
		return nil, nil, err
	}
	return &h, pack, nil
}

func workerSend(rep workerReply, fd int) error {
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	return unix.Sendmsg(sockFD, b, oob, nil, 0)
}
