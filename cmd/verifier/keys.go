package main

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/clawea/attester/verify/earresult"
)

// The key documents' paths (docs/spec/verifier-api.md section 7).
const (
	jwksPath      = "/.well-known/jwks.json"
	discoveryPath = "/.well-known/veraison/verification"
)

// keyDocs are the documents that publish the EAR verification keys, made
// once at start: the keys do not change while the service runs.
type keyDocs struct {
	kid, alg  string // the signing key's
	jwks      []byte
	discovery []byte
}

// publishedKey is what the service reads back from a key set it made.
type publishedKey struct {
	Kid string `json:"kid"`
	Alg string `json:"alg"`
}

func newKeyDocs(current crypto.PublicKey, previous []crypto.PublicKey, version string) (*keyDocs, error) {
	set, err := earresult.PublicKeySet(append([]crypto.PublicKey{current}, previous...)...)
	if err != nil {
		return nil, err
	}
	var keys struct{ Keys []json.RawMessage }
	var first publishedKey
	if err := json.Unmarshal(set, &keys); err != nil || len(keys.Keys) == 0 {
		return nil, errors.New("verifier: unreadable key set")
	}
	if err := json.Unmarshal(keys.Keys[0], &first); err != nil || first.Kid == "" {
		return nil, errors.New("verifier: key set without kid")
	}
	// Veraison's verification discovery form: a relying party written for
	// a Veraison verifier finds the EAR key where it looks for it.
	disc, err := json.Marshal(struct {
		Key          json.RawMessage   `json:"ear-verification-key"`
		MediaTypes   []string          `json:"media-types"`
		Version      string            `json:"version"`
		ServiceState string            `json:"service-state"`
		Endpoints    map[string]string `json:"api-endpoints"`
	}{keys.Keys[0], []string{"application/json"}, version, "READY", map[string]string{
		"verify": "/v1/verify", "jwks": jwksPath,
	}})
	if err != nil {
		return nil, err
	}
	return &keyDocs{kid: first.Kid, alg: first.Alg, jwks: append(set, '\n'), discovery: append(disc, '\n')}, nil
}

func (k *keyDocs) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	serveDoc(w, "application/jwk-set+json", k.jwks)
}

func (k *keyDocs) serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	serveDoc(w, "application/json", k.discovery)
}

func serveDoc(w http.ResponseWriter, contentType string, b []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "max-age=300")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// maxKeyFileBytes bounds a key file (--ear-key, --ear-previous-key).
const maxKeyFileBytes = 16 << 10

// parsePublicKey reads one PEM "PUBLIC KEY" (SPKI) block, or the public
// half of a PEM PKCS #8 private key (the retired key file itself), holding
// an Ed25519 or ECDSA P-256 key. Its input comes from readPublicKey's
// bounded read.
func parsePublicKey(data []byte) (crypto.PublicKey, error) {
	block, rest := pem.Decode(data)
	switch {
	case block == nil:
		return nil, errors.New("want a PEM PUBLIC KEY or PRIVATE KEY block")
	case len(bytes.TrimSpace(rest)) != 0:
		return nil, errors.New("want exactly one PEM block")
	case block.Type == "PRIVATE KEY":
		s, err := earresult.ParseSigningKey(data)
		if err != nil {
			return nil, err
		}
		return s.Public(), nil
	case block.Type != "PUBLIC KEY":
		return nil, fmt.Errorf("PEM block %q, want PUBLIC KEY or PRIVATE KEY", block.Type)
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, errors.New("malformed SubjectPublicKeyInfo")
	}
	if _, err := earresult.PublicKeySet(pub); err != nil {
		return nil, err
	}
	return pub, nil
}
