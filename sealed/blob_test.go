package sealed

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/fuzzcheck"
)

func testBlob(kind string, ctLen int) []byte {
	b := appendHeader(nil, kind)
	b = append(b, bytes.Repeat([]byte{0x11}, nonceSize)...)
	return append(b, bytes.Repeat([]byte{0x22}, ctLen)...)
}

func TestParseBlob(t *testing.T) {
	valid := testBlob("sev-snp", tagSize+1)
	cases := []struct {
		name string
		in   []byte
		want error // nil: accepted
	}{
		{"valid", valid, nil},
		{"valid max", testBlob(strings.Repeat("k", maxKindLen), maxSecretSize+tagSize), nil},
		{"empty", nil, errTruncated},
		{"label prefix", []byte(blobVersionLabel[:10]), errTruncated},
		{"label only", []byte(blobVersionLabel), errTruncated},
		{"no kind", append([]byte(blobVersionLabel), 7), errTruncated},
		{"short kind", append([]byte(blobVersionLabel), 7, 'a'), errTruncated},
		{"no ciphertext", testBlob("sev-snp", 0), errTruncated},
		{"tag only", testBlob("sev-snp", tagSize), errTruncated},
		{"kind length 0", append(append([]byte(blobVersionLabel), 0), bytes.Repeat([]byte{1}, 40)...), errMalformedBlob},
		{"kind length 65", testBlob(strings.Repeat("k", maxKindLen+1), 40), errMalformedBlob},
		{"kind upper", testBlob("SEV", 40), errMalformedBlob},
		{"kind space", testBlob("a b", 40), errMalformedBlob},
		{"kind nul", testBlob("a\x00b", 40), errMalformedBlob},
		{"v2", append([]byte("clawea.dev/attester/sealed/v2\n"), valid[len(blobVersionLabel):]...), errUnknownVersion},
		{"no newline", append([]byte("clawea.dev/attester/sealed/v1 "), valid[len(blobVersionLabel):]...), errUnknownVersion},
		{"garbage", bytes.Repeat([]byte{0xff}, 100), errUnknownVersion},
		{"short garbage", []byte("x"), errUnknownVersion},
		{"too large", testBlob("k", maxSecretSize+tagSize+maxKindLen), errMalformedBlob},
	}
	for _, c := range cases {
		bl, err := parseBlob(c.in)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
				continue
			}
			if !bytes.Equal(bl.encode(), c.in) {
				t.Errorf("%s: does not re-encode to the same bytes", c.name)
			}
			continue
		}
		if !errors.Is(err, c.want) || !errors.Is(err, errMalformedBlob) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if bl.kind != "" || bl.nonce != nil || bl.ciphertext != nil {
			t.Errorf("%s: returned data with an error", c.name)
		}
	}
}

func TestAssociatedData(t *testing.T) {
	ad := associatedData("sev-snp", "a/b")
	want := append([]byte(blobVersionLabel), 7)
	want = append(want, "sev-snp"...)
	want = append(want, 0, 3, 'a', '/', 'b')
	if !bytes.Equal(ad, want) {
		t.Fatalf("associated data %q, want %q", ad, want)
	}
}

// FuzzParseBlob checks that the parser never panics, that whatever it
// accepts re-encodes to the identical bytes, and that on error it returns
// nothing.
func FuzzParseBlob(f *testing.F) {
	f.Add(testBlob("sev-snp", tagSize+1))
	f.Add(testBlob(devKind, 40))
	f.Add([]byte(blobVersionLabel))
	f.Add([]byte("clawea.dev/attester/sealed/v2\n\x03tdx"))
	f.Fuzz(func(t *testing.T, in []byte) {
		bl, ok := fuzzcheck.RoundTrip(t, in, parseBlob, func(bl blob) ([]byte, error) { return bl.encode(), nil })
		if !ok {
			if _, err := parseBlob(in); !errors.Is(err, errMalformedBlob) {
				t.Fatalf("error outside ErrMalformedBlob: %v", err)
			}
			return
		}
		if !validKind(bl.kind) || len(bl.nonce) != nonceSize || len(bl.ciphertext) <= tagSize {
			t.Fatalf("accepted an ill-formed blob: %+v", bl)
		}
	})
}
