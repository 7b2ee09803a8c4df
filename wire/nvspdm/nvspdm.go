// Package nvspdm is the NVIDIA GPU attestation report: the SPDM 1.1
// GET_MEASUREMENTS request and the device's signed MEASUREMENTS response
// (DMTF DSP0274 1.1.1, sections 10.11 and 10.11.1), as NVIDIA's Hopper
// driver returns them through NVML (docs/spec/verify-platform.md, "NVIDIA
// GPU"). The producer's fake device encodes reports with Marshal and the
// verifier decodes them with Parse; whatever Parse accepts re-encodes to the
// identical bytes.
//
// Parse checks the structure only. The signature (ECDSA P-384 over
// SHA-384(SignedPart())), the device certificate chain and the nonce are
// checked by verify/platform.
package nvspdm

import (
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Format is evidence.Evidence.Format of NVIDIA GPU evidence: Blob is a
// report this package parses.
const Format = "nvidia/spdm-1.1-get-measurements"

// Wire constants of the SPDM 1.1 messages NVIDIA's GPUs use.
const (
	spdmVersion     = 0x11
	codeGetMeas     = 0xe0
	codeMeas        = 0x60
	reqSigRequested = 0x01 // request Param1: signature requested
	reqAllMeas      = 0xff // request Param2: all measurement blocks
	specDMTF        = 0x01 // measurement block MeasurementSpecification: DMTF
	nonceSize       = 32
	requestSize     = 4 + nonceSize + 1
	responseHeader  = 8
	dmtfHeader      = 3
	// signatureSize is an ECDSA P-384 signature, r || s, 48 bytes each.
	signatureSize = 96
	// maxReportBytes bounds a report: 255 blocks of at most 64 KiB each do
	// not fit an NVML report (8 KiB); this bound is far above any real one
	// and below the evidence document's blob bound (64 KiB).
	maxReportBytes = 32 << 10
	// fwidSize is the SHA-384 FWID carried in the opaque data.
	fwidSize = 48
)

// Opaque data types (NVIDIA's OpaqueDataType) this package knows. A report
// carrying another type is refused.
const (
	opaqueDriverVersion = 3
	opaqueVBIOSVersion  = 6
	// OpaqueFWID is the opaque item holding the firmware id (48 bytes) that
	// the signing certificate's FWID extension must repeat.
	OpaqueFWID = 20
)

// knownOpaque reports whether t is an opaque data type NVIDIA defines.
func knownOpaque(t uint16) bool { return (t >= 1 && t <= 25) || (t >= 32 && t <= 36) }

// errMalformed is wrapped by every Parse and Marshal error.
var errMalformed = errors.New("nvspdm: malformed attestation report")

// Report is a parsed GET_MEASUREMENTS request and MEASUREMENTS response.
// Field order follows the wire.
type Report struct {
	// Nonce is the requester's nonce: the 32 bytes after the request's
	// 4-byte header. The verifier compares it with the expected nonce.
	Nonce [32]byte
	// SlotID is the request's SlotIDParam (the certificate slot).
	SlotID uint8
	// RespParam1 and RespParam2 are the response header's parameters
	// (Param2 carries the slot id).
	RespParam1, RespParam2 uint8
	// Measurements are the measurement blocks in wire order; their indices
	// strictly increase.
	Measurements []Measurement
	// ResponderNonce is the device's own nonce in the response.
	ResponderNonce [32]byte
	// Opaque is NVIDIA's opaque data, items in wire order, each type once.
	Opaque []OpaqueItem
	// Signature is the device key's ECDSA P-384 signature, r || s.
	Signature []byte
}

// Measurement is one DMTF measurement block.
type Measurement struct {
	Index uint8
	// Type is DMTFSpecMeasurementValueType.
	Type  uint8
	Value []byte
}

// OpaqueItem is one item of NVIDIA's opaque data (type, length, value).
type OpaqueItem struct {
	Type  uint16
	Value []byte
}

// reader consumes a byte slice, remembering the first short read.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || len(r.b) < n {
		r.err = fmt.Errorf("%w: %s: %d bytes left, want %d", errMalformed, what, len(r.b), n)
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8(what string) uint8 {
	if b := r.take(1, what); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u16(what string) int {
	if b := r.take(2, what); b != nil {
		return int(binary.LittleEndian.Uint16(b))
	}
	return 0
}

// Parse decodes a report: the 37-byte request then the response, with
// nothing after the signature. It refuses another SPDM version or message
// code, a request that does not ask for all measurements with a signature,
// blocks that do not fill MeasurementRecordLength exactly, non-DMTF or
// out-of-order blocks, opaque data that does not parse into known, unique
// items with a 48-byte FWID, a driver and a VBIOS version, and a signature
// that is not 96 bytes.
func Parse(b []byte) (*Report, error) {
	if len(b) > maxReportBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", errMalformed, len(b), maxReportBytes)
	}
	r := &reader{b: b}
	rep := &Report{}
	if err := rep.parseRequest(r); err != nil {
		return nil, err
	}
	if err := rep.parseResponseHead(r); err != nil {
		return nil, err
	}
	copy(rep.ResponderNonce[:], r.take(nonceSize, "responder nonce"))
	opaque := r.take(r.u16("opaque length"), "opaque data")
	sig := r.take(signatureSize, "signature")
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the signature", errMalformed, len(r.b))
	}
	var err error
	if rep.Opaque, err = parseOpaque(opaque); err != nil {
		return nil, err
	}
	rep.Signature = slices.Clone(sig)
	return rep, nil
}

func (rep *Report) parseRequest(r *reader) error {
	h := r.take(4, "request header")
	copy(rep.Nonce[:], r.take(nonceSize, "request nonce"))
	rep.SlotID = r.u8("request slot id")
	if r.err != nil {
		return r.err
	}
	switch {
	case h[0] != spdmVersion:
		return fmt.Errorf("%w: request SPDM version %#02x, want %#02x", errMalformed, h[0], spdmVersion)
	case h[1] != codeGetMeas:
		return fmt.Errorf("%w: request code %#02x is not GET_MEASUREMENTS", errMalformed, h[1])
	case h[2] != reqSigRequested:
		return fmt.Errorf("%w: request param1 %#02x does not ask for a signature", errMalformed, h[2])
	case h[3] != reqAllMeas:
		return fmt.Errorf("%w: request param2 %#02x does not ask for all measurements", errMalformed, h[3])
	}
	return nil
}

func (rep *Report) parseResponseHead(r *reader) error {
	h := r.take(responseHeader, "response header")
	if r.err != nil {
		return r.err
	}
	switch {
	case h[0] != spdmVersion:
		return fmt.Errorf("%w: response SPDM version %#02x, want %#02x", errMalformed, h[0], spdmVersion)
	case h[1] != codeMeas:
		return fmt.Errorf("%w: response code %#02x is not MEASUREMENTS", errMalformed, h[1])
	}
	rep.RespParam1, rep.RespParam2 = h[2], h[3]
	n := int(h[4])
	recLen := int(h[5]) | int(h[6])<<8 | int(h[7])<<16
	rec := &reader{b: r.take(recLen, "measurement record")}
	if r.err != nil {
		return r.err
	}
	for i := 0; i < n; i++ {
		idx := rec.u8("block index")
		spec := rec.u8("block specification")
		blk := &reader{b: rec.take(rec.u16("block size"), "block")}
		typ := blk.u8("dmtf type")
		val := blk.take(blk.u16("dmtf size"), "dmtf value")
		switch {
		case rec.err != nil:
			return rec.err
		case blk.err != nil:
			return blk.err
		case len(blk.b) != 0:
			return fmt.Errorf("%w: measurement block %d: %d bytes after the value", errMalformed, idx, len(blk.b))
		case spec != specDMTF:
			return fmt.Errorf("%w: measurement block %d: specification %#02x is not DMTF", errMalformed, idx, spec)
		case idx == 0 || (i > 0 && idx <= rep.Measurements[i-1].Index):
			return fmt.Errorf("%w: measurement block index %d out of order", errMalformed, idx)
		}
		rep.Measurements = append(rep.Measurements, Measurement{Index: idx, Type: typ, Value: slices.Clone(val)})
	}
	if len(rec.b) != 0 {
		return fmt.Errorf("%w: %d bytes of measurement record after %d blocks", errMalformed, len(rec.b), n)
	}
	return nil
}

func parseOpaque(b []byte) ([]OpaqueItem, error) {
	r := &reader{b: b}
	var items []OpaqueItem
	seen := map[uint16]bool{}
	for len(r.b) > 0 {
		t := uint16(r.u16("opaque type"))
		v := r.take(r.u16("opaque size"), "opaque value")
		if r.err != nil {
			return nil, r.err
		}
		if !knownOpaque(t) {
			return nil, fmt.Errorf("%w: unknown opaque data type %d", errMalformed, t)
		}
		if seen[t] {
			return nil, fmt.Errorf("%w: opaque data type %d twice", errMalformed, t)
		}
		seen[t] = true
		items = append(items, OpaqueItem{Type: t, Value: slices.Clone(v)})
	}
	for _, t := range []uint16{opaqueDriverVersion, opaqueVBIOSVersion, OpaqueFWID} {
		if !seen[t] {
			return nil, fmt.Errorf("%w: opaque data lacks type %d (driver version, vbios version and fwid are required)", errMalformed, t)
		}
	}
	if f := opaqueValue(items, OpaqueFWID); len(f) != fwidSize {
		return nil, fmt.Errorf("%w: fwid is %d bytes, want %d", errMalformed, len(f), fwidSize)
	}
	return items, nil
}

func opaqueValue(items []OpaqueItem, t uint16) []byte {
	for _, it := range items {
		if it.Type == t {
			return it.Value
		}
	}
	return nil
}

// FWID returns the firmware id from the opaque data (48 bytes in a parsed
// report).
func (rep *Report) FWID() []byte { return slices.Clone(opaqueValue(rep.Opaque, OpaqueFWID)) }

// Marshal encodes the report: request, then response, signature last. It
// refuses values that do not fit their length fields, a signature that is
// not 96 bytes, and reports Parse would refuse.
func (rep *Report) Marshal() ([]byte, error) {
	out, err := rep.marshalUnsigned()
	if err != nil {
		return nil, err
	}
	if len(rep.Signature) != signatureSize {
		return nil, fmt.Errorf("%w: signature is %d bytes, want %d", errMalformed, len(rep.Signature), signatureSize)
	}
	out = append(out, rep.Signature...)
	if _, err := Parse(out); err != nil {
		return nil, err
	}
	return out, nil
}

// record encodes the measurement blocks: the MeasurementRecord field.
func (rep *Report) record() ([]byte, error) {
	var rec []byte
	for _, m := range rep.Measurements {
		if len(m.Value) > 0xffff-dmtfHeader {
			return nil, fmt.Errorf("%w: measurement %d is %d bytes", errMalformed, m.Index, len(m.Value))
		}
		rec = append(rec, m.Index, specDMTF)
		rec = binary.LittleEndian.AppendUint16(rec, uint16(dmtfHeader+len(m.Value)))
		rec = append(rec, m.Type)
		rec = binary.LittleEndian.AppendUint16(rec, uint16(len(m.Value)))
		rec = append(rec, m.Value...)
	}
	if len(rec) > 0xffffff {
		return nil, fmt.Errorf("%w: measurement record is %d bytes", errMalformed, len(rec))
	}
	return rec, nil
}

// MeasurementDigest returns SHA-384 of the measurement record exactly as
// signed: the GPU's measurement a policy pins (docs/spec/verify-platform.md
// section 3.4). For a parsed report the record is the received bytes.
func (rep *Report) MeasurementDigest() ([]byte, error) {
	rec, err := rep.record()
	if err != nil {
		return nil, err
	}
	sum := sha512.Sum384(rec)
	return sum[:], nil
}

// SignedPart returns the bytes the device signs: the request and the
// response up to, not including, the signature.
func (rep *Report) SignedPart() ([]byte, error) { return rep.marshalUnsigned() }

func (rep *Report) marshalUnsigned() ([]byte, error) {
	out := []byte{spdmVersion, codeGetMeas, reqSigRequested, reqAllMeas}
	out = append(out, rep.Nonce[:]...)
	out = append(out, rep.SlotID)
	if len(rep.Measurements) > 0xff {
		return nil, fmt.Errorf("%w: %d measurement blocks, limit 255", errMalformed, len(rep.Measurements))
	}
	rec, err := rep.record()
	if err != nil {
		return nil, err
	}
	out = append(out, spdmVersion, codeMeas, rep.RespParam1, rep.RespParam2, byte(len(rep.Measurements)),
		byte(len(rec)), byte(len(rec)>>8), byte(len(rec)>>16))
	out = append(out, rec...)
	out = append(out, rep.ResponderNonce[:]...)
	var op []byte
	for _, it := range rep.Opaque {
		if len(it.Value) > 0xffff {
			return nil, fmt.Errorf("%w: opaque item %d is %d bytes", errMalformed, it.Type, len(it.Value))
		}
		op = binary.LittleEndian.AppendUint16(op, it.Type)
		op = binary.LittleEndian.AppendUint16(op, uint16(len(it.Value)))
		op = append(op, it.Value...)
	}
	if len(op) > 0xffff {
		return nil, fmt.Errorf("%w: opaque data is %d bytes", errMalformed, len(op))
	}
	out = binary.LittleEndian.AppendUint16(out, uint16(len(op)))
	return append(out, op...), nil
}
