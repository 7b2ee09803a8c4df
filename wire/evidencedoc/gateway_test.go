package evidencedoc_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/clawea/attester/wire/evidencedoc"
)

// TestGatewayRecord: v4 commitments carry the gateway record, with or
// without isolation, in their exact wire form, and round-trip through Sign
// and Parse; v4 requires it, earlier versions refuse it, and a head that
// does not agree with its count is refused on both sides.
func TestGatewayRecord(t *testing.T) {
	chain := hash("chain")
	for name, iso := range map[string]*evidencedoc.Isolation{"without isolation": nil, "with isolation": isolation(t, goodObservation)} {
		d := execDoc(t)
		c := &d.Execution.Clawea
		c.Version, c.Isolation, c.Gateway = evidencedoc.CommitmentsVersionV4, iso, &evidencedoc.GatewayRecord{ReceiptCount: 2, ReceiptChainB64u: chain}
		s := sign(t, d)
		_, payload := segments(s.JWS)
		if want := `,"gateway":{"receipt_count":2,"receipt_chain_b64u":"` + chain + `"}}`; !bytes.Contains(payload, []byte(want)) {
			t.Fatalf("%s: payload %s\nhas no %s", name, payload, want)
		}
		p, err := evidencedoc.Parse(s.JWS, pub())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if g := p.Execution.Clawea.Gateway; g == nil || *g != *c.Gateway || (p.Execution.Clawea.Isolation == nil) != (iso == nil) {
			t.Fatalf("%s: parsed %+v", name, p.Execution.Clawea)
		}
	}

	for name, c := range map[string]struct {
		version string
		g       *evidencedoc.GatewayRecord
		want    error
	}{
		"v4 without gateway":   {evidencedoc.CommitmentsVersionV4, nil, evidencedoc.ErrMalformed},
		"v2 with gateway":      {evidencedoc.CommitmentsVersionV2, &evidencedoc.GatewayRecord{}, evidencedoc.ErrMalformed},
		"count without chain":  {evidencedoc.CommitmentsVersionV4, &evidencedoc.GatewayRecord{ReceiptCount: 1}, evidencedoc.ErrInconsistent},
		"chain without count":  {evidencedoc.CommitmentsVersionV4, &evidencedoc.GatewayRecord{ReceiptChainB64u: chain}, evidencedoc.ErrInconsistent},
		"negative count":       {evidencedoc.CommitmentsVersionV4, &evidencedoc.GatewayRecord{ReceiptCount: -1}, evidencedoc.ErrMalformed},
		"chain not a sha-256":  {evidencedoc.CommitmentsVersionV4, &evidencedoc.GatewayRecord{ReceiptCount: 1, ReceiptChainB64u: "abc"}, evidencedoc.ErrMalformed},
		"v3 with gateway only": {evidencedoc.CommitmentsVersionV3, &evidencedoc.GatewayRecord{}, evidencedoc.ErrMalformed},
	} {
		d := execDoc(t)
		d.Execution.Clawea.Version, d.Execution.Clawea.Gateway = c.version, c.g
		if s, err := evidencedoc.Sign(fuzzKey, d); !errors.Is(err, c.want) || s != nil {
			t.Errorf("%s: signed or wrong error (%v)", name, err)
		}
	}

	d := execDoc(t)
	d.Execution.Clawea.Version, d.Execution.Clawea.Gateway = evidencedoc.CommitmentsVersionV4, &evidencedoc.GatewayRecord{ReceiptCount: 2, ReceiptChainB64u: chain}
	hdr, payload := segments(sign(t, d).JWS)
	for name, c := range map[string]struct {
		old, new string
		want     error
	}{
		"v2 with gateway":      {`"clawea_version":"clawea.dev/attestation/v4"`, `"clawea_version":"clawea.dev/attestation/v2"`, evidencedoc.ErrMalformed},
		"v4 without gateway":   {`,"gateway":{"receipt_count":2,"receipt_chain_b64u":"` + chain + `"}`, ``, evidencedoc.ErrMalformed},
		"count dropped to 0":   {`"receipt_count":2`, `"receipt_count":0`, evidencedoc.ErrInconsistent},
		"members out of order": {`"receipt_count":2,"receipt_chain_b64u":"` + chain + `"`, `"receipt_chain_b64u":"` + chain + `","receipt_count":2`, evidencedoc.ErrMalformed},
		"an unknown member":    {`"receipt_count":2,`, `"receipt_count":2,"receipts":[],`, evidencedoc.ErrMalformed},
		"count a string":       {`"receipt_count":2`, `"receipt_count":"2"`, evidencedoc.ErrMalformed},
		"gateway not object":   {`"gateway":{"receipt_count":2,"receipt_chain_b64u":"` + chain + `"}`, `"gateway":[]`, evidencedoc.ErrMalformed},
	} {
		t.Run(name, func(t *testing.T) { refusesEdit(t, hdr, payload, c.old, c.new, c.want) })
	}
}
