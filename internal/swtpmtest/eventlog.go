package swtpmtest

import (
	"fmt"
	"net"

	"github.com/google/go-eventlog/register"
	"github.com/google/go-eventlog/tcg"
	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
)

// evNoAction events extend no PCR.
const evNoAction = 0x00000003

// extendEventLog extends the SHA-256 PCRs 0..maxPCR of the swtpm with the
// SHA-256 digests of a TCG event log's events, in order, as firmware did
// when it wrote the log; the PCRs then replay from the log. Call it before
// another connection is open (swtpm serves one at a time).
func (in *Instance) extendEventLog(log []byte, maxPCR int) error {
	el, err := tcg.ParseEventLog(log, tcg.ParseOpts{})
	if err != nil {
		return err
	}
	conn, err := net.Dial("tcp", in.Addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	tp := transport.FromReadWriter(conn)
	for _, e := range el.Events(register.HashSHA256) {
		if int(e.Index) > maxPCR || uint32(e.Type) == evNoAction {
			continue
		}
		_, err := tpm2.PCRExtend{
			PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(e.Index), Auth: tpm2.PasswordAuth(nil)},
			Digests:   tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{HashAlg: tpm2.TPMAlgSHA256, Digest: e.Digest}}},
		}.Execute(tp)
		if err != nil {
			return fmt.Errorf("extend pcr %d: %w", e.Index, err)
		}
	}
	return nil
}
