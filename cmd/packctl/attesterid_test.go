package main

import (
	"encoding/json"
	"net/http"

	"github.com/clawea/attester/control"
	"github.com/clawea/attester/schema/b64u"
)

// identityHandler serves an attester's GET /v1/identity from its control
// plane, as the attester's public API does, for packctl's tests (which do
// not import cmd/attester).
func identityHandler(svc *control.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/identity" {
			http.NotFound(w, r)
			return
		}
		var challenge []byte
		if q := r.URL.Query().Get("challenge"); q != "" {
			b, err := b64u.Decode(q)
			if err != nil {
				http.Error(w, "bad challenge", http.StatusBadRequest)
				return
			}
			challenge = b
		}
		doc, err := svc.IdentityDocument(r.Context(), challenge)
		if err != nil {
			http.Error(w, "cannot attest", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	})
}
