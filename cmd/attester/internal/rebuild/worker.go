package rebuild

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
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/sealed"
)

// maxPack bounds the ciphertext the worker reads (the attester's own
// configuration bound is lower).
const maxPack = 256 << 20

// errNotWorker: the process was not started by a Runner.
var errNotWorker = errors.New("rebuild: " + WorkerArg + " is internal to the attester and is started only by it")

// IsWorker reports whether args (without the program name) ask for the
// worker mode. The attester's main and test binaries call Main then.
func IsWorker(args []string) bool { return len(args) == 1 && args[0] == WorkerArg }

// Main is the worker: it answers one Request received as described in the
// package comment and returns the exit code. It refuses to run (exit 2,
// one line on stderr) unless the environment and descriptors are those a
// Runner sets up. It never writes plaintext anywhere but into the sealed
// buffer it hands over.
func Main(stdin io.Reader, stderr io.Writer) int {
	if err := checkWorkerEnv(); err != nil {
		fmt.Fprintln(stderr, "attester:", err)
		return 2
	}
	// Same hardening as the service: no core dump, no ptrace by peers.
	if err := sealed.HardenProcess(); err != nil {
		return 3
	}
	rep, fd := work(stdin)
	if err := send(rep, fd); err != nil {
		return 3
	}
	// The prompt buffer (if any) now belongs to the parent: it is not
	// destroyed here, which would zero the parent's copy. Exiting unmaps
	// it; everything else this process held dies with it.
	return 0
}

func checkWorkerEnv() error {
	if os.Getenv(WorkerEnv) != workerEnvValue {
		return errNotWorker
	}
	typ, err := unix.GetsockoptInt(replyFD, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || typ != unix.SOCK_SEQPACKET {
		return errNotWorker
	}
	if _, err := unix.FcntlInt(keyFD, unix.F_GETFD, 0); err != nil {
		return errNotWorker
	}
	return nil
}

// work opens and rebuilds; it returns the reply and the descriptor of the
// prompt buffer (or -1).
func work(stdin io.Reader) (reply, int) {
	h, pack, err := readRequest(stdin)
	if err != nil {
		return reply{Code: "invalid"}, -1
	}
	opts := sealed.Options{AllowUnlocked: h.AllowUnlocked}
	keyBuf, err := sealed.MapReadOnly(keyFD, h.KeyLen, opts)
	if err != nil {
		return refusalReply(err), -1
	}
	key, err := envelope.ParsePrivateKey(keyBuf.Bytes())
	keyBuf.Destroy() // unmaps only: the parent owns the key
	if err != nil {
		return reply{Code: "invalid"}, -1
	}
	want, err := b64u.DecodeHash(h.ReportHashB64u)
	if err != nil {
		return reply{Code: "invalid"}, -1
	}
	m, err := envelope.ParseManifest(h.Manifest)
	if err != nil {
		return refusalReply(err), -1
	}
	opened, err := promptpack.OpenPack(pack, m, key, want, promptpack.OpenOptions{AllowUnlocked: h.AllowUnlocked})
	if err != nil {
		return refusalReply(err), -1
	}
	defer opened.Destroy()
	rb, err := opened.Rebuild(h.Trusted)
	if err != nil {
		return refusalReply(err), -1
	}
	defer rb.Wipe()
	out, err := sealed.NewShareable(len(rb.Prompt), opts)
	if err != nil {
		return refusalReply(err), -1
	}
	copy(out.Bytes(), rb.Prompt)
	fd, err := out.Fd()
	if err != nil {
		return reply{Code: "invalid"}, -1
	}
	return reply{
		OK: true, PromptBytes: len(rb.Prompt), PromptHashB64u: rb.PromptHashB64u(), ReportHashB64u: rb.ReportHashB64u(),
		PackID: rb.PackID, Chars: rb.Report.Final.SystemPromptChars,
	}, fd
}

func readRequest(r io.Reader) (*header, []byte, error) {
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
	var h header
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil || dec.More() {
		return nil, nil, errors.New("malformed header")
	}
	if h.Version != 1 || h.PackLen < 1 || h.PackLen > maxPack || h.KeyLen < 1 || h.KeyLen > 4096 {
		return nil, nil, errors.New("bad header values")
	}
	pack := make([]byte, h.PackLen)
	if _, err := io.ReadFull(r, pack); err != nil {
		return nil, nil, err
	}
	return &h, pack, nil
}

func send(rep reply, fd int) error {
	b, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	return unix.Sendmsg(replyFD, b, oob, nil, 0)
}
