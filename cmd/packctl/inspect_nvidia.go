package main

import (
	"crypto/x509"
	"encoding/hex"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/nvspdm"
)

// gpuValue shows an NVIDIA GPU report as received (inspect verifies
// nothing): the requester nonce, the FWID, the number of measurement
// blocks, the measurement-record digest a policy pins, and the signing
// certificate's subject.
func gpuValue(ev *evidence.Evidence) *pohjson.Value {
	o := &obj{}
	rep, err := nvspdm.Parse(ev.Blob)
	if err != nil {
		o.str("report_error", err.Error())
		return o.value()
	}
	o.str("nonce_hex", hex.EncodeToString(rep.Nonce[:]))
	o.str("fwid_hex", hex.EncodeToString(rep.FWID()))
	o.num("measurement_blocks", int64(len(rep.Measurements)))
	if d, err := rep.MeasurementDigest(); err == nil {
		o.str("measurement_b64u", b64u.Encode(d))
	}
	if len(ev.CertChain) > 0 {
		if c, err := x509.ParseCertificate(ev.CertChain[0]); err == nil {
			o.str("device", c.Subject.String())
		}
	}
	return o.value()
}
