package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// Algorithm identifiers of format v1, as they appear in the manifest.
const (
	AlgHPKEKEM        = "DHKEM-X25519-HKDF-SHA256" // RFC 9180 KEM 0x0020
	AlgHPKEKDF        = "HKDF-SHA256"              // RFC 9180 KDF 0x0001
	AlgHPKEAEAD       = "AES-256-GCM"              // RFC 9180 AEAD 0x0002
	AlgBodyAEAD       = "AES-256-GCM"              // 12-byte nonce, 16-byte tag
	AlgCiphertextHash = "SHA-256"
)

// Algorithms names the algorithms of an envelope.
type Algorithms struct {
	KEM            string // "hpke_kem"
	KDF            string // "hpke_kdf"
	AEAD           string // "hpke_aead"
	Body           string // "body_aead"
	CiphertextHash string // "ciphertext_hash"
}

var v1Algorithms = Algorithms{
	KEM: AlgHPKEKEM, KDF: AlgHPKEKDF, AEAD: AlgHPKEAEAD, Body: AlgBodyAEAD, CiphertextHash: AlgCiphertextHash,
}

// Manifest is prompt_pack_manifest.json: hash-only metadata describing one
// envelope file. It carries no secret.
type Manifest struct {
	Format          string         // "format": FormatVersion
	PackID          string         // "pack_id"
	ReportHash      [hashSize]byte // "report_hash_b64u"
	CiphertextSize  int64          // "ciphertext_size": size of the file in bytes
	CiphertextHash  [hashSize]byte // "ciphertext_hash_b64u": SHA-256 of the file
	Algorithms      Algorithms     // "algorithms"
	RecipientKeyIDs []KeyID        // "recipient_key_ids_b64u", in file order
}

func newManifest(file []byte, h *Header) *Manifest {
	return &Manifest{
		Format:          FormatVersion,
		PackID:          h.PackID,
		ReportHash:      h.ReportHash,
		CiphertextSize:  int64(len(file)),
		CiphertextHash:  sha256.Sum256(file),
		Algorithms:      v1Algorithms,
		RecipientKeyIDs: h.KeyIDs(),
	}
}

// minFileSize is the size of the smallest well-formed file.
const minFileSize = len(magic) + 4 + 1 + 1 + hashSize + 1 + stanzaSize + nonceSize + 8 + tagSize

func manifestErr(err error, format string, args ...any) error {
	return fmt.Errorf("envelope: manifest: %w: %s", err, fmt.Sprintf(format, args...))
}

func (m *Manifest) validate() error {
	if m.Format != FormatVersion {
		return manifestErr(ErrUnknownVersion, "format %q", m.Format)
	}
	if m.Algorithms != v1Algorithms {
		return manifestErr(ErrUnknownAlgorithm, "algorithms %+v", m.Algorithms)
	}
	if !validPackID(m.PackID) {
		return manifestErr(ErrMalformed, "bad pack_id")
	}
	if m.CiphertextSize < int64(minFileSize) || m.CiphertextSize > maxFileSize(DefaultMaxBodySize) {
		return manifestErr(ErrMalformed, "ciphertext_size %d out of range", m.CiphertextSize)
	}
	switch n := len(m.RecipientKeyIDs); {
	case n == 0:
		return manifestErr(ErrMalformed, "no recipient key ids")
	case n > MaxRecipients:
		return manifestErr(ErrTooManyRecipients, "%d recipient key ids", n)
	}
	for i, id := range m.RecipientKeyIDs {
		for _, p := range m.RecipientKeyIDs[:i] {
			if p == id {
				return manifestErr(ErrDuplicateKeyID, "key id %s", id)
			}
		}
	}
	return nil
}

type manifestJSON struct {
	Format         string   `json:"format"`
	PackID         string   `json:"pack_id"`
	ReportHash     string   `json:"report_hash_b64u"`
	CiphertextSize int64    `json:"ciphertext_size"`
	CiphertextHash string   `json:"ciphertext_hash_b64u"`
	Algorithms     algsJSON `json:"algorithms"`
	KeyIDs         []string `json:"recipient_key_ids_b64u"`
}

type algsJSON struct {
	KEM            string `json:"hpke_kem"`
	KDF            string `json:"hpke_kdf"`
	AEAD           string `json:"hpke_aead"`
	Body           string `json:"body_aead"`
	CiphertextHash string `json:"ciphertext_hash"`
}

// MarshalJSON encodes the manifest compactly, fields in the order of the
// specification. It refuses manifests ParseManifest would reject.
func (m *Manifest) MarshalJSON() ([]byte, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	j := manifestJSON{
		Format:         m.Format,
		PackID:         m.PackID,
		ReportHash:     b64.EncodeToString(m.ReportHash[:]),
		CiphertextSize: m.CiphertextSize,
		CiphertextHash: b64.EncodeToString(m.CiphertextHash[:]),
		Algorithms:     algsJSON(m.Algorithms),
		KeyIDs:         make([]string, len(m.RecipientKeyIDs)),
	}
	for i, id := range m.RecipientKeyIDs {
		j.KeyIDs[i] = id.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON parses strictly, as ParseManifest.
func (m *Manifest) UnmarshalJSON(data []byte) error {
	p, err := ParseManifest(data)
	if err != nil {
		return err
	}
	*m = *p
	return nil
}

// ParseManifest parses prompt_pack_manifest.json strictly: at most
// MaxManifestSize bytes of valid UTF-8 holding exactly one JSON object; every
// field present exactly once with its exact (case-sensitive) name and type;
// no unknown fields; integers without fraction or exponent; b64u without
// padding in canonical form; the algorithms of format v1.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > MaxManifestSize {
		return nil, manifestErr(ErrTooLarge, "%d bytes, limit %d", len(data), MaxManifestSize)
	}
	if !utf8.Valid(data) {
		return nil, manifestErr(ErrMalformed, "invalid UTF-8")
	}
	p := &jparser{dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	m := &Manifest{}
	err := p.object("manifest", []string{
		"format", "pack_id", "report_hash_b64u", "ciphertext_size",
		"ciphertext_hash_b64u", "algorithms", "recipient_key_ids_b64u",
	}, func(key string) error {
		var err error
		switch key {
		case "format":
			m.Format, err = p.str(key)
		case "pack_id":
			m.PackID, err = p.str(key)
		case "report_hash_b64u":
			m.ReportHash, err = p.hash(key)
		case "ciphertext_size":
			m.CiphertextSize, err = p.int(key)
		case "ciphertext_hash_b64u":
			m.CiphertextHash, err = p.hash(key)
		case "algorithms":
			err = p.object(key, []string{"hpke_kem", "hpke_kdf", "hpke_aead", "body_aead", "ciphertext_hash"}, func(k string) error {
				var err error
				switch k {
				case "hpke_kem":
					m.Algorithms.KEM, err = p.str(k)
				case "hpke_kdf":
					m.Algorithms.KDF, err = p.str(k)
				case "hpke_aead":
					m.Algorithms.AEAD, err = p.str(k)
				case "body_aead":
					m.Algorithms.Body, err = p.str(k)
				case "ciphertext_hash":
					m.Algorithms.CiphertextHash, err = p.str(k)
				}
				return err
			})
		case "recipient_key_ids_b64u":
			m.RecipientKeyIDs, err = p.keyIDs(key)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, manifestErr(ErrMalformed, "data after the manifest object")
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// jparser reads JSON tokens strictly.
type jparser struct{ dec *json.Decoder }

func (p *jparser) token(field string) (json.Token, error) {
	t, err := p.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, manifestErr(ErrMalformed, "%s: syntax error at offset %d", field, se.Offset)
		}
		return nil, manifestErr(ErrMalformed, "%s: truncated or invalid JSON", field)
	}
	return t, nil
}

// object reads an object whose keys must be exactly the names in fields,
// each once, calling value to read each value.
func (p *jparser) object(field string, fields []string, value func(key string) error) error {
	t, err := p.token(field)
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != '{' {
		return manifestErr(ErrMalformed, "%s: want an object", field)
	}
	seen := make(map[string]bool, len(fields))
	for p.dec.More() {
		t, err := p.token(field)
		if err != nil {
			return err
		}
		key, _ := t.(string)
		known := false
		for _, f := range fields {
			known = known || f == key
		}
		if !known {
			return manifestErr(ErrMalformed, "%s: unknown field %q", field, key)
		}
		if seen[key] {
			return manifestErr(ErrMalformed, "%s: duplicate field %q", field, key)
		}
		seen[key] = true
		if err := value(key); err != nil {
			return err
		}
	}
	if _, err := p.token(field); err != nil { // the closing '}'
		return err
	}
	for _, f := range fields {
		if !seen[f] {
			return manifestErr(ErrMalformed, "%s: missing field %q", field, f)
		}
	}
	return nil
}

func (p *jparser) str(field string) (string, error) {
	t, err := p.token(field)
	if err != nil {
		return "", err
	}
	s, ok := t.(string)
	if !ok {
		return "", manifestErr(ErrMalformed, "%s: want a string", field)
	}
	return s, nil
}

func (p *jparser) hash(field string) ([hashSize]byte, error) {
	var h [hashSize]byte
	s, err := p.str(field)
	if err != nil {
		return h, err
	}
	b, ok := decodeB64u(s, hashSize)
	if !ok {
		return h, manifestErr(ErrMalformed, "%s: want 32 bytes in b64u", field)
	}
	copy(h[:], b)
	return h, nil
}

func (p *jparser) int(field string) (int64, error) {
	t, err := p.token(field)
	if err != nil {
		return 0, err
	}
	n, ok := t.(json.Number)
	if !ok {
		return 0, manifestErr(ErrMalformed, "%s: want an integer", field)
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || strconv.FormatInt(v, 10) != string(n) {
		return 0, manifestErr(ErrMalformed, "%s: want a plain integer", field)
	}
	return v, nil
}

func (p *jparser) keyIDs(field string) ([]KeyID, error) {
	t, err := p.token(field)
	if err != nil {
		return nil, err
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return nil, manifestErr(ErrMalformed, "%s: want an array", field)
	}
	var ids []KeyID
	for p.dec.More() {
		if len(ids) == MaxRecipients {
			return nil, manifestErr(ErrTooManyRecipients, "%s: more than %d", field, MaxRecipients)
		}
		h, err := p.hash(field)
		if err != nil {
			return nil, err
		}
		ids = append(ids, KeyID(h))
	}
	if _, err := p.token(field); err != nil { // the closing ']'
		return nil, err
	}
	return ids, nil
}
