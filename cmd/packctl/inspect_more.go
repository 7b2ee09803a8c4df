package main

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/auditrec"
)

// More kinds inspect recognises (sniffMore).
const (
	kindAdmission = "admission-policy"
	kindAuditLog  = "audit-log"
	kindEAR       = "ear"
	kindConfig    = "attester-config"
)

// sniffMore recognises the kinds sniff does not: an audit log (JSON
// Lines whose first record has audit_version), an EAR (a JWT whose
// payload has eat_profile), an admission policy and an attester
// configuration. It returns "" for none of them.
func sniffMore(raw []byte, root *pohjson.Value) string {
	if root != nil {
		switch {
		case root.Has("admission_policy_version"):
			return kindAdmission
		case root.Has("attester") && root.Get("attester").Kind() == pohjson.Object:
			return kindConfig
		}
		return ""
	}
	first, _, _ := bytes.Cut(raw, []byte("\n"))
	if r, err := jsonobj.ParseObject(first, pohjson.ParseOptions{MaxBytes: maxInputBytes, MaxDepth: 8}); err == nil && r.Has("audit_version") {
		return kindAuditLog
	}
	if t := bytes.TrimSpace(raw); looksLikeJWS(t) {
		parts := bytes.Split(t, []byte("."))
		if p, err := b64u.Decode(string(parts[1])); err == nil {
			if r, err := jsonobj.ParseObject(p, pohjson.ParseOptions{MaxBytes: maxInputBytes, MaxDepth: 32, AllowFloats: true}); err == nil && r.Has("eat_profile") {
				return kindEAR
			}
		}
	}
	return ""
}

// inspectMore shows a document of a kind sniffMore recognised.
func inspectMore(raw []byte, kind string) (*pohjson.Value, error) {
	o := header(kind)
	switch kind {
	case kindAdmission:
		p, err := admission.Parse(raw)
		if err != nil {
			return nil, err
		}
		o.str("admission_policy_hash_b64u", p.Hash())
		o.boolean("sensitive", p.Sensitive())
		root, err := jsonobj.ParseObject(p.Canonical(), pohjson.ParseOptions{MaxBytes: maxInputBytes, MaxDepth: 64})
		if err != nil {
			return nil, err
		}
		o.val("document", root)
		o.str("check_with", "the attester applies it to each run (attester.admissionPolicy); packctl verify checks a run's attestation commits to its hash")
	case kindAuditLog:
		root, count, err := auditrec.Verify(bytes.NewReader(raw))
		if err != nil {
			// A broken log is shown broken: how far its chain holds.
			o.str("chain", "BROKEN: "+err.Error())
			o.num("records_before_the_break", int64(count))
			break
		}
		o.str("chain", "intact (each record's hash and link recomputed)")
		o.num("records", int64(count))
		o.str("audit_root", root)
		o.str("check_with", "packctl verify --audit FILE with the run's attestation, which commits to this root and count")
	case kindEAR:
		parts := bytes.Split(bytes.TrimSpace(raw), []byte("."))
		hdr, _ := b64u.Decode(string(parts[0]))
		var h struct{ Alg, Kid string }
		_ = json.Unmarshal(hdr, &h)
		o.str("alg", h.Alg)
		o.str("kid", h.Kid)
		o.str("signature", "not checked: packctl ear verify --jwks FILE checks it against the verifier's keys")
		p, _ := b64u.Decode(string(parts[1]))
		claims, err := jsonobj.ParseObject(p, pohjson.ParseOptions{MaxBytes: maxInputBytes, MaxDepth: 32, AllowFloats: true})
		if err != nil {
			return nil, err
		}
		o.val("claims", claims)
	case kindConfig:
		root, err := jsonobj.ParseObject(raw, pohjson.ParseOptions{MaxBytes: maxInputBytes, MaxDepth: 16, AllowFloats: true})
		if err != nil {
			return nil, err
		}
		// A configuration may hold secrets: only its shape is shown.
		var keys []*pohjson.Value
		for _, m := range root.Get("attester").Members() {
			keys = append(keys, pohjson.NewString(m.Key))
		}
		o.val("attester_keys", pohjson.NewArray(keys...))
		var top []*pohjson.Value
		for _, m := range root.Members() {
			top = append(top, pohjson.NewString(m.Key))
		}
		o.val("sections", pohjson.NewArray(top...))
		o.str("values", "not shown: a configuration may hold secrets")
		o.str("check_with", "the attester checks it at start and exits 1 naming the first bad key (docs/spec/attester-api.md section 7)")
	default:
		return nil, fmt.Errorf("unsupported kind %q", kind)
	}
	return o.value(), nil
}

// brokenJWSValue is what inspect shows of an evidence document whose
// signature or structure does not check: the failure first, then what its
// payload claims, marked unverified, so that an auditor sees what a
// broken file says.
func brokenJWSValue(raw []byte, kind string, cause error) (*pohjson.Value, error) {
	t := bytes.TrimSpace(raw)
	if !looksLikeJWS(t) {
		return nil, cause
	}
	parts := bytes.Split(t, []byte("."))
	p, err := b64u.Decode(string(parts[1]))
	if err != nil {
		return nil, cause
	}
	claims, err := jsonobj.ParseObject(p, pohjson.ParseOptions{MaxBytes: maxInputBytes, MaxDepth: 64, AllowFloats: true})
	if err != nil {
		return nil, cause
	}
	o := header(kind)
	o.str("failure", cause.Error())
	o.str("signature", "NOT VALID: what follows is what the file claims, checked by nothing")
	o.val("payload", claims)
	return o.value(), nil
}
