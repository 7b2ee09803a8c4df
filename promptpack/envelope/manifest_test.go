package envelope

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testjson"
	"github.com/clawea/attester/schema/b64u"
)

func TestManifestJSONRoundTrip(t *testing.T) {
	k1, k2 := mustKey(t), mustKey(t)
	_, m := mustSeal(t, []byte("x"), testContext("pack:1"), k1.Public(), k2.Public())
	js := testjson.Marshal(t, m)
	m2, err := ParseManifest(js)
	if err != nil {
		t.Fatal(err)
	}
	js2, _ := m2.MarshalJSON()
	if string(js) != string(js2) {
		t.Fatalf("round trip:\n%s\n%s", js, js2)
	}
	var m3 Manifest
	if err := json.Unmarshal(js, &m3); err != nil {
		t.Fatal(err)
	}
	// Field order of the specification.
	prev := -1
	for _, f := range []string{`"format"`, `"pack_id"`, `"report_hash_b64u"`, `"ciphertext_size"`, `"ciphertext_hash_b64u"`, `"algorithms"`, `"recipient_key_ids_b64u"`} {
		idx := strings.Index(string(js), f)
		if idx <= prev {
			t.Fatalf("field %s misplaced in %s", f, js)
		}
		prev = idx
	}
	// Indented JSON (as written by other tools) is accepted.
	var ind strings.Builder
	enc := json.NewEncoder(&ind)
	enc.SetIndent("", "  ")
	_ = enc.Encode(m)
	if _, err := ParseManifest([]byte(ind.String())); err != nil {
		t.Fatalf("indented: %v", err)
	}
}

func TestParseManifestStrict(t *testing.T) {
	k := mustKey(t)
	_, m := mustSeal(t, []byte("x"), testContext("p"), k.Public())
	good, _ := m.MarshalJSON()
	g := string(good)
	hash := m.CiphertextHash
	h := b64u.Encode(hash[:])
	cases := map[string]struct {
		in   string
		want error
	}{
		"unknown field":      {strings.Replace(g, `{`, `{"extra":1,`, 1), ErrMalformed},
		"duplicate field":    {strings.Replace(g, `{`, `{"pack_id":"p",`, 1), ErrMalformed},
		"case folded name":   {strings.Replace(g, `"pack_id"`, `"Pack_ID"`, 1), ErrMalformed},
		"missing field":      {strings.Replace(g, `"pack_id":"p",`, ``, 1), ErrMalformed},
		"unknown algorithm":  {strings.Replace(g, `"body_aead":"AES-256-GCM"`, `"body_aead":"AES-128-GCM"`, 1), errUnknownAlgorithm},
		"unknown alg field":  {strings.Replace(g, `"ciphertext_hash":"SHA-256"`, `"ciphertext_hash":"SHA-256","x":"y"`, 1), ErrMalformed},
		"unknown version":    {strings.Replace(g, `promptpack/v1"`, `promptpack/v2"`, 1), errUnknownVersion},
		"float size":         {strings.Replace(g, `"ciphertext_size":`, `"ciphertext_size":1.0e0+`, 1), ErrMalformed},
		"string size":        {strings.Replace(g, `"ciphertext_size":`, `"ciphertext_size":"`, 1), ErrMalformed},
		"negative size":      {strings.Replace(g, `"ciphertext_size":`, `"ciphertext_size":-`, 1), ErrMalformed},
		"padded b64":         {strings.Replace(g, h, h+"=", 1), ErrMalformed},
		"std b64":            {strings.Replace(g, h, strings.NewReplacer("-", "+", "_", "/").Replace(h)+"+", 1), ErrMalformed},
		"short hash":         {strings.Replace(g, h, h[:42], 1), ErrMalformed},
		"newline in hash":    {strings.Replace(g, h, h[:20]+`\n`+h[20:], 1), ErrMalformed},
		"null":               {`null`, ErrMalformed},
		"array":              {`[]`, ErrMalformed},
		"trailing data":      {g + `{}`, ErrMalformed},
		"truncated":          {g[:len(g)-1], ErrMalformed},
		"no key ids":         {strings.Replace(g, `["`+m.RecipientKeyIDs[0].String()+`"]`, `[]`, 1), ErrMalformed},
		"duplicate key ids":  {strings.Replace(g, `["`+m.RecipientKeyIDs[0].String()+`"]`, `["`+m.RecipientKeyIDs[0].String()+`","`+m.RecipientKeyIDs[0].String()+`"]`, 1), errDuplicateKeyID},
		"too many key ids":   {strings.Replace(g, `["`+m.RecipientKeyIDs[0].String()+`"]`, `[`+strings.Repeat(`"`+h+`",`, maxRecipients)+`"`+h+`"]`, 1), errTooManyRecipients},
		"bad pack id":        {strings.Replace(g, `"pack_id":"p"`, `"pack_id":"p q"`, 1), ErrMalformed},
		"invalid utf8":       {strings.Replace(g, `"pack_id":"p"`, "\"pack_id\":\"p\xff\"", 1), ErrMalformed},
		"too large":          {g + strings.Repeat(" ", maxManifestSize), ErrTooLarge},
		"algorithms not obj": {strings.Replace(g, `"algorithms":{`, `"algorithms":[{`, 1), ErrMalformed},
	}
	for name, c := range cases {
		_, err := ParseManifest([]byte(c.in))
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
}
