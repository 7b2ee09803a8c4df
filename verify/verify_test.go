package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/attestation"
	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/didkey"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/evidencedoc"
)

// did is the did:key of k's public key.
func did(k ed25519.PrivateKey) string { return didkey.Format(k.Public().(ed25519.PublicKey)) }

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// wantErr checks the class, the check name (exact, or a prefix ending in
// "/") and, when code is set, the PoH code.
func wantErr(t *testing.T, err error, class error, check string, code poh.Code) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("verified, want %v at %s", class, check)
	}
	e, ok := errors.AsType[*Error](err)
	if !ok {
		t.Fatalf("error %v is not a *verify.Error", err)
	}
	if !errors.Is(err, class) {
		t.Fatalf("error %v: want class %v", err, class)
	}
	if strings.HasSuffix(check, "/") {
		if !strings.HasPrefix(e.Check, check) {
			t.Fatalf("error %v: check %q, want prefix %q", err, e.Check, check)
		}
	} else if e.Check != check {
		t.Fatalf("error %v: check %q, want %q", err, e.Check, check)
	}
	if code != "" && !errors.Is(err, code) {
		t.Fatalf("error %v: want PoH code %s", err, code)
	}
	return e
}

func platforms(t *testing.T) map[string]func() measurer {
	return map[string]func() measurer{
		"sev-snp": func() measurer { return simSEV(t, sim.Options{}) },
		"tdx":     func() measurer { return simTDX(t, fakeqe.Options{}) },
	}
}

func TestSimulatedPlatformsVerify(t *testing.T) {
	for name, q := range platforms(t) {
		t.Run(name, func(t *testing.T) {
			f := attest(t, q(), newRun(t))
			res, err := Verify(f.att, f.ev, f.bundle, f.simPolicy(), f.opts())
			if err != nil {
				t.Fatal(err)
			}
			if !res.Simulated || res.RunID != f.run.RunID || res.AgentDID != f.run.AgentDID() || res.AttesterDID != did(attesterKey()) {
				t.Fatalf("result %+v", res)
			}
			if res.Evidence[0].Platform != name || res.Bundle == nil || res.Bundle.ToolCalls != 2 || res.Audit == nil || res.Audit.ToolCallsMatched != 2 || res.Report == nil {
				t.Fatalf("result %+v", res)
			}
			if !strings.HasSuffix(res.TEE.RootID, ":SIMULATED") || res.Commitments.GateAuditCount != 3 {
				t.Fatalf("tee %+v", res.TEE)
			}
			for _, c := range []string{checkEnvelope, checkNonceBinding, checkBundle, checkPromptCommit, checkEvidenceRef, checkEvidenceDocument, checkPlatform, checkReportData, checkTEEClaims, checkAuditLog, checkToolCalls, checkReport, checkPolicy} {
				if !hasCheck(res, c, StatusPassed) {
					t.Errorf("check %s not passed: %+v", c, res.Checks)
				}
			}
			if !hasCheck(res, checkRevocation, StatusSkipped) || len(res.Warnings) == 0 {
				t.Errorf("revocation should be reported skipped with a warning: %+v %v", res.Checks, res.Warnings)
			}

			// Refused without the allowance, as policy.
			p := f.simPolicy()
			p.AllowSimulated = false
			_, err = Verify(f.att, f.ev, f.bundle, p, f.opts())
			e := wantErr(t, err, ErrPolicy, "policy/simulated", "")
			if !errors.Is(err, platform.ErrSimulated) || len(e.Passed) == 0 {
				t.Fatalf("error %v, passed %v", err, e.Passed)
			}
			// The Options allowance works as well as the policy's.
			o := f.opts()
			o.AllowSimulated = true
			if _, err := Verify(f.att, f.ev, f.bundle, p, o); err != nil {
				t.Fatal(err)
			}
			// Strict revocation by default.
			p = f.simPolicy()
			p.AllowUncheckedRevocation = false
			_, err = Verify(f.att, f.ev, f.bundle, p, f.opts())
			wantErr(t, err, ErrCannotCheck, "platform/", poh.DependencyNotConfigured)
		})
	}
}

func hasCheck(r *Result, name string, s Status) bool {
	for _, c := range r.Checks {
		if c.Name == name && c.Status == s {
			return true
		}
	}
	return false
}

func TestOptionalInputsSkipped(t *testing.T) {
	f := attest(t, simSEV(t, sim.Options{}), newRun(t))
	res, err := Verify(f.att, f.ev, nil, f.simPolicy(), Options{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{checkBundle, checkAuditLog, checkToolCalls, checkReport} {
		if !hasCheck(res, c, StatusSkipped) {
			t.Errorf("%s not skipped: %+v", c, res.Checks)
		}
	}
	// Audit log without bundle: root/count checked, tool calls skipped.
	res, err = Verify(f.att, f.ev, nil, f.simPolicy(), Options{Now: fixedNow, AuditLog: f.audit})
	if err != nil {
		t.Fatal(err)
	}
	if !hasCheck(res, checkAuditLog, StatusPassed) || !hasCheck(res, checkToolCalls, StatusSkipped) {
		t.Errorf("checks %+v", res.Checks)
	}
}

func TestUsage(t *testing.T) {
	f := attest(t, simSEV(t, sim.Options{}), newRun(t))
	_, err := Verify(f.att, f.ev, nil, f.simPolicy(), Options{})
	wantErr(t, err, ErrUsage, checkInput, "")
	_, err = Verify(nil, f.ev, nil, nil, Options{Now: fixedNow})
	wantErr(t, err, ErrUsage, checkInput, "")
	_, err = Verify(f.att, nil, nil, nil, Options{Now: fixedNow})
	wantErr(t, err, ErrUsage, checkInput, "")
	_, err = Verify(f.att, f.ev, []byte{}, nil, Options{Now: fixedNow})
	wantErr(t, err, ErrUsage, checkInput, "")
	_, err = Verify(bytes.Repeat([]byte{' '}, maxAttestationBytes+1), f.ev, nil, nil, Options{Now: fixedNow})
	wantErr(t, err, ErrRejected, checkInput, poh.MalformedEnvelope)
}

// replaceOnce replaces exactly one occurrence of old.
func replaceOnce(t *testing.T, b []byte, old, new string) []byte {
	t.Helper()
	if bytes.Count(b, []byte(old)) < 1 {
		t.Fatalf("%q not found", old)
	}
	return bytes.Replace(b, []byte(old), []byte(new), 1)
}

func field(t *testing.T, env []byte, key string) string {
	t.Helper()
	v, err := pohjson.Parse(env)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := v.GetString(key)
	return s
}

func flip(s string) string {
	b := []byte(s)
	if b[5] == 'A' {
		b[5] = 'B'
	} else {
		b[5] = 'A'
	}
	return string(b)
}

func TestEnvelopeTampering(t *testing.T) {
	f := attest(t, simSEV(t, sim.Options{}), newRun(t))
	sig := field(t, f.att, "signature_b64u")
	ph := field(t, f.att, "payload_hash_b64u")
	for _, tc := range []struct {
		name  string
		att   []byte
		check string
		code  poh.Code
	}{
		{"payload field", replaceOnce(t, f.att, `"run_id":"run_verify_001"`, `"run_id":"run_verify_002"`), checkEnvelope, poh.HashMismatch},
		{"payload measurement", replaceOnce(t, f.att, `"tee_execution"`, `"tee_executiom"`), checkEnvelope, ""},
		{"signature", replaceOnce(t, f.att, sig, flip(sig)), checkEnvelope, poh.SignatureInvalid},
		{"payload hash", replaceOnce(t, f.att, ph, flip(ph)), checkEnvelope, poh.HashMismatch},
		{"version", replaceOnce(t, f.att, `"envelope_version":"1"`, `"envelope_version":"2"`), checkEnvelope, poh.UnknownEnvelopeVersion},
		{"type", replaceOnce(t, f.att, `"envelope_type":"execution_attestation"`, `"envelope_type":"proof_bundle"`), checkEnvelope, poh.UnknownEnvelopeType},
		{"truncated", f.att[:len(f.att)/2], checkEnvelope, poh.MalformedEnvelope},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(tc.att, f.ev, f.bundle, f.simPolicy(), f.opts())
			wantErr(t, err, ErrRejected, tc.check, tc.code)
		})
	}
}

func TestEvidenceFailures(t *testing.T) {
	r := newRun(t)
	sev := simSEV(t, sim.Options{})
	f := attest(t, sev, r)
	pol := f.simPolicy()
	opts := Options{Now: fixedNow}

	t.Run("evidence_ref mismatch", func(t *testing.T) {
		other := attest(t, sev, r)
		_, err := Verify(f.att, other.ev, nil, pol, opts)
		wantErr(t, err, ErrRejected, checkEvidenceRef, poh.HashMismatch)
	})
	t.Run("evidence jws tampered", func(t *testing.T) {
		spec := forgeRun(t, sev, r)
		spec.mutateJWS = func(b []byte) []byte {
			i := bytes.LastIndexByte(b, '.')
			b[i-3] ^= 1 // a payload character, still b64u
			if b[i-3] == '.' || b[i-3] == '/' || b[i-3] == '+' {
				b[i-3] ^= 2
			}
			return b
		}
		att, jws := forge(t, spec)
		_, err := Verify(att, jws, nil, pol, opts)
		wantErr(t, err, ErrRejected, checkEvidenceDocument, "")
	})
	t.Run("wrong attester key", func(t *testing.T) {
		spec := forgeRun(t, sev, r)
		spec.docKey = key(10)
		att, jws := forge(t, spec)
		_, err := Verify(att, jws, nil, pol, opts)
		wantErr(t, err, ErrRejected, checkEvidenceDocument, poh.SignatureInvalid)
	})
	t.Run("wrong binding: report data for another key", func(t *testing.T) {
		spec := forgeRun(t, sev, r)
		spec.rdKey = key(10).Public().(ed25519.PublicKey)
		att, jws := forge(t, spec)
		_, err := Verify(att, jws, nil, pol, opts)
		wantErr(t, err, ErrRejected, checkReportData, poh.EvidenceMismatch)
		if !errors.Is(err, platform.ErrReportData) {
			t.Fatal(err)
		}
	})
	t.Run("forged control: consistent forge verifies", func(t *testing.T) {
		att, jws := forge(t, forgeRun(t, sev, r))
		if _, err := Verify(att, jws, r.bundle(t), pol, opts); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("sev simulated evidence claiming real: wrong root", func(t *testing.T) {
		spec := forgeRun(t, sev, r)
		spec.mutateEvidence = func(ev *evidence.Evidence) { ev.Simulated = false }
		att, jws := forge(t, spec)
		_, err := Verify(att, jws, nil, pol, opts)
		wantErr(t, err, ErrRejected, "platform/", "")
	})
	t.Run("tdx wrong root", func(t *testing.T) {
		hier, err := fakeqe.NewHierarchy("another hierarchy")
		if err != nil {
			t.Fatal(err)
		}
		att, jws := forge(t, forgeRun(t, simTDX(t, fakeqe.Options{Hierarchy: hier}), r))
		_, err = Verify(att, jws, nil, pol, opts)
		wantErr(t, err, ErrRejected, "platform/root", poh.SignatureInvalid)
		if !errors.Is(err, platform.ErrUntrustedRoot) {
			t.Fatal(err)
		}
	})
	t.Run("missing chain", func(t *testing.T) {
		spec := forgeRun(t, sev, r)
		spec.mutateEvidence = func(ev *evidence.Evidence) { ev.CertChain = nil; ev.Aux = nil }
		att, jws := forge(t, spec)
		_, err := Verify(att, jws, nil, pol, opts)
		wantErr(t, err, ErrRejected, "platform/", "")
	})
	for _, tc := range []struct {
		name   string
		mutate func(*poh.ExecutionAttestation)
		check  string
	}{
		{"tee claims differ", func(p *poh.ExecutionAttestation) { p.RuntimeMetadata.TEE.TCBVersion = "ffffffffffffffff" }, checkTEEClaims},
		{"nonce binding differs", func(p *poh.ExecutionAttestation) { p.RuntimeMetadata.TEE.NonceBindingB64u = h("x") }, checkNonceBinding},
		{"metadata differs from evidence context", func(p *poh.ExecutionAttestation) {
			m := p.Metadata["clawea"].(evidencedoc.Metadata)
			m.GatePolicyHashB64u = h("another gate policy")
			p.Metadata["clawea"] = m
		}, checkExecutionContext},
		{"model digest differs from the committed model identity", func(p *poh.ExecutionAttestation) {
			p.RuntimeMetadata.TEE.Measurements.ModelWeightsDigestB64u = h("another model")
		}, checkModelIdentity},
		{"simulated label lies", func(p *poh.ExecutionAttestation) {
			m := p.Metadata["clawea"].(evidencedoc.Metadata)
			m.Simulated = false
			p.Metadata["clawea"] = m
		}, checkExecutionContext},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := forgeRun(t, sev, r)
			spec.mutatePayload = tc.mutate
			att, jws := forge(t, spec)
			_, err := Verify(att, jws, nil, pol, opts)
			wantErr(t, err, ErrRejected, tc.check, poh.EvidenceMismatch)
		})
	}
	t.Run("v1 forbidden members", func(t *testing.T) {
		for name, m := range map[string]func(*poh.ExecutionAttestation){
			"tcb":            func(p *poh.ExecutionAttestation) { p.RuntimeMetadata.TEE.TCB = &poh.TCB{Status: "UpToDate"} },
			"runtime digest": func(p *poh.ExecutionAttestation) { p.RuntimeMetadata.TEE.Measurements.RuntimeDigestB64u = h("x") },
			"expires_at":     func(p *poh.ExecutionAttestation) { p.ExpiresAt = "2030-01-01T00:00:00.000Z" },
			"no model digest": func(p *poh.ExecutionAttestation) {
				p.RuntimeMetadata.TEE.Measurements.ModelWeightsDigestB64u = ""
			},
			"no run id": func(p *poh.ExecutionAttestation) { p.RunID = "" },
		} {
			spec := forgeRun(t, sev, r)
			spec.mutatePayload = m
			att, jws := forge(t, spec)
			_, err := Verify(att, jws, nil, pol, opts)
			if err == nil {
				t.Fatalf("%s: verified", name)
			}
			if !errors.Is(err, ErrRejected) {
				t.Fatalf("%s: %v", name, err)
			}
		}
	})
}

func TestBundleLinkage(t *testing.T) {
	sev := simSEV(t, sim.Options{})
	r := newRun(t)
	f := attest(t, sev, r)
	pol := f.simPolicy()
	opts := Options{Now: fixedNow}
	// forged verifies an attestation forged over r changed by change.
	forged := func(t *testing.T, change func(*run)) error {
		t.Helper()
		r2 := *r
		change(&r2)
		att, jws := forge(t, forgeRun(t, sev, &r2))
		_, err := Verify(att, jws, r2.bundle(t), pol, opts)
		return err
	}

	t.Run("stale nonce: another bundle of the run", func(t *testing.T) {
		r2 := *r
		r2.Events = append(r2.Events, "run_end")
		_, err := Verify(f.att, f.ev, r2.bundle(t), pol, opts)
		wantErr(t, err, ErrRejected, checkBundleLinkage, poh.EvidenceMismatch)
	})
	t.Run("bundle of another run", func(t *testing.T) {
		r2 := *r
		r2.BundleRunID = "run_other"
		spec := forgeRun(t, sev, &r2)
		spec.runID = r.RunID
		att, jws := forge(t, spec)
		_, err := Verify(att, jws, spec.bundle, pol, opts)
		wantErr(t, err, ErrRejected, checkBundleLinkage, poh.EvidenceMismatch)
	})
	t.Run("bundle of another agent", func(t *testing.T) {
		r2 := *r
		r2.AgentKey = key(2)
		spec := forgeRun(t, sev, &r2)
		spec.agentDID = r.AgentDID()
		att, jws := forge(t, spec)
		_, err := Verify(att, jws, spec.bundle, pol, opts)
		wantErr(t, err, ErrRejected, checkBundleLinkage, poh.EvidenceMismatch)
	})
	// issue 13: a bundle whose chain does not start with the run's
	// prompt_committed event (the attester refuses to sign it; a forged
	// attestation must still fail).
	t.Run("chain does not start with prompt_committed", func(t *testing.T) {
		err := forged(t, func(r2 *run) { r2.FirstEvent = "llm_call" })
		if e := wantErr(t, err, ErrRejected, checkPromptCommit, poh.PromptCommitmentMismatch); !strings.Contains(e.Error(), "payload.event_chain[0]:") {
			t.Fatalf("error %v does not name payload.event_chain[0]", e)
		}
	})
	t.Run("prompt_committed commits to another prompt", func(t *testing.T) {
		err := forged(t, func(r2 *run) { r2.FirstPayload = h("another commitment") })
		if e := wantErr(t, err, ErrRejected, checkPromptCommit, poh.PromptCommitmentMismatch); !strings.Contains(e.Error(), "payload.event_chain[0].payload_hash_b64u") {
			t.Fatalf("error %v does not name payload.event_chain[0].payload_hash_b64u", e)
		}
	})
	t.Run("report hash commitment mismatch", func(t *testing.T) {
		err := forged(t, func(r2 *run) { r2.BundleReport = h("another report") })
		wantErr(t, err, ErrRejected, checkPromptCommit, poh.PromptCommitmentMismatch)
	})
	t.Run("call prompt mismatch", func(t *testing.T) {
		err := forged(t, func(r2 *run) { r2.CallPromptHashes = []string{h("another prompt"), h("another prompt")} })
		wantErr(t, err, ErrRejected, checkPromptCommit, poh.PromptCommitmentMismatch)
	})
	// issue 10: an OpenClaw bundle must state, per llm_call, the system
	// text sent against the attested prompt.
	t.Run("OpenClaw bundle without clawea_llm_calls", func(t *testing.T) {
		err := forged(t, func(r2 *run) { r2.OmitLLMCalls = true })
		if e := wantErr(t, err, ErrRejected, checkPromptCommit, poh.MissingRequiredField); !strings.Contains(e.Error(), "payload.metadata.clawea_llm_calls") {
			t.Fatalf("error %v does not name payload.metadata.clawea_llm_calls", e)
		}
	})
	t.Run("llm_call whose system text does not start with the prompt", func(t *testing.T) {
		err := forged(t, func(r2 *run) { r2.NotPrefix = true })
		if e := wantErr(t, err, ErrRejected, checkPromptCommit, poh.PromptCommitmentMismatch); !strings.Contains(e.Error(), "payload.metadata.clawea_llm_calls[0].attested_prefix") {
			t.Fatalf("error %v does not name the attested_prefix", e)
		}
	})
	t.Run("tampered bundle", func(t *testing.T) {
		b := replaceOnce(t, f.bundle, `"bundle_verify_001"`, `"bundle_verify_002"`)
		_, err := Verify(f.att, f.ev, b, pol, opts)
		wantErr(t, err, ErrRejected, checkBundle, poh.HashMismatch)
	})
}

func TestAuditLog(t *testing.T) {
	sev := simSEV(t, sim.Options{})
	r := newRun(t)
	f := attest(t, sev, r)
	pol := f.simPolicy()

	t.Run("tampered", func(t *testing.T) {
		log := replaceOnce(t, f.audit, `"decision":"deny"`, `"decision":"allow"`)
		_, err := Verify(f.att, f.ev, f.bundle, pol, Options{Now: fixedNow, AuditLog: log})
		wantErr(t, err, ErrRejected, checkAuditLog, poh.HashMismatch)
	})
	t.Run("record removed", func(t *testing.T) {
		lines := bytes.SplitAfter(f.audit, []byte("\n"))
		log := bytes.Join(append(lines[:1:1], lines[2:]...), nil)
		_, err := Verify(f.att, f.ev, f.bundle, pol, Options{Now: fixedNow, AuditLog: log})
		wantErr(t, err, ErrRejected, checkAuditLog, poh.HashChainBreak)
	})
	t.Run("count mismatch: log cut after a record", func(t *testing.T) {
		lines := bytes.SplitAfter(f.audit, []byte("\n"))
		log := bytes.Join(lines[:2], nil)
		_, err := Verify(f.att, f.ev, f.bundle, pol, Options{Now: fixedNow, AuditLog: log})
		wantErr(t, err, ErrRejected, checkAuditLog, poh.EvidenceMismatch)
	})
	// toolCallsRefused forges run r2 committing to the audit log of logOf
	// and requires the tool-calls check to refuse it.
	toolCallsRefused := func(t *testing.T, r2, logOf *run) {
		t.Helper()
		log, root, count := logOf.auditLog(t)
		spec := forgeRun(t, sev, r2)
		spec.auditRoot, spec.auditCount = root, int64(count)
		att, jws := forge(t, spec)
		_, err := Verify(att, jws, spec.bundle, pol, Options{Now: fixedNow, AuditLog: log})
		wantErr(t, err, ErrRejected, checkToolCalls, poh.EvidenceMismatch)
	}
	t.Run("tool_call without allow", func(t *testing.T) {
		r2 := *r
		r2.denySecond = true
		toolCallsRefused(t, &r2, &r2)
	})
	t.Run("order is preserved", func(t *testing.T) {
		r2 := *r
		r2.ToolParams = []string{r.ToolParams[1], r.ToolParams[0]} // events in the other order
		toolCallsRefused(t, &r2, r)
	})
}

func TestPolicy(t *testing.T) {
	f := attest(t, simSEV(t, sim.Options{}), newRun(t))
	for _, tc := range []struct {
		name  string
		mod   func(p *Policy)
		opts  func(o *Options)
		class error
		check string
	}{
		{"no measurement accepted", func(p *Policy) { p.Measurements = nil }, nil, ErrPolicy, "policy/measurement"},
		{"another measurement", func(p *Policy) { p.Measurements = [][]byte{bytes.Repeat([]byte{1}, 48)} }, nil, ErrPolicy, "policy/measurement"},
		{"untrusted attester", func(p *Policy) { p.TrustedAttesterDIDs = []string{did(key(3))} }, nil, ErrPolicy, "policy/attester"},
		{"prompt hash", func(p *Policy) { p.ExpectedPromptHashB64u = h("x") }, nil, ErrPolicy, "policy/prompt-hash"},
		{"report hash", func(p *Policy) { p.ExpectedReportHashB64u = h("x") }, nil, ErrPolicy, "policy/report-hash"},
		{"gate policy", func(p *Policy) { p.ExpectedGatePolicyHashB64u = h("x") }, nil, ErrPolicy, "policy/gate-policy"},
		{"model", func(p *Policy) { p.ExpectedModel = &ModelIdentity{Provider: "anthropic", Model: "other"} }, nil, ErrPolicy, "policy/model"},
		{"sev tcb", func(p *Policy) { p.MinSEVSNPTCB = 0xffffffffffffffff }, nil, ErrPolicy, "policy/guest-policy"},
		{"recipe", func(p *Policy) { p.TrustedRecipes = []Recipe{{ID: "other", Version: "1"}} }, nil, ErrPolicy, "policy/recipe"},
		{"template", func(p *Policy) { p.TrustedTemplates = map[string]string{"AGENTS.md": "sha256:" + hexSHA("x")} }, nil, ErrPolicy, "policy/templates"},
		{"templates without report", func(p *Policy) { p.TrustedTemplates = map[string]string{"AGENTS.md": "sha256:" + hexSHA("x")} },
			func(o *Options) { o.Report = nil }, ErrCannotCheck, "policy/templates"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.simPolicy()
			tc.mod(p)
			o := f.opts()
			if tc.opts != nil {
				tc.opts(&o)
			}
			_, err := Verify(f.att, f.ev, f.bundle, p, o)
			wantErr(t, err, tc.class, tc.check, "")
		})
	}
	// Everything pinned right verifies.
	p := f.simPolicy()
	c := f.run
	p.TrustedAttesterDIDs = []string{did(attesterKey())}
	p.ExpectedPromptHashB64u, p.ExpectedReportHashB64u, p.ExpectedGatePolicyHashB64u = c.PromptHash, c.ReportHash, h("gate policy")
	p.ExpectedModel = &ModelIdentity{Provider: "anthropic", Model: "claude-opus-4-6"}
	p.TrustedRecipes = []Recipe{{ID: "openclaw-sig", Version: "1"}}
	p.TrustedTemplates = map[string]string{"AGENTS.md": "sha256:" + hexSHA("agents template")}
	if _, err := Verify(f.att, f.ev, f.bundle, p, f.opts()); err != nil {
		t.Fatal(err)
	}
	// A report that is not the committed one.
	o := f.opts()
	o.Report = bytes.Replace(o.Report, []byte(`"full"`), []byte(`"minimal"`), 1)
	_, err := Verify(f.att, f.ev, f.bundle, p, o)
	wantErr(t, err, ErrRejected, checkReport, poh.PromptCommitmentMismatch)
	// Reports the schema refuses: not JSON, a repeated member, a fraction
	// where a count goes, a v1 report labelled v2.
	for name, rep := range map[string][]byte{
		"not json":          []byte(`{"report_version":`),
		"repeated member":   bytes.Replace(f.report, []byte(`"prompt_mode":"full"`), []byte(`"prompt_mode":"full","prompt_mode":"full"`), 1),
		"fraction":          bytes.Replace(f.report, []byte(`"system_prompt_chars":`), []byte(`"system_prompt_chars":0.5,"x":`), 1),
		"v1 labelled as v2": bytes.Replace(f.report, []byte(`"report_version":"1"`), []byte(`"report_version":"2"`), 1),
	} {
		if bytes.Equal(rep, f.report) {
			t.Fatalf("%s: the fixture's report did not change", name)
		}
		o := f.opts()
		o.Report = rep
		_, err := Verify(f.att, f.ev, f.bundle, p, o)
		t.Run(name, func(t *testing.T) { wantErr(t, err, ErrRejected, checkReport, poh.SchemaValidationFailed) })
	}

	// A debug guest is refused.
	fd := attest(t, simSEV(t, sim.Options{Debug: true}), newRun(t))
	_, err = Verify(fd.att, fd.ev, fd.bundle, fd.simPolicy(), fd.opts())
	wantErr(t, err, ErrPolicy, "policy/", "")
}

// TestPoHVectorsThroughBundlePath runs the PoH conformance bundles through
// Verify with an attestation over each: the failing vectors fail with
// their reason code at the bundle check; the passing one passes the PoH
// checks and is then refused at the prompt commitments: its chain does not
// start with a clawea run's prompt_committed event (and it carries no
// clawea metadata).
func TestPoHVectorsThroughBundlePath(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "conformance", "poh", "vectors")
	index, err := os.ReadFile(filepath.Join(dir, "INDEX.tsv"))
	if err != nil {
		citest.SkipOrFail(t, "shared conformance data not present: %v", err)
	}
	sev := simSEV(t, sim.Options{})
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(index)), "\n")[1:] {
		cols := strings.Split(line, "\t")
		if len(cols) != 3 {
			t.Fatalf("bad index line %q", line)
		}
		raw := testfile.Read(t, filepath.Join(dir, cols[0]))
		t.Run(cols[0], func(t *testing.T) {
			v, err := pohjson.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			agent, _ := v.Get("payload").GetString("agent_did")
			runID := "run_conformance_001"
			att, jws := forge(t, forgeSpec{quoter: sev, agentDID: agent, runID: runID, bundle: raw})
			pol := &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowAnyMeasurement: true}
			_, err = Verify(att, jws, raw, pol, Options{Now: fixedNow})
			if cols[1] == "true" {
				e := wantErr(t, err, ErrRejected, checkPromptCommit, poh.PromptCommitmentMismatch)
				if !containsStr(e.Passed, checkBundle) || !containsStr(e.Passed, checkBundleLinkage) {
					t.Fatalf("passed %v", e.Passed)
				}
				return
			}
			wantErr(t, err, ErrRejected, checkBundle, poh.Code(cols[2]))
		})
		n++
	}
	if n < 6 {
		t.Fatalf("only %d vectors", n)
	}
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestPolicyRefusalNamesValueAndField checks that a refusal by policy names
// the value seen and the policy member that refused it (issue 12).
func TestPolicyRefusalNamesValueAndField(t *testing.T) {
	f := attest(t, simSEV(t, sim.Options{}), newRun(t))
	ok, err := Verify(f.att, f.ev, f.bundle, f.simPolicy(), f.opts())
	if err != nil {
		t.Fatal(err)
	}
	seenMeasurement := ok.Evidence[0].MeasurementB64u
	for _, tc := range []struct {
		name  string
		mod   func(p *Policy)
		field string
		seen  string
	}{
		{"measurement", func(p *Policy) { p.Measurements = [][]byte{bytes.Repeat([]byte{1}, 48)} }, "measurements_b64u", seenMeasurement + " (48 bytes"},
		{"attester", func(p *Policy) { p.TrustedAttesterDIDs = []string{did(key(3))} }, "trusted_attester_dids", ok.AttesterDID},
		{"prompt hash", func(p *Policy) { p.ExpectedPromptHashB64u = h("x") }, "expected_system_prompt_hash_b64u", f.run.PromptHash},
		{"report hash", func(p *Policy) { p.ExpectedReportHashB64u = h("x") }, "expected_report_hash_b64u", f.run.ReportHash},
		{"model", func(p *Policy) { p.ExpectedModel = &ModelIdentity{Provider: "anthropic", Model: "other"} }, "expected_model", `"claude-opus-4-6"`},
		{"template", func(p *Policy) { p.TrustedTemplates = map[string]string{"AGENTS.md": "sha256:" + hexSHA("x")} }, "trusted_templates", "sha256:" + hexSHA("agents template")},
		{"recipe", func(p *Policy) { p.TrustedRecipes = []Recipe{{ID: "other", Version: "1"}} }, "trusted_recipes", `"openclaw-sig" version "1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := f.simPolicy()
			tc.mod(p)
			_, err := Verify(f.att, f.ev, f.bundle, p, f.opts())
			ve, ok := errors.AsType[*Error](err)
			if !ok || !errors.Is(err, ErrPolicy) {
				t.Fatalf("err = %v, want a policy refusal", err)
			}
			if ve.Field != tc.field {
				t.Errorf("Field = %q, want %q", ve.Field, tc.field)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.field) || !strings.Contains(msg, tc.seen) {
				t.Errorf("message %q does not name the member %q and the value seen %q", msg, tc.field, tc.seen)
			}
		})
	}
	// Simulated evidence without allow_simulated names the member.
	p := f.simPolicy()
	p.AllowSimulated = false
	o := f.opts()
	o.AllowSimulated = false
	_, err = Verify(f.att, f.ev, f.bundle, p, o)
	ve, isVE := errors.AsType[*Error](err)
	if !isVE || ve.Field != "allow_simulated" || !strings.Contains(err.Error(), "allow_simulated") {
		t.Errorf("simulated refusal: %v (field %q)", err, fieldOf(ve))
	}
	// A debug guest: no member allows it, and the message says so.
	fd := attest(t, simSEV(t, sim.Options{Debug: true}), newRun(t))
	_, err = Verify(fd.att, fd.ev, fd.bundle, fd.simPolicy(), fd.opts())
	if ve, isVE = errors.AsType[*Error](err); !isVE || ve.Field != "" || !strings.Contains(err.Error(), "always refused") {
		t.Errorf("debug refusal: %v (field %q)", err, fieldOf(ve))
	}
}

func fieldOf(e *Error) string {
	if e == nil {
		return "<nil>"
	}
	return e.Field
}

// TestAdmissionPolicy: require_sensitive and admission_policy_hashes_b64u
// applied to attestations the producer made (v2) and to a v1 commitment.
func TestAdmissionPolicy(t *testing.T) {
	listed, unlisted := h("admission policy"), h("another admission policy")
	mk := func(hash string, sensitive bool) *fixture {
		return attestWith(t, simSEV(t, sim.Options{}), newRun(t), func(in *attestation.AttestInput) {
			in.AdmissionPolicyHashB64u, in.Sensitive = hash, sensitive
		})
	}
	sensitive, plain, none, other := mk(listed, true), mk(listed, false), mk("", false), mk(unlisted, true)
	strict := func(f *fixture) *Policy {
		p := f.simPolicy()
		p.AdmissionPolicyHashes, p.RequireSensitive = []string{listed}, true
		return p
	}
	res, err := Verify(sensitive.att, sensitive.ev, nil, strict(sensitive), Options{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Commitments; c.AdmissionPolicyHashB64u != listed || !c.IsSensitive() || AdmissionPolicyOf(&c) != listed+" (sensitive)" {
		t.Fatalf("commitments %+v", c)
	}
	for _, tc := range []struct {
		name  string
		f     *fixture
		check string
		msg   []string
	}{
		{"not sensitive", plain, checkPolicy + "/" + policySensitive, []string{"require_sensitive", "sensitive: false"}},
		{"no admission policy", none, checkPolicy + "/" + policyAdmission, []string{"admission_policy_hashes_b64u", "policy none"}},
		{"unlisted admission policy", other, checkPolicy + "/" + policyAdmission, []string{"admission_policy_hashes_b64u", unlisted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Verify(tc.f.att, tc.f.ev, nil, strict(tc.f), Options{Now: fixedNow})
			wantErr(t, err, ErrPolicy, tc.check, "")
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
		})
	}
	// An allowlist alone admits a listed, non-sensitive run.
	p := plain.simPolicy()
	p.AdmissionPolicyHashes = []string{listed}
	if _, err := Verify(plain.att, plain.ev, nil, p, Options{Now: fixedNow}); err != nil {
		t.Fatal(err)
	}
	// A v1 attestation still verifies without admission requirements, and
	// is refused by them, naming its version.
	r := newRun(t)
	q := simSEV(t, sim.Options{})
	spec := forgeRun(t, q, r)
	spec.commitments = func(c *evidencedoc.Commitments) {
		c.Version, c.Sensitive = evidencedoc.CommitmentsVersionV1, evidencedoc.SensitiveAbsent
	}
	att, jws := forge(t, spec)
	m, _ := q.LaunchMeasurement(t.Context())
	p = &Policy{AllowSimulated: true, AllowUncheckedRevocation: true, AllowUncheckedCollateral: true, Measurements: [][]byte{m}}
	res, err = Verify(att, jws, nil, p, Options{Now: fixedNow})
	if err != nil {
		t.Fatalf("v1: %v", err)
	}
	if got := AdmissionPolicyOf(&res.Commitments); !strings.Contains(got, "predates") {
		t.Fatalf("v1 admission %q", got)
	}
	p.AdmissionPolicyHashes, p.RequireSensitive = []string{listed}, true
	_, err = Verify(att, jws, nil, p, Options{Now: fixedNow})
	if e := wantErr(t, err, ErrPolicy, checkPolicy+"/"+policyAdmission, ""); !strings.Contains(e.Error(), "predates") {
		t.Fatalf("v1 refusal %q does not name the version", e)
	}
	// An empty entry in a programmatic allowlist never matches a run
	// without an admission policy.
	p.AdmissionPolicyHashes, p.RequireSensitive = []string{""}, false
	_, err = Verify(att, jws, nil, p, Options{Now: fixedNow})
	wantErr(t, err, ErrPolicy, checkPolicy+"/"+policyAdmission, "")
	// A programmatic policy that requires sensitive without an allowlist is
	// a usage error, not a verdict.
	p.AdmissionPolicyHashes, p.RequireSensitive = nil, true
	_, err = Verify(sensitive.att, sensitive.ev, nil, p, Options{Now: fixedNow})
	wantErr(t, err, ErrUsage, checkInput, "")
}
