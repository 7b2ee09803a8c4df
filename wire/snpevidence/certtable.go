package snpevidence

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// GUIDs of the entries of the SEV-SNP extended guest request certificate table
// (GHCB specification, "SNP Extended Guest Request"), as the 16 bytes of
// their textual form in order (the layout go-sev-guest's abi package reads).
var (
	GUIDVCEK = mustGUID("63da758d-e664-4564-adc5-f4b93be8accd")
	guidVLEK = mustGUID("a8074bc2-a25a-483e-aae6-39c045a0b8a1")
	GUIDASK  = mustGUID("4ab7b379-bbac-4fe4-a02f-05aef327c782")
	GUIDARK  = mustGUID("c0b406a4-a803-4952-9743-3fb6014cd0ae")
)

const (
	// certTableEntrySize is the size of one table header entry: GUID,
	// u32le offset, u32le length.
	certTableEntrySize = 24
	// MaxCertTableSize bounds an encoded certificate table.
	MaxCertTableSize = 64 << 10
	// maxCertTableEntries bounds the number of entries of a table.
	maxCertTableEntries = 16
	// MaxCertSize bounds one certificate (or other entry) of a table or chain.
	MaxCertSize = 16 << 10
)

// CertTableEntry is one (GUID, data) pair of a certificate table.
type CertTableEntry struct {
	GUID [16]byte
	Data []byte
}

// mustGUID turns a canonical textual UUID into its 16 bytes. It is only
// called on the constant GUIDs above (a test checks them against
// go-sev-guest's); a malformed constant would yield the zero GUID.
func mustGUID(s string) [16]byte {
	var g [16]byte
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != len(g) {
		return g
	}
	copy(g[:], b)
	return g
}

// parseCertTable parses a certificate table in its canonical encoding, the
// one MarshalCertTable produces and Evidence.Aux["cert_table"] carries:
// n >= 1 header entries, an all-zero terminator entry, then the entries' data
// back to back in header order with nothing after the last one. Every entry
// is non-empty and at most MaxCertSize bytes, and no GUID repeats.
// Whatever parseCertTable accepts, MarshalCertTable re-encodes to the
// identical bytes. The entries' data share b's bytes.
func parseCertTable(b []byte) ([]CertTableEntry, error) {
	entries, err := parseTable(b, true)
	if err != nil {
		return nil, err
	}
	return entries, nil
}

// CanonicalCertTable parses a certificate table as a host delivers it
// (entries anywhere after the header, padding allowed) and returns its
// canonical re-encoding. An empty or all-zero table yields nil.
func CanonicalCertTable(b []byte) ([]byte, error) {
	entries, err := parseTable(b, false)
	if err != nil {
		return nil, err
	}
	return MarshalCertTable(entries)
}

func parseTable(b []byte, strict bool) ([]CertTableEntry, error) {
	if len(b) > MaxCertTableSize {
		return nil, fmt.Errorf("%w: certificate table is %d bytes, limit %d", errMalformedCertTable, len(b), MaxCertTableSize)
	}
	if !strict && (len(b) == 0 || allZero(b)) {
		return nil, nil
	}
	type header struct {
		guid        [16]byte
		off, length uint32
	}
	var hs []header
	pos := 0
	for {
		if len(b)-pos < certTableEntrySize {
			return nil, fmt.Errorf("%w: unterminated header", errMalformedCertTable)
		}
		e := b[pos : pos+certTableEntrySize]
		pos += certTableEntrySize
		if allZero(e) {
			break
		}
		if len(hs) == maxCertTableEntries {
			return nil, fmt.Errorf("%w: more than %d entries", errMalformedCertTable, maxCertTableEntries)
		}
		var h header
		copy(h.guid[:], e[:16])
		h.off = binary.LittleEndian.Uint32(e[16:20])
		h.length = binary.LittleEndian.Uint32(e[20:24])
		hs = append(hs, h)
	}
	if len(hs) == 0 {
		return nil, fmt.Errorf("%w: no entries", errMalformedCertTable)
	}
	headerSize := uint64(pos)
	next := headerSize
	entries := make([]CertTableEntry, 0, len(hs))
	for i, h := range hs {
		for _, prev := range hs[:i] {
			if prev.guid == h.guid {
				return nil, fmt.Errorf("%w: entry %d repeats a guid", errMalformedCertTable, i)
			}
		}
		off, n := uint64(h.off), uint64(h.length)
		if n == 0 || n > MaxCertSize {
			return nil, fmt.Errorf("%w: entry %d has length %d", errMalformedCertTable, i, n)
		}
		if off < headerSize || off+n > uint64(len(b)) {
			return nil, fmt.Errorf("%w: entry %d is out of bounds", errMalformedCertTable, i)
		}
		if strict && off != next {
			return nil, fmt.Errorf("%w: entry %d is not canonically placed", errMalformedCertTable, i)
		}
		next = off + n
		entries = append(entries, CertTableEntry{GUID: h.guid, Data: b[off : off+n : off+n]})
	}
	if strict && next != uint64(len(b)) {
		return nil, fmt.Errorf("%w: %d trailing bytes", errMalformedCertTable, uint64(len(b))-next)
	}
	return entries, nil
}

// MarshalCertTable returns the canonical encoding of entries, or nil for no
// entries.
func MarshalCertTable(entries []CertTableEntry) ([]byte, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if len(entries) > maxCertTableEntries {
		return nil, fmt.Errorf("%w: more than %d entries", errMalformedCertTable, maxCertTableEntries)
	}
	headerSize := (len(entries) + 1) * certTableEntrySize
	total := headerSize
	for i, e := range entries {
		if len(e.Data) == 0 || len(e.Data) > MaxCertSize {
			return nil, fmt.Errorf("%w: entry %d has length %d", errMalformedCertTable, i, len(e.Data))
		}
		for _, prev := range entries[:i] {
			if prev.GUID == e.GUID {
				return nil, fmt.Errorf("%w: entry %d repeats a guid", errMalformedCertTable, i)
			}
		}
		total += len(e.Data)
	}
	if total > MaxCertTableSize {
		return nil, fmt.Errorf("%w: certificate table would be %d bytes, limit %d", errMalformedCertTable, total, MaxCertTableSize)
	}
	out := make([]byte, total)
	off := headerSize
	for i, e := range entries {
		h := out[i*certTableEntrySize : (i+1)*certTableEntrySize]
		copy(h[:16], e.GUID[:])
		binary.LittleEndian.PutUint32(h[16:20], uint32(off))
		binary.LittleEndian.PutUint32(h[20:24], uint32(len(e.Data)))
		copy(out[off:], e.Data)
		off += len(e.Data)
	}
	return out, nil
}

// lookup returns the data of the entry with guid, or nil.
func lookup(entries []CertTableEntry, guid [16]byte) []byte {
	for _, e := range entries {
		if e.GUID == guid {
			return e.Data
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
