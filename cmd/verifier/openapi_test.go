package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// TestOpenAPIMatchesService keeps docs/spec/verifier-openapi.json equal to
// the service: the same methods and paths, the status codes of the
// verifier-api spec's response table for POST /v1/verify, and the request
// members the parser knows, required ones marked.
func TestOpenAPIMatchesService(t *testing.T) {
	raw := testfile.Read(t, filepath.Join(testfile.ModuleRoot(t), "docs", "spec", "verifier-openapi.json"))
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct{ Responses map[string]any }
		Comp    struct {
			Schemas map[string]struct {
				Required   []string       `json:"required"`
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	e := newEnv(t, 0)
	var served []string
	for _, r := range e.svc.routes() {
		served = append(served, r.pattern)
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("documented %v, served %v", documented, served)
	}
	// Every documented route answers, and another method on its path is 405.
	for _, p := range served {
		method, path, _ := strings.Cut(p, " ")
		for _, m := range []string{method, http.MethodPut} {
			rec := httptest.NewRecorder()
			e.h.ServeHTTP(rec, httptest.NewRequest(m, path, strings.NewReader("{}")))
			if got := rec.Code; (m == method) == (got == http.StatusMethodNotAllowed || got == http.StatusNotFound) {
				t.Errorf("%s %s: %d", m, path, got)
			}
		}
	}
	codes := slices.Sorted(maps.Keys(doc.Paths["/v1/verify"]["post"].Responses))
	if want := []string{"200", "400", "413", "415", "500", "503"}; !slices.Equal(codes, want) {
		t.Errorf("POST /v1/verify codes %v, want %v (verifier-api.md section 2)", codes, want)
	}
	req := doc.Comp.Schemas["VerifyRequest"]
	if got, want := slices.Sorted(maps.Keys(req.Properties)), slices.Sorted(maps.Keys(requestMembers)); !slices.Equal(got, want) {
		t.Errorf("request members %v, parser knows %v", got, want)
	}
	var required []string
	for k, v := range requestMembers {
		if v {
			required = append(required, k)
		}
	}
	slices.Sort(required)
	if got := slices.Sorted(slices.Values(req.Required)); !slices.Equal(got, required) {
		t.Errorf("required %v, want %v", got, required)
	}
}
