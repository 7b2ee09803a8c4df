package promptpack

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
)

// Attacks by whoever handles a sealed pack in transit, or by its author,
// against the attester's open path (OpenPack, then Opened.Rebuild): each
// must end in the refusal the specs name, never in an opened pack whose
// report differs from the one committed. docs/spec/threat-tests.md lists
// them (P5 onwards).

// envelope layout (promptpack-envelope-v1.md section 8).
const (
	envMagicLen   = 25
	envStanzaSize = 114
)

// envelopeParts splits a file into the fixed head (magic through
// n_recipients), its stanzas and the body (nonce, ct_len, ct).
func envelopeParts(t *testing.T, file []byte) (head []byte, stanzas [][]byte, body []byte) {
	t.Helper()
	idLen := int(file[envMagicLen+4])
	nAt := envMagicLen + 4 + 1 + idLen + 32
	n := int(file[nAt])
	head = file[:nAt+1]
	at := nAt + 1
	for range n {
		stanzas = append(stanzas, file[at:at+envStanzaSize])
		at += envStanzaSize
	}
	return head, stanzas, file[at:]
}

// rewrap assembles a file from parts with its header_len and n_recipients
// made consistent, and a manifest that describes it exactly as an honest
// sealer's would (anyone can write one: it holds hashes and ids only).
func rewrap(t *testing.T, m *envelope.Manifest, head []byte, stanzas [][]byte, body []byte) ([]byte, *envelope.Manifest) {
	t.Helper()
	var file []byte
	file = append(file, head...)
	file[len(file)-1] = byte(len(stanzas))
	ids := make([]envelope.KeyID, 0, len(stanzas))
	for _, s := range stanzas {
		file = append(file, s...)
		ids = append(ids, envelope.KeyID(s[:32]))
	}
	binary.BigEndian.PutUint32(file[envMagicLen:], uint32(len(file)-envMagicLen-4))
	file = append(file, body...)
	m2 := *m
	m2.CiphertextSize = int64(len(file))
	m2.CiphertextHash = sha256.Sum256(file)
	m2.RecipientKeyIDs = ids
	return file, &m2
}

// TestEnvelopeRestanzaAttack: a relay that strips the recovery recipient,
// or swaps the recipients' order, and writes a manifest that matches: the
// attester's own wrapped key still opens (its HPKE info binds only its own
// stanza), so the body's associated data, which covers every stanza, is
// what must refuse it.
func TestEnvelopeRestanzaAttack(t *testing.T) {
	requireConformance(t)
	p := buildVector(t, "min", BuildOptions{})
	rb := selfRebuild(t, p)
	k1, k2 := mustKey(t), mustKey(t)
	enc, m, err := SealPack(p, k1.Public(), k2.Public())
	if err != nil {
		t.Fatal(err)
	}
	head, st, body := envelopeParts(t, enc)
	for _, tc := range []struct {
		name    string
		stanzas [][]byte
		key     *envelope.PrivateKey
	}{
		{"recovery stripped", [][]byte{st[0]}, k1},
		{"attester stripped", [][]byte{st[1]}, k2},
		{"order swapped", [][]byte{st[1], st[0]}, k1},
	} {
		file, m2 := rewrap(t, m, head, tc.stanzas, body)
		o, err := OpenPack(file, m2, tc.key, rb.ReportHash, openOpts)
		if !errors.Is(err, envelope.ErrAuthentication) || o != nil {
			t.Errorf("%s: got %v, want the authentication failure", tc.name, err)
		}
	}
}

// TestEnvelopeBodyLengthAttack: the ciphertext cut or extended by exactly
// one AES block (a boundary of the counter stream), with ct_len and the
// manifest made consistent, never opens as a shorter or longer body; and a
// body of zero bytes, which anyone with the public key can seal, is refused
// before any memory is locked for it.
func TestEnvelopeBodyLengthAttack(t *testing.T) {
	requireConformance(t)
	p := buildVector(t, "min", BuildOptions{})
	rb := selfRebuild(t, p)
	k := mustKey(t)
	enc, m, err := SealPack(p, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	head, st, body := envelopeParts(t, enc)
	nonce, ct := body[:12], body[20:]
	withCT := func(ct []byte) []byte {
		b := append(append([]byte{}, nonce...), make([]byte, 8)...)
		binary.BigEndian.PutUint64(b[12:], uint64(len(ct)))
		return append(b, ct...)
	}
	cut := append(append([]byte{}, ct[:len(ct)-32]...), ct[len(ct)-16:]...) // last block gone, tag kept
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"cut one block", withCT(cut), envelope.ErrAuthentication},
		{"extended one block", withCT(append(append(append([]byte{}, ct[:len(ct)-16]...), make([]byte, 16)...), ct[len(ct)-16:]...)), envelope.ErrAuthentication},
		// Nothing but the tag: a zero-length body, refused as no pack
		// before its tag is even checked.
		{"cut to the tag", withCT(ct[len(ct)-16:]), ErrMalformed},
	} {
		file, m2 := rewrap(t, m, head, st, tc.body)
		if o, err := OpenPack(file, m2, k, rb.ReportHash, openOpts); !errors.Is(err, tc.want) || o != nil {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}

	// A zero-length body, validly sealed under the pack's context.
	empty, m3, err := envelope.Seal(nil, envelope.Context{PackID: rb.PackID, ReportHash: rb.ReportHash}, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	if o, err := OpenPack(empty, m3, k, rb.ReportHash, openOpts); !errors.Is(err, ErrMalformed) || o != nil {
		t.Errorf("empty body: got %v, want a malformed pack", err)
	}
}

// TestEnvelopeOversizedBodyAttack: a body above the pack format's 16 MiB,
// which the envelope format still carries (up to 64 MiB), is refused as
// too large from the file's size, before anything is decrypted or locked.
func TestEnvelopeOversizedBodyAttack(t *testing.T) {
	k := mustKey(t)
	var rh [32]byte
	for _, tc := range []struct {
		n    int
		want error
	}{
		{maxPackSize + 1, envelope.ErrMalformed},   // ct_len above the limit (8.2)
		{maxPackSize + 4096, envelope.ErrTooLarge}, // the file above the limit (8.3 step 1)
	} {
		big := make([]byte, tc.n)
		enc, m, err := envelope.Seal(big, envelope.Context{PackID: packID(big), ReportHash: rh}, k.Public())
		if err != nil {
			t.Fatal(err)
		}
		// Before the fix these were decrypted into locked memory and
		// refused by Parse (promptpack.ErrTooLarge, another sentinel).
		if o, err := OpenPack(enc, m, k, rh, openOpts); !errors.Is(err, tc.want) || o != nil {
			t.Errorf("%d bytes: got %v, want %v", tc.n, err, tc.want)
		}
	}
}

// TestTemplateNameAttack: a pack author adds templates whose names
// normalise to one the recipe uses (a path, a case variant, a trailing
// slash or space, a look-alike): each is refused by name, before any
// rendering, and never shadows the trusted template. A case variant with
// a sig of its own is untrusted (the trust is by exact name).
func TestTemplateNameAttack(t *testing.T) {
	requireConformance(t)
	base := buildVector(t, "min", BuildOptions{})
	trusted := selfTrusted(t, base)
	text := base.Harness.Templates["identity.txt"]
	sig := base.Harness.Sigs["identity.txt"]
	for _, tc := range []struct {
		name   string
		want   error
		ownSig bool // the sig names the variant
	}{
		{"./identity.txt", openclawsig.ErrInvalidHarness, false},
		{"../identity.txt", openclawsig.ErrInvalidHarness, false},
		{"prompts/identity.txt", openclawsig.ErrInvalidHarness, false},
		{"identity.txt/", openclawsig.ErrInvalidHarness, false},
		{"identity.txt ", openclawsig.ErrInvalidHarness, false},
		{"ıdentity.txt", openclawsig.ErrInvalidHarness, false},       // dotless i
		{"identity\u200b.txt", openclawsig.ErrInvalidHarness, false}, // zero-width space
		{"identity.txt\x00", openclawsig.ErrInvalidHarness, false},   // NUL
		{".identity.txt", openclawsig.ErrInvalidHarness, false},      // hidden
		{"IDENTITY.txt", openclawsig.ErrInvalidHarness, false},       // case variant: its sig names another file
		{"IDENTITY.txt", openclawsig.ErrTemplateUntrusted, true},
		{"identity.TXT", openclawsig.ErrInvalidHarness, false}, // not a .txt name
	} {
		p := buildVector(t, "min", BuildOptions{})
		p.Harness.Templates[tc.name] = append([]byte{}, text...)
		p.Harness.Sigs[tc.name] = append([]byte{}, sig...)
		if tc.ownSig {
			p.Harness.Sigs[tc.name] = bytes.ReplaceAll(sig, []byte("identity.txt"), []byte(tc.name))
		}
		enc, err := p.Encode()
		if err == nil {
			var q *Pack
			if q, err = Parse(enc); err == nil {
				_, err = q.Rebuild(trusted)
			}
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%q: got %v, want %v", tc.name, err, tc.want)
		}
	}
}

// TestRecipeSpellingAttack: a recipe named by a spelling of a known one
// (case, spaces, a leading zero, a semver form) is unknown, never mapped
// to the recipe it resembles.
func TestRecipeSpellingAttack(t *testing.T) {
	enc, err := synthPack().Encode()
	if err != nil {
		t.Fatal(err)
	}
	s := string(enc)
	const known = `"recipe":{"id":"openclaw-sig","version":"1"}`
	if !strings.Contains(s, known) {
		t.Fatal("synthetic pack does not name openclaw-sig 1")
	}
	for _, r := range []string{
		`"recipe":{"id":"OpenClaw-Sig","version":"1"}`,
		`"recipe":{"id":"openclaw-sig ","version":"1"}`,
		`"recipe":{"id":"openclaw_sig","version":"1"}`,
		`"recipe":{"id":"openclaw-sig","version":"01"}`,
		`"recipe":{"id":"openclaw-sig","version":"1.0"}`,
		`"recipe":{"id":"openclaw-sig","version":"1.0.0"}`,
		`"recipe":{"id":"openclaw-sig","version":"v1"}`,
		`"recipe":{"id":"openclaw-release","version":"1 "}`,
	} {
		p, err := Parse([]byte(strings.Replace(s, known, r, 1)))
		if !errors.Is(err, ErrUnknownRecipe) || p != nil {
			t.Errorf("%s: got %v, want unknown recipe", r, err)
		}
	}
}

// TestStrayRawContextFileAttack: a raw_context_files entry for a path the
// params do not have (another file, or a spelling of a real one) would be
// left out of the report, so two packs would commit to one report; the
// rebuild refuses it by name.
func TestStrayRawContextFileAttack(t *testing.T) {
	requireConformance(t)
	mc := int64(100)
	entry := rawContextFile{RawContentHash: sha256.Sum256([]byte("x")), Truncated: true, MaxChars: &mc}
	base := buildVector(t, "full", BuildOptions{RawContextFiles: map[string]rawContextFile{"AGENTS.md": entry}})
	trusted := selfTrusted(t, base)
	if _, err := base.Rebuild(trusted); err != nil {
		t.Fatalf("the honest entry: %v", err)
	}
	for _, stray := range []string{"./AGENTS.md", "agents.md", "AGENTS.md ", "NOT-RENDERED.md"} {
		p := buildVector(t, "full", BuildOptions{RawContextFiles: map[string]rawContextFile{"AGENTS.md": entry}})
		p.RawContextFiles[stray] = entry
		enc, err := p.Encode()
		if err != nil {
			t.Fatal(err)
		}
		q, err := Parse(enc)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := q.Rebuild(trusted)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "raw_context_files") || rb != nil {
			t.Errorf("%q: got %v, want the entry refused", stray, err)
		}
	}
}
