package main

import (
	"fmt"
	"time"

	"github.com/clawea/attester/verify/platform"
)

// verifyNVIDIAGPURaw is the nvidia-gpu format of packctl platform verify:
// data is an NVIDIA GPU attestation report in hex (as nvtrust and Trustee
// write it), certs the GPU's certificate chain (PEM, leaf first, or one DER
// certificate), nonce the 32-byte requester nonce (nil: not checked). It
// returns the summary and check lines to print, or a verify/platform
// error whose class decides the exit code.
//
// It plugs into rawFormats (cmd/packctl/platformverify.go) as
//
//	"nvidia-gpu": func(in rawInput) (rawReport, error) {
//		s, c, err := verifyNVIDIAGPURaw(in.data, in.nonce, in.certs, in.at)
//		return rawReport{summary: s, checks: c}, err
//	},
func verifyNVIDIAGPURaw(data, nonce, certs []byte, at time.Time) (string, []string, error) {
	if certs == nil {
		return "", nil, fmt.Errorf("%w: nvidia-gpu needs --certs (the gpu certificate chain, pem)", platform.ErrBadOptions)
	}
	res, err := platform.VerifyRaw("nvidia-gpu", data, certs, nonce, platform.Options{Now: func() time.Time { return at }})
	if err != nil {
		return "", nil, err
	}
	g := res.GPU
	checks := []string{
		"ok         chain to " + res.RootID + " (embedded root) at " + at.UTC().Format(time.RFC3339),
		"ok         fwid of the signing certificate equals the report's",
		"ok         signature (ecdsa p-384 over the request and response)",
		"unchecked  revocation: the gpu chain's ocsp status is not checked",
	}
	if nonce != nil {
		checks = append(checks, "ok         nonce equals --nonce")
	} else {
		checks = append(checks, fmt.Sprintf("unchecked  nonce: no --nonce (the report carries %x)", g.Nonce))
	}
	checks = append(checks,
		"unchecked  measurements: not judged by platform verify",
		fmt.Sprintf("info       device %s", g.Device),
		fmt.Sprintf("info       fwid %x", g.FWID),
		fmt.Sprintf("info       %d measurement blocks, measurement record sha-384 %x", len(g.Measurements), res.Measurement))
	return fmt.Sprintf("nvidia gpu report (%s)", res.TCB), checks, nil
}
