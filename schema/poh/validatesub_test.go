package poh

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/schemas"
)

// parsedMembersAgree checks, for one envelope, what validateSub relies on
// when it skips its JSON.stringify step for a strict parse's member: every
// value of the envelope as Verify parses it has a JSON.stringify form, and
// for every member of a verified bundle's metadata validateSub answers
// the same (accepts, or refuses with the same error) with and without the
// stringify step, against both schemas it is used with.
// It returns how many of those answers were refusals.
func parsedMembersAgree(t *testing.T, raw []byte) (refused int) {
	t.Helper()
	env, err := pohjson.ParseWith(raw, pohjson.ParseOptions{MaxBytes: MaxEnvelopeBytes, OneCopy: true})
	if err != nil {
		return 0
	}
	var walk func(v *pohjson.Value)
	walk = func(v *pohjson.Value) {
		if _, err := pohjson.Stringify(v); err != nil {
			t.Fatalf("%.80q: a value of a strict parse does not stringify: %v", raw, err)
		}
		for _, e := range v.Elems() {
			walk(e)
		}
		for _, m := range v.Members() {
			walk(m.Value)
		}
	}
	walk(env)
	b, err := VerifyProofBundle(raw, BundleOptions{})
	if err != nil || b.Metadata == nil {
		return 0
	}
	if b.Metadata != b.parsedMetadata {
		t.Fatal("VerifyProofBundle does not mark its metadata as parsed")
	}
	members := append([]pohjson.Member{{Key: "", Value: b.Metadata}}, b.Metadata.Members()...)
	for _, m := range members {
		for _, id := range []string{schemas.PoHSystemPromptReportV1, schemas.PromptPackV1} {
			errFast := validateSub(m.Value, "f", id, true)
			fast, full := fmt.Sprint(errFast), fmt.Sprint(validateSub(m.Value, "f", id, false))
			if fast != full {
				t.Fatalf("metadata %q against %s: %s without stringify, %s with it", m.Key, id, fast, full)
			}
			if errFast != nil {
				refused++
			}
		}
	}
	return refused
}

// corpusArgs returns the []byte arguments of a `go test fuzz v1` corpus file.
func corpusArgs(t *testing.T, file string) [][]byte {
	t.Helper()
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(testfile.Read(t, file)))
	sc.Buffer(nil, MaxEnvelopeBytes)
	for sc.Scan() {
		line := sc.Text()
		if q, ok := strings.CutPrefix(line, "[]byte("); ok {
			s, err := strconv.Unquote(strings.TrimSuffix(q, ")"))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			out = append(out, []byte(s))
		}
	}
	return out
}

// TestParsedMembersStringify runs parsedMembersAgree over the bundle
// vectors, this package's and verify's fuzz corpora (their bundle
// arguments) and a signed bundle whose metadata has every member
// CheckPromptCommitments validates.
func TestParsedMembersStringify(t *testing.T) {
	var files []string
	for _, g := range []string{"testdata/bundles/*.json", "testdata/fuzz/FuzzVerify/*", "../../verify/testdata/fuzz/FuzzVerify/*"} {
		m, _ := filepath.Glob(g)
		if len(m) == 0 {
			t.Fatalf("no files match %s", g)
		}
		files = append(files, m...)
	}
	n, refused := 0, 0
	for _, f := range files {
		docs := [][]byte{testfile.Read(t, f)}
		if !strings.HasSuffix(f, ".json") {
			docs = corpusArgs(t, f)
		}
		for _, d := range docs {
			refused += parsedMembersAgree(t, d)
			n++
		}
	}
	for _, edit := range []func(md map[string]any){
		nil,
		func(md map[string]any) { delete(md["system_prompt_report"].(map[string]any), "run_id") },
		func(md map[string]any) { md["prompt_pack"].(map[string]any)["entries"] = "none" },
		func(md map[string]any) { md["system_prompt_report"] = []any{1, "x", nil} },
	} {
		fix, _ := commitFixture(t, edit)
		raw := signedBundle(t, testKey(t), func(p *pohjson.Value) *pohjson.Value {
			ms := p.Members()
			for i := range ms {
				if ms[i].Key == "metadata" {
					ms[i].Value = fix.Metadata
				}
			}
			return pohjson.NewObject(ms...)
		})
		if _, err := VerifyProofBundle(raw, BundleOptions{}); err != nil {
			t.Fatalf("the signed bundle with prompt metadata: %v", err)
		}
		refused += parsedMembersAgree(t, raw)
		n++
	}
	if refused < 8 {
		t.Fatalf("only %d refusals compared: the fixtures no longer reach validateSub's errors", refused)
	}
	t.Logf("%d documents, %d refusals compared", n, refused)
}
