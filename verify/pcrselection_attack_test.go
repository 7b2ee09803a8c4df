package verify

import (
	"context"
	"crypto/sha256"
	"net"
	"testing"

	"github.com/google/go-eventlog/register"
	"github.com/google/go-eventlog/tcg"
	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/clawea/attester/enclave/tpm"
	"github.com/clawea/attester/internal/swtpmtest"
	"github.com/clawea/attester/wire/tpmquote"
)

// TestTPMPCRSelectionAttack tries what an attacker who boots a trusted TPM
// machine into a tampered boot loader can do: the PCR digest (the TPM
// measurement) covers the quoted values, not which PCRs hold them, so the
// attacker replays the genuine PCR 4-7 events (public in any genuine
// evidence's event log) into PCRs 10-13, which nothing extended, and quotes
// PCRs 0-3 and 10-13. Their values hash to the genuine PCRs 0-7 digest
// while PCR 4 holds the tampered boot loader. measurements_b64u pins only
// that digest: the quote must be refused (policy/measurement), because its
// selection is not PCRs 0..n-1.
func TestTPMPCRSelectionAttack(t *testing.T) {
	in, log, _ := swtpmtest.StartWithBootLog(t)
	r := newRun(t)
	quote := func(pcrs []int) (att, jws []byte, akName []byte) {
		t.Helper()
		tp, err := tpm.Open(context.Background(), tpm.Options{Address: in.Addr, PCRs: pcrs})
		if err != nil {
			t.Fatal(err)
		}
		defer tp.Close()
		ak, err := tpmquote.ParsePublic(tp.AKPublic())
		if err != nil {
			t.Fatal(err)
		}
		att, jws = forge(t, forgeRun(t, tp, r))
		return att, jws, ak.Name()
	}
	verifyWith := func(att, jws, akName, measurement []byte) (*Result, error) {
		pol := &Policy{AllowSimulated: true, TrustedTPMAKs: [][]byte{akName}, Measurements: [][]byte{measurement}}
		return Verify(att, jws, nil, pol, Options{Now: fixedNow})
	}

	// The genuine boot, quoted with the default selection: its measurement
	// is what a trust-on-first-use policy pins.
	att, jws, akName := quote([]int{0, 1, 2, 3, 4, 5, 6, 7})
	pol := &Policy{AllowSimulated: true, AllowAnyMeasurement: true, TrustedTPMAKs: [][]byte{akName}}
	res, err := Verify(att, jws, nil, pol, Options{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	golden := res.Platform[0].Measurement
	if _, err := verifyWith(att, jws, akName, golden); err != nil {
		t.Fatalf("genuine boot refused: %v", err)
	}

	// The tampered boot: another boot loader measured into PCR 4, and the
	// genuine PCR 4-7 events replayed into PCRs 10-13.
	extendPCRs(t, in.Addr, log)
	att, jws, _ = quote([]int{0, 1, 2, 3, 4, 5, 6, 7})
	_, err = verifyWith(att, jws, akName, golden)
	wantErr(t, err, ErrPolicy, checkPolicy+"/measurement", "")
	// The replayed PCRs give the genuine digest; the selection gives it away.
	att, jws, _ = quote([]int{0, 1, 2, 3, 10, 11, 12, 13})
	_, err = verifyWith(att, jws, akName, golden)
	e := wantErr(t, err, ErrPolicy, checkPolicy+"/measurement", "")
	if e.Field != "measurements_b64u" {
		t.Fatalf("field %q", e.Field)
	}
}

// extendPCRs tampers with the swtpm's boot: PCR 4 gets another boot
// loader's digest, and PCRs 10-13 the genuine PCR 4-7 events of log.
func extendPCRs(t *testing.T, addr string, log []byte) {
	t.Helper()
	el, err := tcg.ParseEventLog(log, tcg.ParseOpts{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tp := transport.FromReadWriter(conn)
	extend := func(pcr int, d []byte) {
		_, err := tpm2.PCRExtend{
			PCRHandle: tpm2.AuthHandle{Handle: tpm2.TPMHandle(pcr), Auth: tpm2.PasswordAuth(nil)},
			Digests:   tpm2.TPMLDigestValues{Digests: []tpm2.TPMTHA{{HashAlg: tpm2.TPMAlgSHA256, Digest: d}}},
		}.Execute(tp)
		if err != nil {
			t.Fatalf("extend pcr %d: %v", pcr, err)
		}
	}
	bad := sha256.Sum256([]byte("a tampered boot loader"))
	extend(4, bad[:])
	for _, e := range el.Events(register.HashSHA256) {
		if e.Index >= 4 && e.Index <= 7 && uint32(e.Type) != 0x3 {
			extend(int(e.Index)+6, e.Digest)
		}
	}
}
