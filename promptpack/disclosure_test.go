package promptpack

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/citest"
	"github.com/clawea/attester/internal/fuzzcheck"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/b64u"
)

var update = flag.Bool("update", false, "rewrite testdata/example and testdata/negative")

// disclosureData holds the disclosure vectors: the worked example and the
// negative vectors.
var disclosureData = filepath.Join("testdata", "disclosure")

// exampleSalts are the deterministic salts of the worked example:
// SHA-256(prefix || "kind:id"). Real packs draw salts from crypto/rand.
func exampleSalts(p *Pack, prefix string) {
	for sel := range p.ReportSalts {
		p.ReportSalts[sel] = sha256.Sum256([]byte(prefix + sel))
	}
}

// disclosureExamplePack builds the worked example's pack (report v2 with the given
// salt prefix, or v1 for "").
func disclosureExamplePack(tb testing.TB, saltPrefix string) *Pack {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(conformanceDir, "templates")); err != nil {
		citest.SkipOrFail(tb, "conformance data not available: %v", err)
	}
	params := testfile.Read(tb, filepath.Join("testdata", "reportv2", "params.json"))
	v := 2
	if saltPrefix == "" {
		v = 1
	}
	p, err := Build(params, conformanceDir, openclawsig.ID, BuildOptions{ReportVersion: v})
	if err != nil {
		tb.Fatal(err)
	}
	if v == 2 {
		exampleSalts(p, saltPrefix)
	}
	return p
}

// golden compares got with testdata/name, or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join(disclosureData, name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := testfile.Read(t, path)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the computed bytes:\n got %s\nwant %s", name, got, want)
	}
}

// specHas checks that the spec quotes the file's bytes verbatim.
func specHas(t *testing.T, spec, name string) {
	t.Helper()
	doc := testfile.Read(t, filepath.Join("..", "docs", "spec", spec))
	b := testfile.Read(t, filepath.Join(disclosureData, name))
	if !bytes.Contains(doc, b) {
		t.Errorf("docs/spec/%s does not quote testdata/%s", spec, name)
	}
}

var exampleReveal = []string{"params:ownerNumbers", "bootstrap:AGENTS.md"}

// TestWorkedExample recomputes the worked example of docs/spec/report-v2.md
// and docs/spec/disclosure-v1.md and checks its bytes.
func TestWorkedExample(t *testing.T) {
	p := disclosureExamplePack(t, "example salt ")
	defer p.Wipe()
	rb := selfRebuild(t, p)
	defer rb.Wipe()
	golden(t, "example/report.json", rb.ReportJCS)
	salts := ""
	for _, sel := range rb.inputSelectors() {
		s := p.ReportSalts[sel]
		salts += fmt.Sprintf("%s\t%x\n", sel, s)
	}
	golden(t, "example/salts.tsv", []byte(salts))
	enc, err := rb.Disclose(exampleReveal)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "example/disclosure.json", enc)
	golden(t, "example/report_hash.txt", []byte(rb.ReportHashB64u()+"\n"))
	res, err := VerifyDisclosure(rb.ReportJCS, enc)
	if err != nil {
		t.Fatal(err)
	}
	if res.ReportHashB64u != rb.ReportHashB64u() || len(res.Revealed) != 2 || res.Revealed[0].ID != "AGENTS.md" {
		t.Fatalf("result %+v", res)
	}
	if *update {
		return
	}
	specHas(t, "report-v2.md", "example/report.json")
	specHas(t, "report-v2.md", "example/salts.tsv")
	specHas(t, "disclosure-v1.md", "example/disclosure.json")
	specHas(t, "disclosure-v1.md", "example/report_hash.txt")
}

// TestRevealOneHidesOthers: the disclosure holds the revealed inputs and
// their salts only; no other input's salt or content is in it.
func TestRevealOneHidesOthers(t *testing.T) {
	p := disclosureExamplePack(t, "example salt ")
	rb := selfRebuild(t, p)
	enc, err := rb.Disclose([]string{"bootstrap:AGENTS.md"})
	if err != nil {
		t.Fatal(err)
	}
	for sel, s := range p.ReportSalts {
		if sel == "bootstrap:AGENTS.md" {
			continue
		}
		if bytes.Contains(enc, []byte(fmt.Sprintf("%x", s))) || strings.Contains(string(enc), b64(s[:])) {
			t.Fatalf("the salt of %s is in the disclosure", sel)
		}
	}
	for _, secret := range []string{"Be kind.", "4271", "Europe/Berlin"} {
		if bytes.Contains(enc, []byte(secret)) {
			t.Fatalf("%q leaked into the disclosure", secret)
		}
	}
}

func TestCreateRefusesUnknown(t *testing.T) {
	p := disclosureExamplePack(t, "example salt ")
	rb := selfRebuild(t, p)
	_, err := rb.Disclose([]string{"bootstrap:AGENTS.md", "bootstrap:NOPE.md", "weird"})
	if !errors.Is(err, errDisclosureUnknownInput) {
		t.Fatalf("err %v", err)
	}
	for _, name := range []string{`"bootstrap:NOPE.md"`, `"weird"`} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
	v1 := disclosureExamplePack(t, "")
	if _, err := selfRebuild(t, v1).Disclose([]string{"bootstrap:AGENTS.md"}); !errors.Is(err, errDisclosureNotSalted) {
		t.Fatalf("v1: %v", err)
	}
}

// negative is one negative vector: a disclosure and a report with the
// reason code Verify must give.
type negative struct {
	name, disclosure, report, code string
}

func readVectors(t *testing.T) []negative {
	t.Helper()
	f, err := os.Open(filepath.Join(disclosureData, "negative", "vectors.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []negative
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		c := strings.Split(line, "\t")
		if len(c) != 4 {
			t.Fatalf("vectors.tsv: %q", line)
		}
		out = append(out, negative{c[0], c[1], c[2], c[3]})
	}
	return out
}

// makeNegatives derives the negative vectors from the worked example.
func makeNegatives(t *testing.T) {
	good := testfile.Read(t, filepath.Join(disclosureData, "example", "disclosure.json"))
	other := disclosureExamplePack(t, "other run salt ")
	orb := selfRebuild(t, other)
	v1 := disclosureExamplePack(t, "")
	v1rb := selfRebuild(t, v1)
	w := func(name string, b []byte) { golden(t, "negative/"+name, b) }
	w("other-run-report.json", orb.ReportJCS)
	w("v1-report.json", v1rb.ReportJCS)
	d, err := parseDisclosure(good)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(mut func(d *disclosure)) []byte {
		c, _ := parseDisclosure(good)
		mut(c)
		b, err := c.encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// Inputs are sorted: [0] bootstrap:AGENTS.md, [1] params:ownerNumbers.
	w("content-byte.json", enc(func(d *disclosure) { d.Inputs[0].Content[2] ^= 1 }))
	w("owner-number-byte.json", enc(func(d *disclosure) { d.Inputs[1].Content[len(d.Inputs[1].Content)-3]++ }))
	w("salt-byte.json", enc(func(d *disclosure) { d.Inputs[0].Salt[31] ^= 0x80 }))
	w("report-hash-byte.json", enc(func(d *disclosure) { d.ReportHash[0] ^= 1 }))
	w("wrong-salt.json", enc(func(d *disclosure) { d.Inputs[0].Salt = d.Inputs[1].Salt }))
	w("other-input-id.json", enc(func(d *disclosure) { d.Inputs[0].ID = "SOUL.md" }))
	w("other-kind.json", enc(func(d *disclosure) { d.Inputs[1].Kind = "prompt" }))
	w("unknown-input.json", enc(func(d *disclosure) { d.Inputs[0].ID = "MISSING.md" }))
	w("rebound-to-other-run.json", enc(func(d *disclosure) { d.ReportHash = orb.ReportHash }))
	s := string(good)
	w("not-canonical.json", []byte(strings.Replace(s, `{"disclosure_version"`, `{ "disclosure_version"`, 1)))
	w("unknown-field.json", []byte(strings.Replace(s, `"revealed":`, `"run_id":"x","revealed":`, 1)))
	w("unknown-version.json", []byte(strings.Replace(s, disclosureVersion, "clawea.dev/disclosure/v2", 1)))
	w("no-version.json", []byte(strings.Replace(s, `"disclosure_version":"`+disclosureVersion+`",`, ``, 1)))
	w("empty-revealed.json", []byte(s[:strings.Index(s, `"revealed":`)]+`"revealed":[]}`))
	i := strings.Index(s, `"revealed":[`) + len(`"revealed":[`)
	j := strings.Index(s, `},{`) + 1
	first, rest := s[i:j], s[j+1:len(s)-2]
	w("unsorted.json", []byte(s[:i]+rest+","+first+"]}"))
	w("duplicate.json", []byte(s[:i]+first+","+first+","+rest+"]}"))
	w("short-salt.json", []byte(strings.Replace(s, b64(d.Inputs[0].Salt[:]), b64(d.Inputs[0].Salt[:31]), 1)))
	w("binary-content.json", []byte(strings.Replace(s, `"content":"`, `"content":"\u0000`, 1)))
	w("trailing-data.json", []byte(s+" "))
}

func TestNegativeVectors(t *testing.T) {
	if *update {
		makeNegatives(t)
	}
	report := testfile.Read(t, filepath.Join(disclosureData, "example", "report.json"))
	vs := readVectors(t)
	if len(vs) < 15 {
		t.Fatalf("only %d vectors", len(vs))
	}
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			dis := testfile.Read(t, filepath.Join(disclosureData, v.disclosure))
			rep := report
			if v.report != "-" {
				rep = testfile.Read(t, filepath.Join(disclosureData, v.report))
			}
			res, err := VerifyDisclosure(rep, dis)
			if v.code == "OK" {
				if err != nil {
					t.Fatalf("err %v", err)
				}
				return
			}
			if err == nil || res != nil {
				t.Fatalf("accepted (res %v)", res)
			}
			if got := DisclosureCode(err); got != v.code {
				t.Fatalf("code %s (%v), want %s", got, err, v.code)
			}
		})
	}
}

func TestEncodeRefusesWhatParseRefuses(t *testing.T) {
	good := &disclosure{Inputs: []disclosedInput{{Kind: "bootstrap", ID: "A.md", Content: []byte("x")}}}
	if _, err := good.encode(); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]*disclosure{
		"empty":      {},
		"bad kind":   {Inputs: []disclosedInput{{Kind: "other", ID: "x"}}},
		"empty id":   {Inputs: []disclosedInput{{Kind: "bootstrap", ID: ""}}},
		"not utf-8":  {Inputs: []disclosedInput{{Kind: "bootstrap", ID: "A.md", Content: []byte{0xff}}}},
		"unsorted":   {Inputs: []disclosedInput{{Kind: "params", ID: "x"}, {Kind: "bootstrap", ID: "x"}}},
		"duplicated": {Inputs: []disclosedInput{{Kind: "params", ID: "x"}, {Kind: "params", ID: "x"}}},
	} {
		if _, err := d.encode(); !errors.Is(err, errDisclosureMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzParseDisclosure: whatever parseDisclosure accepts re-encodes to identical bytes; on
// error nothing is returned. Verify never accepts a mutated disclosure of
// the example unless it is byte-identical to the original.
func FuzzParseDisclosure(f *testing.F) {
	for _, name := range []string{"example/disclosure.json", "negative/unsorted.json", "negative/content-byte.json"} {
		if b, err := os.ReadFile(filepath.Join(disclosureData, name)); err == nil {
			f.Add(b)
		}
	}
	report, _ := os.ReadFile(filepath.Join(disclosureData, "example", "report.json"))
	good, _ := os.ReadFile(filepath.Join(disclosureData, "example", "disclosure.json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, ok := fuzzcheck.RoundTrip(t, data, parseDisclosure, (*disclosure).encode); !ok {
			if _, err := parseDisclosure(data); DisclosureCode(err) == "" {
				t.Fatalf("error without a reason code: %v", err)
			}
			return
		}
		if report != nil {
			if _, err := VerifyDisclosure(report, data); err == nil && !bytes.Equal(data, good) && !isSubset(data, good) {
				t.Fatalf("verified a disclosure that is not the example or part of it: %q", data)
			}
		}
	})
}

// isSubset reports whether d reveals a subset of good's inputs (which
// verifies legitimately).
func isSubset(d, good []byte) bool {
	a, err1 := parseDisclosure(d)
	b, err2 := parseDisclosure(good)
	if err1 != nil || err2 != nil || a.ReportHash != b.ReportHash {
		return false
	}
	for _, x := range a.Inputs {
		found := false
		for _, y := range b.Inputs {
			if x.selector() == y.selector() && bytes.Equal(x.Content, y.Content) && x.Salt == y.Salt {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func b64(b []byte) string { return b64u.Encode(b) }
