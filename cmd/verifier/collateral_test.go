package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/internal/testfixture"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/earresult"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
)

func simCRL(t *testing.T, revoked ...*big.Int) []byte {
	t.Helper()
	return testfixture.SimSEVCRL(t, testfixture.Now.Add(-24*time.Hour), testfixture.Now.Add(24*time.Hour), revoked...)
}

// The collateral directory is reloaded like the policies: a CRL that
// appears makes revocation checkable, a CRL that revokes the VCEK makes the
// same request fail even though its chain is cached, and a collateral
// directory that does not load keeps the previous one.
func TestCollateralReload(t *testing.T) {
	f := fixtureAt(t)
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	if err := os.WriteFile(policy, []byte(fmt.Sprintf(`{"policy_version":%q,"allow_simulated":true,"measurements_b64u":[%q]}`,
		verify.PolicyVersion, b64u.Encode(f.measurement))), 0o644); err != nil {
		t.Fatal(err)
	}
	coll := filepath.Join(dir, "collateral")
	crlDir := filepath.Join(coll, platform.CollateralFiles().SEVSNPCRLDir)
	if err := os.MkdirAll(crlDir, 0o755); err != nil {
		t.Fatal(err)
	}
	keyPath, _ := earKey(t, dir)
	raw, _ := os.ReadFile(keyPath)
	signer, err := earresult.ParseSigningKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, f: f, logs: &bytes.Buffer{}}
	e.svc, err = NewService(Config{Sources: sources{PolicyFile: policy, CollateralDir: coll}, Signer: signer, Version: "test",
		Now: func() time.Time { return testfixture.Now }, Log: slog.New(slog.NewJSONHandler(e.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.h = e.svc.Handler()
	verdict := func() string { return e.post(f.body("", true)).out.Verdict }
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write := func(name string, b []byte) {
		t.Helper()
		p := filepath.Join(crlDir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		tick = tick.Add(time.Second)
		if err := os.Chtimes(p, tick, tick); err != nil {
			t.Fatal(err)
		}
		if changed, err := e.svc.Reload(); !changed || err != nil {
			t.Fatalf("reload: %v %v", changed, err)
		}
	}

	// No CRL: revocation cannot be checked under this policy.
	if v := verdict(); v != verify.VerdictCannotCheck {
		t.Fatal(v)
	}
	write("ark.crl", simCRL(t, big.NewInt(424242)))
	r := e.post(f.body("", true))
	if r.out.Verdict != verify.VerdictVerified || !bytes.Contains(r.out.Result, []byte(`"revocation":"checked"`)) {
		t.Fatalf("%s", r.raw)
	}
	if v := verdict(); v != verify.VerdictVerified { // now from the cache
		t.Fatal(v)
	}
	// The CRL now revokes the VCEK: the cached chain is not used.
	q, err := sim.New(sim.Options{Seed: []byte("verifier-test")})
	if err != nil {
		t.Fatal(err)
	}
	rd, err := evidence.NewReportData([32]byte{}, testfixture.Key(1).Public().(ed25519.PublicKey), nil)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := q.Quote(t.Context(), rd) // any REPORT_DATA: the same machine, the same VCEK
	if err != nil {
		t.Fatal(err)
	}
	vcek, err := x509.ParseCertificate(ev.CertChain[0])
	if err != nil {
		t.Fatal(err)
	}
	write("ark.crl", simCRL(t, vcek.SerialNumber))
	if v := verdict(); v != verify.VerdictRejected {
		t.Fatal(v)
	}
	// A collateral file over the limit: the reload fails, the revoking CRL
	// stays in force.
	write2 := filepath.Join(crlDir, "huge.crl")
	if err := os.WriteFile(write2, make([]byte, platform.MaxCollateralFile+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if changed, err := e.svc.Reload(); changed || err == nil {
		t.Fatalf("bad collateral reload: %v %v", changed, err)
	}
	if v := verdict(); v != verify.VerdictRejected {
		t.Fatal(v)
	}
	if m := readyz(t, e.h); m["config_stale"] != true {
		t.Fatalf("readyz %v", m)
	}
}
