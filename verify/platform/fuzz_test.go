package platform

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/enclave/tdx/fakeqe"
	"github.com/clawea/attester/wire/evidence"
)

var fuzzPlatforms = []string{evidence.PlatformSEVSNP, evidence.PlatformTDX, evidence.PlatformTPM, "other"}

// fuzzEvidence builds evidence from fuzz arguments.
func fuzzEvidence(sel uint8, simulated bool, format string, blob, sig, c0, c1, c2 []byte, auxKey string, auxVal []byte) *evidence.Evidence {
	ev := &evidence.Evidence{
		Platform:  fuzzPlatforms[int(sel)%len(fuzzPlatforms)],
		Simulated: simulated,
		Format:    format,
		Blob:      blob,
		Signature: sig,
	}
	for _, c := range [][]byte{c0, c1, c2} {
		if c != nil {
			ev.CertChain = append(ev.CertChain, c)
		}
	}
	if auxKey != "" {
		ev.Aux = map[string][]byte{auxKey: auxVal}
	}
	return ev
}

type fuzzSeed struct {
	sel        uint8
	simulated  bool
	format     string
	blob, sig  []byte
	c0, c1, c2 []byte
	auxKey     string
	auxVal     []byte
}

func seedOf(ev *evidence.Evidence) fuzzSeed {
	s := fuzzSeed{simulated: ev.Simulated, format: ev.Format, blob: ev.Blob, sig: ev.Signature}
	for i, p := range fuzzPlatforms {
		if p == ev.Platform {
			s.sel = uint8(i)
		}
	}
	chain := append(append([][]byte(nil), ev.CertChain...), nil, nil, nil)
	s.c0, s.c1, s.c2 = chain[0], chain[1], chain[2]
	for k, v := range ev.Aux {
		s.auxKey, s.auxVal = k, v
	}
	if len(ev.Aux) > 1 {
		// The fuzz signature carries one aux entry: the TPM fixture's pcr
		// values are added back in FuzzVerify.
		s.auxKey, s.auxVal = "ak_public", ev.Aux["ak_public"]
	}
	return s
}

func fuzzSeeds(t testing.TB) []fuzzSeed {
	rd := testRD(t, "fuzz")
	fx := loadTPMFixture(t)
	return []fuzzSeed{
		seedOf(simSEV(t, sim.Options{}, rd)),
		seedOf(simTDX(t, fakeqe.Options{}, rd)),
		seedOf(fx.Evidence),
	}
}

// FuzzVerify: Verify never panics on arbitrary evidence, returns a result
// xor an error, every error is an *Error of exactly one class, and no
// library panic had to be recovered (the strict parsers run first).
func FuzzVerify(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s.sel, s.simulated, s.format, s.blob, s.sig, s.c0, s.c1, s.c2, s.auxKey, s.auxVal)
	}
	rd := testRD(f, "fuzz")
	fx := loadTPMFixture(f)
	f.Fuzz(func(t *testing.T, sel uint8, simulated bool, format string, blob, sig, c0, c1, c2 []byte, auxKey string, auxVal []byte) {
		ev := fuzzEvidence(sel, simulated, format, blob, sig, c0, c1, c2, auxKey, auxVal)
		if ev.Platform == evidence.PlatformTPM && auxKey == "ak_public" {
			ev.Aux["pcr_values"] = fx.Evidence.Aux["pcr_values"]
		}
		for _, opts := range []Options{
			simOpts(),
			{Now: fixedNow, AllowSimulated: true, TrustedTPMAKs: [][]byte{fx.AKName}},
			{Now: fixedNow, CertCache: &CertCache{MaxEntries: 1}, AllowUncheckedRevocation: true},
		} {
			res, err := Verify(ev, rd, opts)
			if (res == nil) == (err == nil) {
				t.Fatalf("result %v and error %v", res != nil, err)
			}
			if err == nil {
				continue
			}
			if _, ok := errors.AsType[*Error](err); !ok {
				t.Fatalf("untyped error %v", err)
			}
			n := 0
			for _, c := range []error{ErrRejected, ErrCannotCheck, ErrBadOptions} {
				if errors.Is(err, c) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("error %v has %d classes", err, n)
			}
			if errors.Is(err, errInternal) {
				t.Fatalf("a verification library panicked: %v", err)
			}
		}
	})
}

var update = flag.Bool("update", false, "regenerate testdata/fuzz/FuzzVerify from fresh simulated evidence")

// TestWriteFuzzSeeds regenerates testdata/fuzz/FuzzVerify with -update
// (go test ./verify/platform -run TestWriteFuzzSeeds -update); FuzzVerify
// replays the seeds on every go test.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*update {
		t.Skip("generator: run with -update to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzVerify")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b := func(v []byte) string { return "[]byte(" + strconv.Quote(string(v)) + ")" }
	for i, s := range fuzzSeeds(t) {
		var w strings.Builder
		w.WriteString("go test fuzz v1\n")
		fmt.Fprintf(&w, "byte(%s)\n", strconv.QuoteRune(rune(s.sel)))
		fmt.Fprintf(&w, "bool(%v)\n", s.simulated)
		fmt.Fprintf(&w, "string(%s)\n", strconv.Quote(s.format))
		for _, v := range [][]byte{s.blob, s.sig, s.c0, s.c1, s.c2} {
			w.WriteString(b(v) + "\n")
		}
		fmt.Fprintf(&w, "string(%s)\n", strconv.Quote(s.auxKey))
		w.WriteString(b(s.auxVal) + "\n")
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(w.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
