package envelope

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func testContext(packID string) Context {
	return Context{PackID: packID, ReportHash: sha256.Sum256([]byte("report " + packID))}
}

func mustKey(t testing.TB) *PrivateKey {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mustSeal(t testing.TB, body []byte, ctx Context, rs ...*PublicKey) ([]byte, *Manifest) {
	t.Helper()
	f, m, err := Seal(body, ctx, rs...)
	if err != nil {
		t.Fatal(err)
	}
	return f, m
}

// recomputedManifest is what an attacker who also rewrites the manifest
// would present: a manifest that matches the (tampered) file.
func recomputedManifest(t *testing.T, file []byte, orig *Manifest) *Manifest {
	t.Helper()
	m := *orig
	m.CiphertextSize = int64(len(file))
	m.CiphertextHash = sha256.Sum256(file)
	if h, err := parse(file); err == nil {
		m.PackID, m.ReportHash, m.RecipientKeyIDs = h.PackID, h.ReportHash, h.keyIDs()
	}
	return &m
}

func TestSealOpenRoundTrip(t *testing.T) {
	attester, recovery := mustKey(t), mustKey(t)
	ctx := testContext("pack-001")
	for _, size := range []int{0, 1, 15, 16, 17, 4096, 100_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			body := bytes.Repeat([]byte{0xa5}, size)
			file, m := mustSeal(t, body, ctx, attester.Public(), recovery.Public())
			if got, err := plaintextLen(file); err != nil || got != size {
				t.Fatalf("PlaintextLen = %d, %v; want %d", got, err, size)
			}
			for _, k := range []*PrivateKey{attester, recovery} {
				dst := make([]byte, size)
				n, err := openDefault(file, m, k, ctx, dst)
				if err != nil {
					t.Fatalf("Open(%v): %v", k, err)
				}
				if !bytes.Equal(dst[:n], body) {
					t.Fatal("plaintext differs")
				}
			}
			if m.CiphertextSize != int64(len(file)) || m.CiphertextHash != sha256.Sum256(file) {
				t.Fatal("manifest does not describe the file")
			}
			if len(m.RecipientKeyIDs) != 2 || m.RecipientKeyIDs[0] != attester.keyID() || m.RecipientKeyIDs[1] != recovery.keyID() {
				t.Fatal("manifest key ids wrong")
			}
		})
	}
}

func TestSealIsRandomized(t *testing.T) {
	k := mustKey(t)
	a, _ := mustSeal(t, []byte("same body"), testContext("p"), k.Public())
	b, _ := mustSeal(t, []byte("same body"), testContext("p"), k.Public())
	if bytes.Equal(a, b) {
		t.Fatal("two seals of the same body are identical")
	}
}

func TestOpenWrongKey(t *testing.T) {
	k, other := mustKey(t), mustKey(t)
	ctx := testContext("p")
	file, m := mustSeal(t, []byte("secret body"), ctx, k.Public())
	dst := make([]byte, 64)
	_, err := openDefault(file, m, other, ctx, dst)
	if !errors.Is(err, ErrNoMatchingRecipient) {
		t.Fatalf("err = %v, want ErrNoMatchingRecipient", err)
	}
	if errors.Is(err, ErrAuthentication) || errors.Is(err, ErrMalformed) {
		t.Fatal("wrong key must not look like tampering")
	}
}

// region is a byte range of a one-recipient envelope and the error a change
// inside it must produce when the attacker also rewrites the manifest.
type region struct {
	name       string
	start, end int
	want       []error // any of
}

func regions(h *Header) []region {
	pid := len(magic) + 4 + 1
	rh := pid + len(h.PackID)
	kid := rh + hashSize + 1
	wl := kid + keyIDSize
	wr := wl + 2
	nonce := wr + wrappedSize
	cl := nonce + nonceSize
	ct := cl + 8
	return []region{
		{"magic", 0, len(magic), []error{errUnknownVersion}},
		{"header_len", len(magic), len(magic) + 4, []error{errBadLength}},
		{"pack_id_len", len(magic) + 4, pid, []error{ErrMalformed}},
		{"pack_id", pid, rh, []error{ErrMalformed, ErrContextMismatch}},
		{"report_hash", rh, rh + hashSize, []error{ErrContextMismatch}},
		{"n_recipients", rh + hashSize, kid, []error{ErrMalformed}},
		{"key_id", kid, wl, []error{ErrNoMatchingRecipient}},
		{"wrapped_len", wl, wr, []error{errBadLength}},
		{"wrapped", wr, nonce, []error{ErrAuthentication}},
		{"nonce", nonce, cl, []error{ErrAuthentication}},
		{"ct_len", cl, ct, []error{ErrMalformed}},
		{"ct", ct, ct + len(h.Ciphertext), []error{ErrAuthentication}},
	}
}

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// TestTamperEveryByte flips every bit position class of every byte of a
// small envelope: with the original manifest it must fail the manifest
// check; with a manifest recomputed over the tampered file it must still be
// rejected, with the error of the region hit, and leave dst zeroed.
func TestTamperEveryByte(t *testing.T) {
	k := mustKey(t)
	ctx := testContext("pack-tamper")
	body := []byte("a small secret prompt pack body")
	file, m := mustSeal(t, body, ctx, k.Public())
	h, err := parse(file)
	if err != nil {
		t.Fatal(err)
	}
	rs := regions(h)
	if last := rs[len(rs)-1]; last.end != len(file) {
		t.Fatalf("regions cover %d bytes, file has %d", last.end, len(file))
	}
	dst := make([]byte, 256)
	for _, r := range rs {
		for i := r.start; i < r.end; i++ {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				bad := bytes.Clone(file)
				bad[i] ^= mask
				if _, err := openDefault(bad, m, k, ctx, dst); !errors.Is(err, ErrManifestMismatch) {
					t.Fatalf("%s byte %d ^%#x with original manifest: err = %v", r.name, i, mask, err)
				}
				clear(dst)
				dst[0] = 1
				_, err := openDefault(bad, recomputedManifest(t, bad, m), k, ctx, dst)
				if err == nil || !isAny(err, r.want) {
					t.Fatalf("%s byte %d ^%#x: err = %v, want one of %v", r.name, i, mask, err, r.want)
				}
				if !bytes.Equal(dst[1:], make([]byte, len(dst)-1)) {
					t.Fatalf("%s byte %d: plaintext left in dst", r.name, i)
				}
			}
		}
	}
	// Truncations and extensions.
	for n := 0; n < len(file); n++ {
		if _, err := openDefault(file[:n], recomputedManifest(t, file[:n], m), k, ctx, dst); err == nil {
			t.Fatalf("truncated to %d bytes: accepted", n)
		}
	}
	ext := append(bytes.Clone(file), 0)
	if _, err := parse(ext); !errors.Is(err, errTrailingData) {
		t.Fatalf("trailing byte: err = %v", err)
	}
}

// TestTamperOtherRecipient: the body AD covers every stanza, so changing the
// recovery key's stanza (key id or wrapped key) breaks the body even for the
// attester, whose own stanza is intact.
func TestTamperOtherRecipient(t *testing.T) {
	attester, recovery := mustKey(t), mustKey(t)
	ctx := testContext("pack-2")
	file, m := mustSeal(t, []byte("body"), ctx, attester.Public(), recovery.Public())
	start := len(magic) + 4 + 1 + len(ctx.PackID) + hashSize + 1 + stanzaSize
	for _, off := range []int{0, keyIDSize - 1, keyIDSize, keyIDSize + 2, stanzaSize - 1} {
		i := start + off
		bad := bytes.Clone(file)
		bad[i] ^= 0x01
		_, err := openDefault(bad, recomputedManifest(t, bad, m), attester, ctx, make([]byte, 16))
		if !isAny(err, []error{ErrAuthentication, ErrMalformed}) {
			t.Fatalf("byte %d: err = %v", i, err)
		}
	}
}

func TestManifestTamper(t *testing.T) {
	k, other := mustKey(t), mustKey(t)
	ctx := testContext("pack-m")
	file, m := mustSeal(t, []byte("body"), ctx, k.Public())
	edits := map[string]func(*Manifest){
		"size":        func(m *Manifest) { m.CiphertextSize++ },
		"hash":        func(m *Manifest) { m.CiphertextHash[5] ^= 1 },
		"pack id":     func(m *Manifest) { m.PackID = "pack-n" },
		"report hash": func(m *Manifest) { m.ReportHash[0] ^= 1 },
		"key id":      func(m *Manifest) { m.RecipientKeyIDs[0] = other.keyID() },
		"extra id":    func(m *Manifest) { m.RecipientKeyIDs = append(m.RecipientKeyIDs, other.keyID()) },
		"format":      func(m *Manifest) { m.Format = "clawea.dev/promptpack/v2" },
		"algorithm":   func(m *Manifest) { m.Algorithms.Body = "AES-128-GCM" },
	}
	for name, edit := range edits {
		mm := *m
		mm.RecipientKeyIDs = append([]KeyID(nil), m.RecipientKeyIDs...)
		edit(&mm)
		_, err := openDefault(file, &mm, k, ctx, make([]byte, 16))
		if !isAny(err, []error{ErrManifestMismatch, errUnknownVersion, errUnknownAlgorithm}) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := openDefault(file, nil, k, ctx, make([]byte, 16)); !errors.Is(err, ErrManifestMismatch) {
		t.Errorf("nil manifest: err = %v", err)
	}
	// Every byte of the JSON manifest: either it no longer parses, or it
	// parses to something that does not describe the file. (Changes inside
	// JSON whitespace do not exist in the compact encoding.)
	js, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for i := range js {
		bad := bytes.Clone(js)
		bad[i] ^= 0x01
		pm, err := ParseManifest(bad)
		if err != nil {
			continue
		}
		if _, err := openDefault(file, pm, k, ctx, make([]byte, 16)); err == nil {
			t.Fatalf("manifest byte %d (%q) changed and still accepted", i, js[i])
		}
	}
}

func TestContextBinding(t *testing.T) {
	k := mustKey(t)
	ctx := testContext("pack-a")
	file, m := mustSeal(t, []byte("body a"), ctx, k.Public())
	dst := make([]byte, 16)

	wrong := []Context{testContext("pack-b"), {PackID: ctx.PackID, ReportHash: sha256.Sum256([]byte("other"))}}
	for _, w := range wrong {
		if _, err := openDefault(file, m, k, w, dst); !errors.Is(err, ErrContextMismatch) {
			t.Errorf("want %v: err = %v", w.PackID, err)
		}
	}
	if _, err := openDefault(file, m, k, Context{}, dst); !errors.Is(err, errInvalidContext) {
		t.Errorf("zero context: err = %v", err)
	}
}

// TestMovedIntoAnotherPack moves a wrapped key, the body, or both into a pack
// with another pack id or report hash, rewrites the header consistently (as
// an attacker can) and checks that the result does not open for the new
// context.
func TestMovedIntoAnotherPack(t *testing.T) {
	k := mustKey(t)
	ctxA := testContext("pack-a")
	ctxB := testContext("pack-b")
	ctxC := Context{PackID: "pack-a", ReportHash: sha256.Sum256([]byte("report c"))}
	fileA, _ := mustSeal(t, []byte("body of pack a"), ctxA, k.Public())
	hA, err := parse(fileA)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []Context{ctxB, ctxC} {
		fileB, _ := mustSeal(t, []byte("body of pack b"), target, k.Public())
		hB, err := parse(fileB)
		if err != nil {
			t.Fatal(err)
		}
		cases := map[string]*Header{
			// A's wrapped key and body relabelled as the target pack.
			"relabel": {PackID: target.PackID, ReportHash: target.ReportHash, Recipients: hA.Recipients, Nonce: hA.Nonce, Ciphertext: hA.Ciphertext},
			// A's wrapped key with B's body.
			"wrap": {PackID: target.PackID, ReportHash: target.ReportHash, Recipients: hA.Recipients, Nonce: hB.Nonce, Ciphertext: hB.Ciphertext},
			// B's wrapped key with A's body.
			"body": {PackID: target.PackID, ReportHash: target.ReportHash, Recipients: hB.Recipients, Nonce: hA.Nonce, Ciphertext: hA.Ciphertext},
		}
		for name, h := range cases {
			f, err := h.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			m := newManifest(f, h, sha256.Sum256(f))
			if _, err := openDefault(f, m, k, target, make([]byte, 64)); !errors.Is(err, ErrAuthentication) {
				t.Errorf("%s into %s: err = %v, want ErrAuthentication", name, target.PackID, err)
			}
		}
		// Sanity: the untouched target opens.
		if _, err := openDefault(fileB, newManifest(fileB, hB, sha256.Sum256(fileB)), k, target, make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLimits(t *testing.T) {
	k := mustKey(t)
	ctx := testContext("p")
	small := Limits{MaxBodySize: 100}
	if _, _, err := small.seal(make([]byte, 101), ctx, k.Public()); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("seal over limit: %v", err)
	}
	file, m, err := small.seal(make([]byte, 100), ctx, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	big, bm := mustSeal(t, make([]byte, 101), ctx, k.Public())
	if _, err := small.parse(big); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
		t.Fatalf("parse over limit: %v", err)
	}
	if _, err := small.Open(big, bm, k, ctx, make([]byte, 200)); !errors.Is(err, ErrTooLarge) && !errors.Is(err, errBadLength) {
		t.Fatalf("open over limit: %v", err)
	}
	huge := make([]byte, maxFileSize(100)+1)
	if _, err := small.parse(huge); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("huge file: %v", err)
	}
	if _, err := small.Open(file, m, k, ctx, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []int64{-1, defaultMaxBodySize + 1} {
		if _, err := (Limits{MaxBodySize: bad}).parse(file); !errors.Is(err, errInvalidLimits) {
			t.Errorf("limit %d: %v", bad, err)
		}
	}
	if _, _, err := Seal(make([]byte, defaultMaxBodySize+1), ctx, k.Public()); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("default limit: %v", err)
	}
}

func TestSealInputErrors(t *testing.T) {
	k := mustKey(t)
	ctx := testContext("p")
	if _, _, err := Seal(nil, ctx); !errors.Is(err, errInvalidRecipients) {
		t.Error(err)
	}
	if _, _, err := Seal(nil, ctx, nil); !errors.Is(err, errInvalidRecipients) {
		t.Error(err)
	}
	if _, _, err := Seal(nil, ctx, k.Public(), k.Public()); !errors.Is(err, errDuplicateKeyID) {
		t.Error(err)
	}
	many := make([]*PublicKey, maxRecipients+1)
	for i := range many {
		many[i] = mustKey(t).Public()
	}
	if _, _, err := Seal(nil, ctx, many...); !errors.Is(err, errTooManyRecipients) {
		t.Error(err)
	}
	file, m := mustSeal(t, nil, ctx, many[:maxRecipients]...)
	if _, err := openDefault(file, m, mustKey(t), ctx, nil); !errors.Is(err, ErrNoMatchingRecipient) {
		t.Error(err)
	}
	if n, err := openDefault(file, m, mustKey(t), ctx, nil); n != 0 || err == nil {
		t.Error("opened")
	}
	for _, id := range []string{"", strings.Repeat("a", maxPackIDLen+1), "a b", "a/b", "é", "a\x00"} {
		if _, _, err := Seal(nil, Context{PackID: id}, k.Public()); !errors.Is(err, errInvalidContext) {
			t.Errorf("pack id %q: %v", id, err)
		}
	}
	if _, _, err := Seal(nil, Context{PackID: strings.Repeat("a", maxPackIDLen)}, k.Public()); err != nil {
		t.Errorf("longest pack id: %v", err)
	}
}

func TestOpenBufferErrors(t *testing.T) {
	k := mustKey(t)
	ctx := testContext("p")
	file, m := mustSeal(t, []byte("0123456789"), ctx, k.Public())
	if _, err := openDefault(file, m, k, ctx, make([]byte, 9)); !errors.Is(err, errShortBuffer) {
		t.Errorf("short: %v", err)
	}
	// dst inside the file buffer.
	buf := append(bytes.Clone(file), make([]byte, 32)...)
	if _, err := openDefault(buf[:len(file)], m, k, ctx, buf[len(file)-5:]); !errors.Is(err, errBufferOverlap) {
		t.Errorf("overlap: %v", err)
	}
	if _, err := openDefault(buf[:len(file)], m, k, ctx, buf[len(file):]); err != nil {
		t.Errorf("adjacent: %v", err)
	}
	if _, err := openDefault(file, m, nil, ctx, make([]byte, 10)); !errors.Is(err, errInvalidKey) {
		t.Errorf("nil key: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	k1, k2 := mustKey(t), mustKey(t)
	file, _ := mustSeal(t, []byte("x"), testContext("p"), k1.Public(), k2.Public())
	h, err := parse(file)
	if err != nil {
		t.Fatal(err)
	}
	// Duplicate key ids: copy stanza 0's key id over stanza 1's.
	dup := bytes.Clone(file)
	off := len(magic) + 4 + 1 + 1 + hashSize + 1
	copy(dup[off+stanzaSize:], h.Recipients[0].KeyID[:])
	_, err = parse(dup)
	pe, ok := errors.AsType[*parseError](err)
	if !errors.Is(err, errDuplicateKeyID) || !errors.Is(err, ErrMalformed) || !ok || pe.Offset != off+stanzaSize {
		t.Errorf("duplicate: %v", err)
	}
	// Recipient count above the limit.
	many := bytes.Clone(file)
	many[off-1] = maxRecipients + 1
	if _, err := parse(many); !errors.Is(err, errTooManyRecipients) {
		t.Errorf("too many: %v", err)
	}
	// Unknown version.
	v2 := bytes.Replace(file, []byte("/v1\n"), []byte("/v2\n"), 1)
	if _, err := parse(v2); !errors.Is(err, errUnknownVersion) {
		t.Errorf("v2: %v", err)
	}
	// Marshal refuses what Parse refuses.
	h.Recipients[1].KeyID = h.Recipients[0].KeyID
	if _, err := h.MarshalBinary(); !errors.Is(err, errDuplicateKeyID) {
		t.Errorf("marshal duplicate: %v", err)
	}
	if _, err := parse(nil); !errors.Is(err, errUnknownVersion) {
		t.Errorf("empty: %v", err)
	}
}

func TestAppendSeal(t *testing.T) {
	k := mustKey(t)
	ctx := testContext("append")
	body := []byte("a pack body")
	prefix := []byte("prefix")
	buf := make([]byte, len(prefix), 4096)
	copy(buf, prefix)
	out, m, err := (Limits{}).appendSeal(buf, body, ctx, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[:len(prefix)], prefix) || &out[0] != &buf[0] {
		t.Fatal("AppendSeal did not append in place")
	}
	file := out[len(prefix):]
	dst := make([]byte, len(body))
	if n, err := openDefault(file, m, k, ctx, dst); err != nil || !bytes.Equal(dst[:n], body) {
		t.Fatalf("open: %v", err)
	}
	// dst overlapping the body is refused.
	big := make([]byte, 0, 8192)
	big = append(big, body...)
	if _, _, err := (Limits{}).appendSeal(big[:0], big[:len(body)], ctx, k.Public()); !errors.Is(err, errBufferOverlap) {
		t.Fatalf("overlap: %v", err)
	}
}

// TestOpenStepOrder checks the step order of spec section 8.3 (and the two
// halves of the manifest check of 9.2): each case fails two steps, and the
// error must be the earlier step's.
func TestOpenStepOrder(t *testing.T) {
	k, other := mustKey(t), mustKey(t)
	ctx := testContext("pack-order")
	body := []byte(`{"pack":"order"}`)
	file, m := mustSeal(t, body, ctx, k.Public())
	badMagic := bytes.Clone(file)
	badMagic[0] ^= 1
	wrongCtx := testContext("pack-other")
	// A valid file of another pack, presented with a manifest that matches
	// it, except for fields we change below.
	file2, m2 := mustSeal(t, body, wrongCtx, other.Public())
	// A file over a 1-byte body limit (the largest header is under 4 KiB).
	big, _ := mustSeal(t, make([]byte, 8<<10), ctx, k.Public())
	big[0] ^= 1

	type tc struct {
		name string
		lim  Limits
		file []byte
		m    *Manifest
		key  *PrivateKey
		want Context
		err  error
	}
	cases := []tc{
		// 1 before 3: over the size limit and not matching the manifest.
		{"size limit before manifest", Limits{MaxBodySize: 1}, big, m, k, ctx, ErrTooLarge},
		// 2 before 3: the manifest names another algorithm and its hash differs.
		{"manifest values before hash", Limits{}, badMagic, func() *Manifest {
			mm := *m
			mm.Algorithms.Body = "ChaCha20-Poly1305"
			return &mm
		}(), k, ctx, errUnknownAlgorithm},
		// 3 before 4: the file does not parse and does not match the hash.
		{"hash before parse", Limits{}, badMagic, m, k, ctx, ErrManifestMismatch},
		// 4 alone: the hash matches, the file does not parse.
		{"parse after hash", Limits{}, badMagic, recomputedManifest(t, badMagic, m), k, ctx, errUnknownVersion},
		// 5 before 6: the manifest's pack id differs from the file, and the
		// file is not the expected context either.
		{"manifest fields before context", Limits{}, file2, func() *Manifest {
			mm := *m2
			mm.PackID = ctx.PackID
			return &mm
		}(), other, ctx, ErrManifestMismatch},
		// 5 before 7: the manifest lists another key id, and the key is not
		// a recipient.
		{"manifest key ids before recipient", Limits{}, file, func() *Manifest {
			mm := *m
			mm.RecipientKeyIDs = []KeyID{other.keyID()}
			return &mm
		}(), other, ctx, ErrManifestMismatch},
		// 6 before 7: another context and the key is not a recipient.
		{"context before recipient", Limits{}, file2, m2, k, ctx, ErrContextMismatch},
		// 7 before 8: not a recipient, and the file is fine.
		{"recipient", Limits{}, file, m, other, ctx, ErrNoMatchingRecipient},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := make([]byte, len(c.file))
			n, err := c.lim.Open(c.file, c.m, c.key, c.want, dst)
			if !errors.Is(err, c.err) || n != 0 {
				t.Fatalf("got n=%d err=%v, want %v", n, err, c.err)
			}
			for _, other := range []error{ErrTooLarge, errUnknownAlgorithm, ErrManifestMismatch, errUnknownVersion, ErrContextMismatch, ErrNoMatchingRecipient} {
				if other != c.err && errors.Is(err, other) {
					t.Fatalf("error %v also matches %v", err, other)
				}
			}
			if !bytes.Equal(dst, make([]byte, len(dst))) {
				t.Fatal("plaintext written on failure")
			}
		})
	}
}

// TestDescribe: Describe gives the manifest Seal wrote and the plaintext
// length, and refuses what the parser refuses.
func TestDescribe(t *testing.T) {
	body := []byte("a body to describe")
	file, want := mustSeal(t, body, testContext("pack-describe"), mustKey(t).Public(), mustKey(t).Public())
	m, n, err := Describe(file)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, want) || n != len(body) {
		t.Fatalf("Describe: %+v, %d; want %+v, %d", m, n, want, len(body))
	}
	if _, _, err := Describe(file[:len(file)-1]); err == nil {
		t.Fatal("Describe accepted a truncated file")
	}
}
