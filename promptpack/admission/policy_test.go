package admission

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/schemas"
)

// TestDeclaredLimits: the numbers in policyDoc's conf tags are the
// exported limits (a tag cannot name a constant).
func TestDeclaredLimits(t *testing.T) {
	if maxList != 1024 || maxNameLen != 1024 || maxChars != 1073741824 {
		t.Fatal("a limit changed: update the conf tags of policyDoc and this test")
	}
	allowed := map[int64]bool{3: true, 32: true, 64: true, maxList: true, maxChars: true}
	var walk func(typ reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Slice || typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			for opt := range strings.SplitSeq(f.Tag.Get("conf"), ",") {
				if v, ok := strings.CutPrefix(opt, "max="); ok {
					if n, err := strconv.ParseInt(v, 10, 64); err != nil || !allowed[n] {
						t.Errorf("%s.%s: max=%s is not a declared limit", typ.Name(), f.Name, v)
					}
				}
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[policyDoc]())
}

// TestPolicyErrors: a refusal is one *policyError (= *confdoc.ConfigError)
// whose text names the member as a user writes it and never its value.
func TestPolicyErrors(t *testing.T) {
	base := string(readTestdata(t, "open.policy.json"))
	for _, tc := range []struct {
		name, old, new string
		key            string
		want           []error
	}{
		{"unknown key", `"display": "any"`, `"display": "any", "salt": "s3cr3t-value"`,
			"owners.salt", []error{jsonobj.ErrUnknownField}},
		{"unknown key in a list entry", `"version": "1"`, `"version": "1", "pin": "s3cr3t-value"`,
			"recipes[0].pin", []error{jsonobj.ErrUnknownField}},
		{"range", `"max_total_chars": 80000`, `"max_total_chars": 1073741825`,
			"bootstrap.max_total_chars", []error{jsonobj.ErrTooLarge, confdoc.ErrBadValue}},
		{"negative", `"max_file_chars": 20000`, `"max_file_chars": -1`,
			"bootstrap.max_file_chars", []error{jsonobj.ErrWrongType, confdoc.ErrBadValue}},
		{"too many prompt modes", `"none"`, `"none", "s3cr3t-value"`,
			"prompt_modes", []error{jsonobj.ErrTooLarge}},
		{"list in the wrong mode", `"names": "any"`, `"names": "any", "allowed_names": ["exec"]`,
			"tools.allowed_names", []error{errContradiction}},
		{"list missing for its mode", `"display": "any"`, `"display": "hmac"`,
			"owners.hmac_values", []error{jsonobj.ErrMissingField}},
		{"unknown version", `admission-policy/v1`, `admission-policy/v9`,
			"admission_policy_version", []error{errUnknownVersion}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := strings.Replace(base, tc.old, tc.new, 1)
			if doc == base {
				t.Fatalf("%q not in open.policy.json", tc.old)
			}
			p, err := Parse([]byte(doc))
			pe, ok := errors.AsType[*policyError](err)
			if p != nil || !ok || pe.Key != tc.key || pe.Path() != "$."+tc.key {
				t.Fatalf("got %v, want an error at %s", err, tc.key)
			}
			for _, w := range append(tc.want, errMalformed) {
				if !errors.Is(err, w) {
					t.Errorf("%v does not match %v", err, w)
				}
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "admission: malformed policy: "+tc.key+": ") || strings.Contains(msg, "s3cr3t") {
				t.Errorf("message %q", msg)
			}
		})
	}
}

// TestDecoderAgreesWithSchema: Parse and the JSON Schema
// (schema/schemas/clawea/admission_policy.v1.json, the published
// description) accept and refuse the same documents: every policy vector,
// every policy file, every FuzzParse seed and the policies Suggest writes
// for the admit vectors. The exceptions are the vectors of codeOnly, rules
// JSON Schema cannot state, which Parse refuses and the schema accepts.
// This is why Parse does not run the schema as a second pass.
func TestDecoderAgreesWithSchema(t *testing.T) {
	type doc struct {
		name string
		data []byte
	}
	var docs []doc
	for _, v := range policyVectors(t) {
		docs = append(docs, doc{"vector " + v.Name, v.Data})
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.policy.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no policy files: %v", err)
	}
	for _, f := range files {
		docs = append(docs, doc{f, readTestdata(t, filepath.Base(f))})
	}
	seeds, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzParse", "*"))
	if err != nil || len(seeds) == 0 {
		t.Fatalf("no fuzz seeds: %v", err)
	}
	for _, f := range seeds {
		b := testfile.Read(t, f)
		lit, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "go test fuzz v1\n[]byte(")
		data, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		if !ok || err != nil {
			t.Fatalf("%s: not one []byte seed", f)
		}
		docs = append(docs, doc{f, []byte(data)})
	}
	for _, v := range packtest.AdmitVectors(t) {
		if _, ok := v.Pack["recipe"]; ok {
			continue
		}
		for _, sensitive := range []bool{false, true} {
			if out, err := Suggest(testPack(t, v.Set, v.Pack), sensitive); err == nil {
				docs = append(docs, doc{"suggested for " + v.Name + " sensitive=" + strconv.FormatBool(sensitive), out})
			}
		}
	}

	accepted := 0
	for _, d := range docs {
		_, perr := Parse(d.data)
		serr := schemas.Validate(schemas.AdmissionPolicyV1, d.data)
		name := strings.TrimPrefix(d.name, "vector ")
		switch {
		case d.name != name && codeOnly[name]:
			if perr == nil || serr != nil {
				t.Errorf("%s: Parse %v, schema %v; want only Parse to refuse it", d.name, perr, serr)
			}
		case (perr == nil) != (serr == nil):
			t.Errorf("%s: Parse %v, schema %v", d.name, perr, serr)
		case perr == nil:
			accepted++
		}
	}
	// The corpus must not shrink unnoticed: 52 vectors, 3 files, 14 seeds
	// and 53 suggestions (accepted documents with every mode).
	if len(docs) < 122 || accepted < 57 {
		t.Fatalf("%d documents, %d accepted: the corpus shrank", len(docs), accepted)
	}
	t.Logf("%d documents agree, %d of them accepted", len(docs), accepted)
}

// TestModelGateway: model_gateway is optional; "required" makes the policy
// require the gateway (and changes its hash), "optional" and absence do not.
func TestModelGateway(t *testing.T) {
	base := readTestdata(t, "sensitive.policy.json")
	with := func(v string) []byte {
		i := bytes.LastIndexByte(base, '}')
		return append(append(bytes.Clone(base[:i]), `,"model_gateway":"`+v+`"`...), base[i:]...)
	}
	for name, c := range map[string]struct {
		doc  []byte
		want bool
	}{"absent": {base, false}, "optional": {with("optional"), false}, "required": {with("required"), true}} {
		p, err := Parse(c.doc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.RequiresGateway() != c.want {
			t.Errorf("%s: RequiresGateway %v", name, p.RequiresGateway())
		}
	}
	a, _ := Parse(base)
	r, _ := Parse(with("required"))
	if a.Hash() == r.Hash() {
		t.Fatal("requiring the gateway does not change the policy hash")
	}
}
