package earresult

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/veraison/ear"

	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/platform"
	"github.com/clawea/attester/wire/evidencedoc"
)

// sameAsEAR fails unless marshal gives exactly what ear's MarshalJSON
// gives for ar: the same bytes, or an error from both (the same message
// where ear's does not depend on map order).
func sameAsEAR(t *testing.T, name string, ar *ear.AttestationResult) {
	t.Helper()
	want, werr := ar.MarshalJSON()
	got, gerr := marshal(ar)
	switch {
	case (werr == nil) != (gerr == nil):
		t.Errorf("%s: marshal error %v, ear's %v", name, gerr, werr)
	case werr != nil && len(ar.Submods) <= 1 && gerr.Error() != werr.Error():
		t.Errorf("%s: marshal error %q, ear's %q", name, gerr, werr)
	case werr == nil && !bytes.Equal(got, want):
		t.Errorf("%s:\n got %s\nwant %s", name, got, want)
	}
}

// awkward are strings encoding/json escapes or replaces: HTML
// characters, controls, quotes, non-ASCII, U+2028, invalid UTF-8.
var awkward = []string{"", "plain", `a"b\c`, "<script>&amp;</script>", "tab\there\nnl\r\b\f\x00\x1f\x7f",
	"é中文🙂", "line\u2028sep\u2029", "bad\xff\xfeutf8", "\xed\xa0\x80"}

// TestMarshalMatchesEAR: the EAR's claims are byte for byte what ear's
// MarshalJSON writes, for every kind of result New makes (verified with
// every annotation, each kind of failure) and for results New never
// makes (the fallbacks and ear's validation errors).
func TestMarshalMatchesEAR(t *testing.T) {
	iso, err := evidencedoc.NewIsolation(evidencedoc.IsolationObservation{
		AttesterUID: 998, ControlUIDs: []int64{999, 1000}, SocketProtected: true, YamaPtraceScope: evidencedoc.YamaAbsent,
		PeerUID: 999, PeerPIDNamespace: evidencedoc.PIDNamespaceSame,
	})
	if err != nil {
		t.Fatal(err)
	}
	full := func(s string) *verify.Result {
		r := result()
		r.AttestationID, r.RunID, r.AgentDID = s, s+"run", "did:"+s
		r.Warnings = []string{"policy accepts any measurement", s}
		r.Checks = append(r.Checks, verify.CheckResult{Name: "audit", Status: verify.StatusSkipped}, verify.CheckResult{Name: s, Status: verify.StatusSkipped})
		r.Evidence = append(r.Evidence,
			verify.EvidenceResult{Platform: "tdx", Collateral: "checked", TCBStatus: "OutOfDate", QETCBStatus: platform.TCBStatusUpToDate, TCBAdvisoryIDs: []string{"INTEL-SA-00001", s}},
			verify.EvidenceResult{Platform: "nvidia-gpu", RootID: s, TCB: "vbios " + s, Revocation: "skipped", Simulated: true})
		r.Commitments.Isolation = iso
		r.Commitments.AdmissionPolicyHashB64u = s + "h"
		r.Commitments.GateAuditCount = 1 << 40
		r.TEE.MeasurementB64u = s
		return r
	}
	pinned := &verify.Policy{ExpectedGatePolicyHashB64u: "0LACz9RUOsq-Lno2GehjNC8XHurEhh1UldXdRIKjKy4"}
	var ars []*ear.AttestationResult
	add := func(res *verify.Result, verr error, o Options) {
		t.Helper()
		o.Now = now
		ar, err := New(res, verr, o)
		if err != nil {
			t.Fatal(err)
		}
		ars = append(ars, ar)
	}
	add(result(), nil, Options{})
	add(result(), nil, Options{Policy: pinned, Build: "clawea-verifier/<&>"})
	for _, s := range awkward {
		add(full(s), nil, Options{Policy: pinned, Build: s})
		sim := full(s)
		sim.Simulated = true
		add(sim, nil, Options{})
	}
	for _, e := range []*verify.Error{
		{Class: verify.ErrRejected, Check: "envelope", Code: poh.SignatureInvalid},
		{Class: verify.ErrRejected, Check: "a<b>\u2028"},
		{Class: verify.ErrPolicy, Check: "policy/" + platform.CheckMeasurement},
		{Class: verify.ErrPolicy, Check: "policy/" + platform.CheckTCB},
		{Class: verify.ErrPolicy, Check: "policy/" + verify.PolicyAttester},
		{Class: verify.ErrPolicy, Check: "policy/other"},
		{Class: verify.ErrCannotCheck, Check: "platform/revocation"},
	} {
		add(nil, e, Options{Policy: pinned})
	}
	for i, ar := range ars {
		sameAsEAR(t, "new "+string(rune('a'+i%26)), ar)
	}

	// Results New never makes: each changed on a fresh copy.
	alter := map[string]func(ar *ear.AttestationResult){
		"no nonce":       func(ar *ear.AttestationResult) { ar.Nonce = nil },
		"short nonce":    func(ar *ear.AttestationResult) { n := "short"; ar.Nonce = &n },
		"no profile":     func(ar *ear.AttestationResult) { ar.Profile = nil },
		"other profile":  func(ar *ear.AttestationResult) { p := "tag:x"; ar.Profile = &p },
		"no iat":         func(ar *ear.AttestationResult) { ar.IssuedAt = nil },
		"no verifier id": func(ar *ear.AttestationResult) { ar.VerifierID = nil },
		"no build":       func(ar *ear.AttestationResult) { ar.VerifierID.Build = nil },
		"no submods":     func(ar *ear.AttestationResult) { ar.Submods = nil },
		"no status":      func(ar *ear.AttestationResult) { ar.Submods[SubmodName].Status = nil },
		"unknown tier":   func(ar *ear.AttestationResult) { tt := ear.TrustTier(7); ar.Submods[SubmodName].Status = &tt },
		"no vector":      func(ar *ear.AttestationResult) { ar.Submods[SubmodName].TrustVector = nil },
		"no policy id":   func(ar *ear.AttestationResult) { ar.Submods[SubmodName].AppraisalPolicyID = nil },
		"no annotations": func(ar *ear.AttestationResult) { ar.Submods[SubmodName].VeraisonAnnotatedEvidence = nil },
		"nil annotations": func(ar *ear.AttestationResult) {
			var m map[string]interface{}
			ar.Submods[SubmodName].VeraisonAnnotatedEvidence = &m
		},
		"raw evidence": func(ar *ear.AttestationResult) { b := ear.B64Url("<ev>"); ar.RawEvidence = &b },
		"tee info":     func(ar *ear.AttestationResult) { ar.VeraisonTeeInfo = &ear.VeraisonTeeInfo{} },
		"policy claims": func(ar *ear.AttestationResult) {
			ar.Submods[SubmodName].VeraisonPolicyClaims = &map[string]interface{}{"a": 1}
		},
		"key attestation": func(ar *ear.AttestationResult) {
			ar.Submods[SubmodName].VeraisonKeyAttestation = &map[string]interface{}{"akpub": "x"}
		},
		"other submod": func(ar *ear.AttestationResult) {
			s := ear.TrustTierNone
			ar.Submods["<z>"] = &ear.Appraisal{Status: &s}
		},
		"negative claims": func(ar *ear.AttestationResult) {
			ar.Submods[SubmodName].TrustVector.SetAll(ear.VerifierMalfunctionClaim)
		},
		"other annotations": func(ar *ear.AttestationResult) {
			annotate(ar, 1.5, uint8(3), []string{"<"}, []interface{}(nil), map[string]string{"b": "a"})
		},
		"NaN annotation": func(ar *ear.AttestationResult) { annotate(ar, math.NaN()) },
	}
	for name, change := range alter {
		ar, err := New(full("x"), nil, Options{Now: now, Policy: pinned})
		if err != nil {
			t.Fatal(err)
		}
		change(ar)
		sameAsEAR(t, name, ar)
	}
}

// annotate adds vs to the clawea submod's annotations under their index.
func annotate(ar *ear.AttestationResult, vs ...interface{}) {
	a := *ar.Submods[SubmodName].VeraisonAnnotatedEvidence
	for i, v := range vs {
		a[string(rune('0'+i))] = v
	}
}

// FuzzMarshalMatchesEAR: for any strings in the claims, the EAR's bytes
// are ear's.
func FuzzMarshalMatchesEAR(f *testing.F) {
	for _, s := range awkward {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		r := result()
		r.AttestationID, r.RunID, r.Warnings = a, b, []string{b}
		r.Checks = append(r.Checks, verify.CheckResult{Name: a, Status: verify.StatusSkipped})
		ar, err := New(r, nil, Options{Now: now, Build: b})
		if err != nil {
			t.Fatal(err)
		}
		annotate(ar, a, map[string]interface{}{a: b, b: a})
		sameAsEAR(t, "fuzz", ar)
	})
}

func BenchmarkMarshal(b *testing.B) {
	ar, err := New(result(), nil, Options{Now: now})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ear", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ar.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := marshal(ar); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestMarshalKnowsEveryField: marshal writes ear's structures member by
// member, so a field a later ear adds would be left out of the signed
// EAR. Every field of the structures it writes (embedded extensions
// flattened) is one it writes or sends to ar.MarshalJSON; a new one fails
// here, by name, until the encoder handles it.
func TestMarshalKnowsEveryField(t *testing.T) {
	for _, c := range []struct {
		typ   reflect.Type
		known []string
	}{
		{reflect.TypeFor[ear.AttestationResult](), []string{"Profile", "VerifierID", "RawEvidence", "IssuedAt", "Nonce", "Submods", "VeraisonTeeInfo"}},
		{reflect.TypeFor[ear.VerifierIdentity](), []string{"Build", "Developer"}},
		{reflect.TypeFor[ear.Appraisal](), []string{"Status", "TrustVector", "AppraisalPolicyID", "VeraisonAnnotatedEvidence", "VeraisonPolicyClaims", "VeraisonKeyAttestation"}},
		{reflect.TypeFor[ear.TrustVector](), []string{"InstanceIdentity", "Configuration", "Executables", "FileSystem", "Hardware", "RuntimeOpaque", "StorageOpaque", "SourcedData"}},
	} {
		var got []string
		for _, f := range reflect.VisibleFields(c.typ) {
			if !f.Anonymous {
				got = append(got, f.Name)
			}
		}
		slices.Sort(got)
		slices.Sort(c.known)
		if !slices.Equal(got, c.known) {
			t.Errorf("ear.%s has fields %v; marshal knows %v", c.typ.Name(), got, c.known)
		}
	}
}
