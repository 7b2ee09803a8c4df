package main

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// RequestVersion is the value of request_version, a required member of
// every POST /v1/verify body, in any position (docs/spec/verifier-api.md).
const RequestVersion = "clawea.dev/verifier-api/v1"

// ErrNotSupported is wrapped by the refusal of a member this version
// reserves but does not implement yet (disclosure).
var ErrNotSupported = errors.New("not supported yet")

// policyName is the form of a policy name (a file name in the policy
// directory without ".json", or "default").
var policyName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// DefaultPolicy is the policy a request without "policy" gets.
const DefaultPolicy = "default"

// request is a parsed POST /v1/verify body: the same inputs as
// packctl verify. Nil means not supplied.
type request struct {
	policy      string
	attestation []byte
	evidence    []byte
	bundle      []byte
	audit       []byte
	report      []byte
}

// members of a request: true means required. A document member and its
// _b64u twin are both optional here; parseRequest requires exactly one of
// each pair where the document is required.
var requestMembers = map[string]bool{
	"request_version":  true,
	"policy":           false,
	"attestation":      false,
	"attestation_b64u": false,
	"evidence":         false,
	"evidence_b64u":    false,
	"bundle":           false,
	"bundle_b64u":      false,
	"audit_b64u":       false,
	"report":           false,
	"report_b64u":      false,
	"disclosure":       false,
	"disclosure_b64u":  false,
}

// parseRequest parses body strictly: one JSON object (duplicate keys,
// unknown members, wrong types refused) with request_version among its
// members; the order of members does not matter, so encoders that sort
// keys work. Errors are *jsonobj.PathError values whose messages name
// a path, never a value. The tree borrows body (pohjson Borrow): the
// caller owns body (the service reads each request's into a buffer of its
// own) and writes nothing to it while the request is served, so the
// strings read from it are its bytes, not a copy of the whole body.
func parseRequest(body []byte, maxBytes int) (*request, error) {
	root, err := jsonobj.ParseObject(body, pohjson.ParseOptions{MaxBytes: maxBytes, Borrow: true})
	if err != nil {
		return nil, err
	}
	var r jsonobj.Reader
	m := r.Object(root, jsonobj.Root, requestMembers)
	if err := r.Err(); err != nil {
		return nil, err
	}
	verPath := jsonobj.Key(jsonobj.Root, "request_version")
	if v, ok := r.Str(m["request_version"], verPath); ok && v != RequestVersion {
		r.Failf(verPath, jsonobj.ErrWrongType, "unsupported, want %q", RequestVersion)
	}
	req := &request{policy: DefaultPolicy}
	if v := m["policy"]; v != nil {
		p := jsonobj.Key(jsonobj.Root, "policy")
		if req.policy = r.Ident(v, p, 64); r.Err() == nil && !policyName.MatchString(req.policy) {
			r.Failf(p, jsonobj.ErrWrongType, "not a policy name")
		}
	}
	for _, name := range []string{"disclosure", "disclosure_b64u"} {
		if m[name] != nil {
			r.Fail(jsonobj.Key(jsonobj.Root, name), fmt.Errorf("%w: selective disclosure %w", jsonobj.ErrUnknownField, ErrNotSupported))
		}
	}
	req.attestation = doc(&r, m, "attestation", true, true)
	req.evidence = doc(&r, m, "evidence", true, false)
	req.bundle = doc(&r, m, "bundle", false, true)
	req.audit = doc(&r, m, "audit", false, false)
	req.report = doc(&r, m, "report", false, true)
	if err := r.Err(); err != nil {
		return nil, err
	}
	return req, nil
}

// doc reads the document member name: name_b64u (the exact bytes, base64url
// without padding) or name itself, a JSON object when object (re-encoded
// as compact JSON in member order, JavaScript JSON.stringify) or else a
// string (its UTF-8 bytes; the compact JWS of the evidence document).
// At most one of the two may be present; required demands one.
func doc(r *jsonobj.Reader, m map[string]*pohjson.Value, name string, required, object bool) []byte {
	plain, enc := m[name], m[name+"_b64u"]
	path := jsonobj.Key(jsonobj.Root, name)
	switch {
	case plain != nil && enc != nil:
		r.Failf(jsonobj.Key(jsonobj.Root, name+"_b64u"), jsonobj.ErrWrongType, "give %s or %s_b64u, not both", name, name)
		return nil
	case enc != nil:
		b := r.B64u(enc, jsonobj.Key(jsonobj.Root, name+"_b64u"), 0)
		if b == nil && r.Err() == nil {
			b = []byte{}
		}
		return b
	case plain == nil:
		if required {
			r.Fail(path, jsonobj.ErrMissingField)
		}
		return nil
	case object:
		if plain.Kind() != pohjson.Object {
			r.Failf(path, jsonobj.ErrWrongType, "not an object (use %s_b64u for other bytes)", name)
			return nil
		}
		b, err := pohjson.Stringify(plain)
		if err != nil {
			r.Failf(path, jsonobj.ErrWrongType, "cannot be re-encoded exactly (use %s_b64u)", name)
			return nil
		}
		return b
	}
	s, _ := r.Str(plain, path)
	return []byte(s)
}
