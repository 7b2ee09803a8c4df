package hclreport

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/internal/fuzzcheck"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/wire/tdxquote"
)

// The real HCL reports of the conformance set (copied, with their NOTICE,
// into verify/platform/testdata).
func samples(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	for _, d := range []string{"azure-snp-vtpm", "azure-tdx-vtpm"} {
		b := testfile.Read(t, filepath.Join("..", "..", "verify", "platform", "testdata", d, "hcl-report.bin"))
		out[d] = b
	}
	return out
}

func TestParseSamples(t *testing.T) {
	want := map[string]uint32{"azure-snp-vtpm": typeSNP, "azure-tdx-vtpm": typeTDX}
	for name, b := range samples(t) {
		r, err := Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Type != want[name] {
			t.Errorf("%s: type %d", name, r.Type)
		}
		if !bytes.Equal(r.Marshal(), b) {
			t.Errorf("%s: round trip differs", name)
		}
		c, err := ParseClaims(r.Claims)
		if err != nil {
			t.Fatalf("%s: claims: %v", name, err)
		}
		if c.AK.N.BitLen() != 2048 || c.AK.E != 65537 {
			t.Errorf("%s: ak %d bits e %d", name, c.AK.N.BitLen(), c.AK.E)
		}
		if c.UserData != [userDataSize]byte{} {
			t.Errorf("%s: user data %x", name, c.UserData)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	b := samples(t)["azure-snp-vtpm"]
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
	}{
		{"signature", func(b []byte) []byte { b[0] ^= 1; return b }},
		{"version", func(b []byte) []byte { b[4] = 3; return b }},
		{"status", func(b []byte) []byte { b[16] = 1; return b }},
		{"report type", func(b []byte) []byte { b[headerSize+hwAreaSize+8] = 3; return b }},
		{"hash type", func(b []byte) []byte { b[headerSize+hwAreaSize+12] = 2; return b }},
		{"claims size", func(b []byte) []byte { b[headerSize+hwAreaSize+16]++; return b }},
		{"padding", func(b []byte) []byte { b[len(b)-1] = 1; return b }},
		{"truncated", func(b []byte) []byte { return b[:claimsOffset+10] }},
		{"too large", func(b []byte) []byte { return append(b, make([]byte, maxReportSize)...) }},
	} {
		r, err := Parse(tc.edit(bytes.Clone(b)))
		if !errors.Is(err, errMalformed) || r != nil {
			t.Errorf("%s: got %v, %v", tc.name, r, err)
		}
	}
}

func TestClaimsRoundTrip(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var ud [userDataSize]byte
	ud[0], ud[63] = 0xab, 0x01
	c, err := ParseClaims(NewClaims(&k.PublicKey, ud))
	if err != nil {
		t.Fatal(err)
	}
	if !c.AK.Equal(&k.PublicKey) || c.UserData != ud {
		t.Fatal("claims differ")
	}
}

func TestParseClaimsRefuses(t *testing.T) {
	n := "qR7LqAABDczZDIJxh4YuOOp_0EiqZ0TvLsy8ZoLd3OMHs-1mLF4rNkW4d5vHgF5UwOHcLIMWnrjHr5cPop_pvnapqYvv1hQVBwhfOV4EedT27Fp2N2Jrj54JVc500a5s8ogiOTTm3bJ86VCoKGn3Ou2WMPWGYbIOTInVfJYsASUXeihOBO6r_DFDjzNP-XOW_YinXf7Xj_Gbcp0Pngwz8OHqnQrb9cyMe-sSbcUVdHoaj3CcAmjGvvhpyIzKxCjHg_LqUBmVx5xtKfZSreeerQvOsoDRKcx2_S-oDt6eP1jsXFldIpqbSM34qA3gBkve6xy1jVEUrclNgxFtMI5PDQ"
	ud := `"` + string(bytes.Repeat([]byte("0"), 128)) + `"`
	key := `{"kid":"HCLAkPub","kty":"RSA","e":"AQAB","n":"` + n + `"}`
	for name, doc := range map[string]string{
		"no ak":          `{"keys":[{"kid":"other","kty":"RSA","e":"AQAB","n":"` + n + `"}],"user-data":` + ud + `}`,
		"two aks":        `{"keys":[` + key + `,` + key + `],"user-data":` + ud + `}`,
		"duplicate key":  `{"keys":[` + key + `],"user-data":` + ud + `,"user-data":` + ud + `}`,
		"ec ak":          `{"keys":[{"kid":"HCLAkPub","kty":"EC","e":"AQAB","n":"` + n + `"}],"user-data":` + ud + `}`,
		"even exponent":  `{"keys":[{"kid":"HCLAkPub","kty":"RSA","e":"AQAA","n":"` + n + `"}],"user-data":` + ud + `}`,
		"short modulus":  `{"keys":[{"kid":"HCLAkPub","kty":"RSA","e":"AQAB","n":"qR7L"}],"user-data":` + ud + `}`,
		"no user data":   `{"keys":[` + key + `]}`,
		"short userdata": `{"keys":[` + key + `],"user-data":"00"}`,
		"not hex":        `{"keys":[` + key + `],"user-data":"` + string(bytes.Repeat([]byte("g"), 128)) + `"}`,
	} {
		if c, err := ParseClaims([]byte(doc)); !errors.Is(err, errMalformed) || c != nil {
			t.Errorf("%s: got %v, %v", name, c, err)
		}
	}
}

// FuzzParse: no panic, nothing returned with an error, and whatever is
// accepted re-encodes to the identical bytes.
func FuzzParse(f *testing.F) {
	for _, b := range samples(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzcheck.RoundTrip(t, b, Parse, func(r *Report) ([]byte, error) { return r.Marshal(), nil })
	})
}

// FuzzParseClaims: no panic, nothing returned with an error.
func FuzzParseClaims(f *testing.F) {
	for _, b := range samples(f) {
		r, err := Parse(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(r.Claims)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseClaims(b)
		if err != nil && c != nil {
			t.Fatal("claims returned with an error")
		}
	})
}

// TestHardware: the TD quote sample ends in 70 zero bytes no signature
// covers; they are dropped, and any other trailing byte is refused.
func TestHardware(t *testing.T) {
	r, err := Parse(samples(t)["azure-tdx-vtpm"])
	if err != nil {
		t.Fatal(err)
	}
	q := testfile.Read(t, filepath.Join("..", "..", "verify", "platform", "testdata", "azure-tdx-vtpm", "td-quote.bin"))
	ev, err := r.Hardware(false, nil, q)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Platform != "tdx" || len(ev.Blob) != len(q)-70 || len(ev.CertChain) != 3 {
		t.Fatalf("%s %d bytes %d certs", ev.Platform, len(ev.Blob), len(ev.CertChain))
	}
	// A DCAP version 5 quote (Trustee's sample) is not a producer's quote.
	v5 := testfile.Read(t, filepath.Join("..", "..", "verify", "platform", "testdata", "trustee", "tdx", "tdx_quote_5.dat"))
	if ev, err := r.Hardware(false, nil, v5); !errors.Is(err, tdxquote.ErrUnsupported) || ev != nil {
		t.Fatalf("version 5 td quote: %v", err)
	}
	q = bytes.Clone(q)
	q[len(q)-1] = 1
	if _, err := r.Hardware(false, nil, q); !errors.Is(err, errMalformed) {
		t.Fatalf("trailing byte: %v", err)
	}
	snp, err := Parse(samples(t)["azure-snp-vtpm"])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := snp.Hardware(false, nil, nil); err == nil {
		t.Fatal("snp report without a vcek")
	}
}
