package evidencedoc_test

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	"github.com/clawea/attester/wire/evidencedoc"
)

// TestAuditHeadZeroRecords: a run without gate decisions commits to the
// root of an empty log, "", and count 0 (gate-v1 section 5.1); an empty
// root with records, or a root without records, is refused on both sides
// (Sign and Parse).
func TestAuditHeadZeroRecords(t *testing.T) {
	d := execDoc(t)
	d.Execution.Clawea.GateAuditRootB64u, d.Execution.Clawea.GateAuditCount = "", 0
	s := sign(t, d)
	p, err := evidencedoc.Parse(s.JWS, pub())
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Execution.Clawea; c.GateAuditRootB64u != "" || c.GateAuditCount != 0 {
		t.Fatalf("got root %q count %d", c.GateAuditRootB64u, c.GateAuditCount)
	}

	for name, c := range map[string]struct {
		root  string
		count int64
		want  error
	}{
		"empty root with records": {"", 3, evidencedoc.ErrInconsistent},
		"root without records":    {hash("audit"), 0, evidencedoc.ErrInconsistent},
		"short root":              {"abc", 3, evidencedoc.ErrMalformed},
	} {
		t.Run("sign "+name, func(t *testing.T) {
			d := execDoc(t)
			d.Execution.Clawea.GateAuditRootB64u, d.Execution.Clawea.GateAuditCount = c.root, c.count
			if s, err := evidencedoc.Sign(fuzzKey, d); !errors.Is(err, c.want) || s != nil {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}

	// Hand-edited, re-signed payloads: what Sign refuses, Parse refuses.
	good := execDoc(t)
	hdr, payload := segments(sign(t, good).JWS)
	head := `"gate_audit_root_b64u":"` + good.Execution.Clawea.GateAuditRootB64u + `","gate_audit_count":` + strconv.FormatInt(good.Execution.Clawea.GateAuditCount, 10)
	for name, c := range map[string]struct {
		new  string
		want error
	}{
		"empty root with records": {`"gate_audit_root_b64u":"","gate_audit_count":3`, evidencedoc.ErrInconsistent},
		"root without records":    {`"gate_audit_root_b64u":"` + hash("audit") + `","gate_audit_count":0`, evidencedoc.ErrInconsistent},
	} {
		t.Run("parse "+name, func(t *testing.T) {
			if !bytes.Contains(payload, []byte(head)) {
				t.Fatalf("payload has no %q", head)
			}
			p := bytes.Replace(payload, []byte(head), []byte(c.new), 1)
			d, err := evidencedoc.Parse(signRaw(hdr, p), pub())
			if !errors.Is(err, c.want) || d != nil {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}
