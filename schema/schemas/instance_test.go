package schemas

import (
	"bytes"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/schema/pohjson"
)

// instanceAgrees fails unless the instance Validate hands to the validator
// (the strict parse's value) is what jsonschema.UnmarshalJSON decodes from
// the same bytes, for every document the strict parse accepts.
func instanceAgrees(t *testing.T, doc []byte) {
	t.Helper()
	v, err := pohjson.ParseWith(doc, pohjson.ParseOptions{MaxBytes: maxDocumentBytes, AllowFloats: true})
	if err != nil {
		return
	}
	want, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("%.80q: the strict parser accepts what jsonschema does not: %v", doc, err)
	}
	if got := v.Interface(); !reflect.DeepEqual(got, want) {
		t.Fatalf("%.80q: instance %#v, jsonschema decodes %#v", doc, got, want)
	}
}

var instanceSeeds = []string{
	`{}`, `[]`, `null`, `true`, `"x"`, `0`, `-1`, `9007199254740991`, `-9007199254740991`,
	`9007199254740993`, `1.5`, `-0.0`, `1e3`, `1E-3`, `2.50`, `1e400`,
	`{"a":[1,2.0,{"b":null}],"c":"\u00e9\ud83d\ude00\n\"","d":false}`,
	`{"a":1,"A":2}`, `[[[[[]]]]]`, ` {"a" : 1 } `,
}

func TestInstanceAgreesWithDecoder(t *testing.T) {
	for _, s := range instanceSeeds {
		instanceAgrees(t, []byte(s))
	}
	for _, sub := range []string{"vectors", "schemas"} {
		files, _ := filepath.Glob(filepath.Join(sharedDir(t, sub), "*.json"))
		if len(files) == 0 {
			t.Fatalf("no %s documents", sub)
		}
		for _, f := range files {
			doc := testfile.Read(t, f)
			instanceAgrees(t, doc)
		}
	}
}

func FuzzInstance(f *testing.F) {
	for _, s := range instanceSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(instanceAgrees)
}
