package platform

import (
	"encoding/binary"
	"fmt"
)

// A CC event log (CCEL) is read from the ACPI CCEL table's whole log area,
// which is longer than the log: OVMF fills the rest with 0xff bytes, td-shim
// leaves it zero. go-eventlog stops at 0xff padding but reads zero bytes as
// empty events (MR index 0, type 0, no digests) until it runs out of bytes.
// ccelEnd finds where the log ends by walking the events' framing, so that
// go-eventlog gets exactly the log (docs/spec/verify-platform.md, section 8,
// "CC event log area").

// Sizes of the TCG PC Client PFP event framing.
const (
	// pcrEventHeaderSize is the TCG_PCClientPCREvent before its event data:
	// MR index, event type, SHA-1 digest, event size.
	pcrEventHeaderSize = 4 + 4 + 20 + 4
	// specIDAlgsOffset is the offset of numberOfAlgorithms in the Spec ID
	// event's data: signature (16), platformClass (4), version and
	// errata (3), uintnSize (1).
	specIDAlgsOffset = 24
	// maxSpecIDAlgs bounds the Spec ID event's algorithm list.
	maxSpecIDAlgs = 16
)

// ccelEnd returns the length of the event log at the start of area: the
// Spec ID event (TCG_PCClientPCREvent) and crypto-agile events
// (TCG_PCR_EVENT2) up to the end of area, or up to the first event boundary
// where the MR index is 0xffffffff (0xff padding) or where every remaining
// byte is zero (zero padding). Each digest's size is the one the Spec ID
// event gives its algorithm. An error names the event (0 is the Spec ID
// event), its offset and the field that does not fit.
func ccelEnd(area []byte) (int, error) {
	if len(area) < pcrEventHeaderSize {
		return 0, fmt.Errorf("event 0 at offset 0: %d bytes, shorter than an event header", len(area))
	}
	size := int(binary.LittleEndian.Uint32(area[pcrEventHeaderSize-4:]))
	if size > len(area)-pcrEventHeaderSize {
		return 0, fmt.Errorf("event 0 at offset 0: event size %d exceeds the %d bytes left", size, len(area)-pcrEventHeaderSize)
	}
	digestSizes, err := specIDDigestSizes(area[pcrEventHeaderSize : pcrEventHeaderSize+size])
	if err != nil {
		return 0, fmt.Errorf("event 0 at offset 0: %w", err)
	}
	off := pcrEventHeaderSize + size
	for n := 1; off < len(area); n++ {
		if allZero(area[off:]) || (len(area)-off >= 4 && binary.LittleEndian.Uint32(area[off:]) == 0xffffffff) {
			break
		}
		next, err := ccelEventEnd(area, off, digestSizes)
		if err != nil {
			return 0, fmt.Errorf("event %d at offset %#x: %w", n, off, err)
		}
		off = next
	}
	return off, nil
}

// specIDDigestSizes returns the digest size of each algorithm the Spec ID
// event (the first event's data) lists.
func specIDDigestSizes(data []byte) (map[uint16]int, error) {
	if len(data) < specIDAlgsOffset+4 || string(data[:16]) != "Spec ID Event03\x00" {
		return nil, fmt.Errorf("not a Spec ID Event03 event")
	}
	n := int(binary.LittleEndian.Uint32(data[specIDAlgsOffset:]))
	if n == 0 || n > maxSpecIDAlgs || len(data) < specIDAlgsOffset+4+4*n {
		return nil, fmt.Errorf("spec id event lists %d algorithms in %d bytes", n, len(data))
	}
	sizes := make(map[uint16]int, n)
	for i := range n {
		p := data[specIDAlgsOffset+4+4*i:]
		sizes[binary.LittleEndian.Uint16(p)] = int(binary.LittleEndian.Uint16(p[2:]))
	}
	return sizes, nil
}

// ccelEventEnd returns the end of the TCG_PCR_EVENT2 at area[off:]: MR
// index, event type, digest count (at least one), the digests, event size,
// event data.
func ccelEventEnd(area []byte, off int, digestSizes map[uint16]int) (int, error) {
	if len(area)-off < 12 {
		return 0, fmt.Errorf("%d bytes, shorter than an event header", len(area)-off)
	}
	count := binary.LittleEndian.Uint32(area[off+8:])
	if count == 0 || count > uint32(len(digestSizes)) {
		return 0, fmt.Errorf("digest count %d, want 1 to %d", count, len(digestSizes))
	}
	off += 12
	for i := range count {
		if len(area)-off < 2 {
			return 0, fmt.Errorf("digest %d: algorithm id past the end", i)
		}
		alg := binary.LittleEndian.Uint16(area[off:])
		size, ok := digestSizes[alg]
		if !ok {
			return 0, fmt.Errorf("digest %d: algorithm %#04x is not in the spec id event", i, alg)
		}
		if len(area)-off-2 < size {
			return 0, fmt.Errorf("digest %d: %d bytes exceed the %d bytes left", i, size, len(area)-off-2)
		}
		off += 2 + size
	}
	if len(area)-off < 4 {
		return 0, fmt.Errorf("event size past the end")
	}
	size := binary.LittleEndian.Uint32(area[off:])
	if uint64(size) > uint64(len(area)-off-4) {
		return 0, fmt.Errorf("event size %d exceeds the %d bytes left", size, len(area)-off-4)
	}
	return off + 4 + int(size), nil
}
