package envelope

import (
	"encoding/json"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
)

// Algorithm identifiers of format v1, as they appear in the manifest.
const (
	algHPKEKEM        = "DHKEM-X25519-HKDF-SHA256" // RFC 9180 KEM 0x0020
	algHPKEKDF        = "HKDF-SHA256"              // RFC 9180 KDF 0x0001
	algHPKEAEAD       = "AES-256-GCM"              // RFC 9180 AEAD 0x0002
	algBodyAEAD       = "AES-256-GCM"              // 12-byte nonce, 16-byte tag
	algCiphertextHash = "SHA-256"
)

// manifestAlgorithms names the algorithms of an envelope.
type manifestAlgorithms struct {
	KEM            string // "hpke_kem"
	KDF            string // "hpke_kdf"
	AEAD           string // "hpke_aead"
	Body           string // "body_aead"
	CiphertextHash string // "ciphertext_hash"
}

var v1Algorithms = manifestAlgorithms{
	KEM: algHPKEKEM, KDF: algHPKEKDF, AEAD: algHPKEAEAD, Body: algBodyAEAD, CiphertextHash: algCiphertextHash,
}

// Manifest is prompt_pack_manifest.json: hash-only metadata describing one
// envelope file. It carries no secret.
type Manifest struct {
	Format          string             // "format": FormatVersion
	PackID          string             // "pack_id"
	ReportHash      [hashSize]byte     // "report_hash_b64u"
	CiphertextSize  int64              // "ciphertext_size": size of the file in bytes
	CiphertextHash  [hashSize]byte     // "ciphertext_hash_b64u": SHA-256 of the file
	Algorithms      manifestAlgorithms // "algorithms"
	RecipientKeyIDs []KeyID            // "recipient_key_ids_b64u", in file order
}

// newManifest describes file, whose SHA-256 is sum.
func newManifest(file []byte, h *Header, sum [hashSize]byte) *Manifest {
	return &Manifest{
		Format:          FormatVersion,
		PackID:          h.PackID,
		ReportHash:      h.ReportHash,
		CiphertextSize:  int64(len(file)),
		CiphertextHash:  sum,
		Algorithms:      v1Algorithms,
		RecipientKeyIDs: h.keyIDs(),
	}
}

// minFileSize is the size of the smallest well-formed file.
const minFileSize = len(magic) + 4 + 1 + 1 + hashSize + 1 + stanzaSize + nonceSize + 8 + tagSize

func manifestErr(err error, format string, args ...any) error {
	return fmt.Errorf("envelope: manifest: %w: %s", err, fmt.Sprintf(format, args...))
}

func (m *Manifest) validate() error {
	if m.Format != FormatVersion {
		return manifestErr(errUnknownVersion, "format %q", m.Format)
	}
	if m.Algorithms != v1Algorithms {
		return manifestErr(errUnknownAlgorithm, "algorithms %+v", m.Algorithms)
	}
	if !validPackID(m.PackID) {
		return manifestErr(ErrMalformed, "bad pack_id")
	}
	if m.CiphertextSize < int64(minFileSize) || m.CiphertextSize > maxFileSize(defaultMaxBodySize) {
		return manifestErr(ErrMalformed, "ciphertext_size %d out of range", m.CiphertextSize)
	}
	switch n := len(m.RecipientKeyIDs); {
	case n == 0:
		return manifestErr(ErrMalformed, "no recipient key ids")
	case n > maxRecipients:
		return manifestErr(errTooManyRecipients, "%d recipient key ids", n)
	}
	for i, id := range m.RecipientKeyIDs {
		for _, p := range m.RecipientKeyIDs[:i] {
			if p == id {
				return manifestErr(errDuplicateKeyID, "key id %s", id)
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
		ReportHash:     b64u.Encode(m.ReportHash[:]),
		CiphertextSize: m.CiphertextSize,
		CiphertextHash: b64u.Encode(m.CiphertextHash[:]),
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
// maxManifestSize bytes of valid UTF-8 holding exactly one JSON object; every
// field present exactly once with its exact (case-sensitive) name and type;
// no unknown fields; integers without fraction or exponent; b64u without
// padding in canonical form; the algorithms of format v1. Field errors wrap
// ErrMalformed and a *jsonobj.PathError naming the field.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > maxManifestSize {
		return nil, manifestErr(ErrTooLarge, "%d bytes, limit %d", len(data), maxManifestSize)
	}
	if !utf8.Valid(data) {
		return nil, manifestErr(ErrMalformed, "invalid UTF-8")
	}
	root, err := jsonobj.ParseObject(data, pohjson.ParseOptions{MaxBytes: maxManifestSize})
	if err != nil {
		return nil, fmt.Errorf("envelope: manifest: %w: %w", ErrMalformed, err)
	}
	var r jsonobj.Reader
	str := func(v *pohjson.Value, path string) string {
		s, ok := r.Str(v, path)
		if !ok && v == nil {
			r.Fail(path, jsonobj.ErrMissingField)
		}
		return s
	}
	hash := func(v *pohjson.Value, path string) (h [hashSize]byte) {
		s := str(v, path)
		if r.Err() != nil {
			return h
		}
		if b64u.DecodeTo(h[:], []byte(s)) != nil {
			r.Failf(path, jsonobj.ErrWrongType, "want %d bytes in b64u", hashSize)
		}
		return h
	}
	f := r.Object(root, jsonobj.Root, map[string]bool{
		"format": true, "pack_id": true, "report_hash_b64u": true, "ciphertext_size": true,
		"ciphertext_hash_b64u": true, "algorithms": true, "recipient_key_ids_b64u": true,
	})
	m := &Manifest{
		Format:         str(f["format"], "$.format"),
		PackID:         str(f["pack_id"], "$.pack_id"),
		ReportHash:     hash(f["report_hash_b64u"], "$.report_hash_b64u"),
		CiphertextSize: r.Int(f["ciphertext_size"], "$.ciphertext_size", math.MinInt64, math.MaxInt64),
		CiphertextHash: hash(f["ciphertext_hash_b64u"], "$.ciphertext_hash_b64u"),
	}
	if a := f["algorithms"]; a != nil {
		af := r.Object(a, "$.algorithms", map[string]bool{
			"hpke_kem": true, "hpke_kdf": true, "hpke_aead": true, "body_aead": true, "ciphertext_hash": true,
		})
		m.Algorithms = manifestAlgorithms{
			KEM:            str(af["hpke_kem"], "$.algorithms.hpke_kem"),
			KDF:            str(af["hpke_kdf"], "$.algorithms.hpke_kdf"),
			AEAD:           str(af["hpke_aead"], "$.algorithms.hpke_aead"),
			Body:           str(af["body_aead"], "$.algorithms.body_aead"),
			CiphertextHash: str(af["ciphertext_hash"], "$.algorithms.ciphertext_hash"),
		}
	}
	if ids := f["recipient_key_ids_b64u"]; ids != nil {
		// The count is bounded by maxManifestSize here and checked against
		// maxRecipients by validate (errTooManyRecipients).
		es := r.Array(ids, "$.recipient_key_ids_b64u", 0, math.MaxInt)
		m.RecipientKeyIDs = make([]KeyID, 0, len(es))
		for i, e := range es {
			m.RecipientKeyIDs = append(m.RecipientKeyIDs, KeyID(hash(e, jsonobj.Index("$.recipient_key_ids_b64u", i))))
		}
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("envelope: manifest: %w: %w", ErrMalformed, err)
	}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return m, nil
}
