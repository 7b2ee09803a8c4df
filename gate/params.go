package gate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsstr"
)

// maxParamsBytes bounds a call's parameters.
const maxParamsBytes = 1 << 20

// redactedTools have their top-level "content" parameter redacted before it
// leaves the gate (seed 004, "Param Redaction").
var redactedTools = map[string]bool{"write": true, "edit": true, "apply_patch": true}

// params is a call's parameters in canonical form.
type params struct {
	canon []byte // JCS of the parameters (always an object)
	hash  string // b64u SHA-256 of canon
}

// canonicalParams validates raw (nil or empty means {}) as an I-JSON object
// and returns its JCS form and hash.
func canonicalParams(raw []byte) (params, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = []byte("{}")
	}
	if len(raw) > maxParamsBytes {
		return params{}, fmt.Errorf("%w: parameters larger than %d bytes", errInvalidCall, maxParamsBytes)
	}
	c, err := jcs.Canonicalize(raw)
	if err != nil {
		return params{}, fmt.Errorf("%w: parameters are not I-JSON", errInvalidCall)
	}
	if len(c) == 0 || c[0] != '{' {
		return params{}, fmt.Errorf("%w: parameters are not a JSON object", errInvalidCall)
	}
	return params{canon: c, hash: b64u.SHA256(c)}, nil
}

// redactParams returns the JCS of the parameters as sent to external
// verifiers: for write, edit and apply_patch a top-level "content" member is
// replaced by "[REDACTED: N chars]" where N is its JavaScript length (for a
// non-string value, the length of its canonical JSON text).
func redactParams(tool string, p params) ([]byte, error) {
	if !redactedTools[tool] {
		return p.canon, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(p.canon, &m); err != nil {
		return nil, fmt.Errorf("%w: parameters are not a JSON object", errInvalidCall)
	}
	content, ok := m["content"]
	if !ok {
		return p.canon, nil
	}
	var n int
	var s string
	if err := json.Unmarshal(content, &s); err == nil && len(content) > 0 && content[0] == '"' {
		n = jsstr.Len(s)
	} else {
		n = jsstr.Len(string(content))
	}
	m["content"] = json.RawMessage(strconv.Quote("[REDACTED: " + strconv.Itoa(n) + " chars]"))
	out, err := jcs.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot re-encode parameters", errInvalidCall)
	}
	return out, nil
}
