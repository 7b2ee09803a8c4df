package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/verify"
)

// maxIdentityBytes bounds an attester identity document.
const maxIdentityBytes = 1 << 20

// identityDoc is the GET /v1/identity response (docs/spec/attester-api.md).
type identityDoc struct {
	DID            string `json:"did"`
	PackPublicKey  string `json:"pack_public_key"`
	KeyAttestation string `json:"key_attestation"`
	Platform       string `json:"platform"`
	Simulated      bool   `json:"simulated"`
	IdentitySealed bool   `json:"identity_sealed"`
}

// identityMembers are the members of an identity document; all required.
var identityMembers = map[string]bool{
	"did": true, "pack_public_key": true, "key_attestation": true,
	"platform": true, "simulated": true, "identity_sealed": true,
}

// parseIdentity reads a GET /v1/identity response strictly (schema/jsonobj:
// no duplicate or case-variant keys, no unknown members, every member of its
// type), so what packctl checks is what any other strict reader would see.
func parseIdentity(raw []byte) (*identityDoc, error) {
	v, err := jsonobj.ParseObject(raw, pohjson.ParseOptions{})
	if err != nil {
		return nil, err
	}
	var r jsonobj.Reader
	m := r.Object(v, "$", identityMembers)
	id := &identityDoc{
		Simulated:      r.Bool(m["simulated"], "$.simulated"),
		IdentitySealed: r.Bool(m["identity_sealed"], "$.identity_sealed"),
	}
	id.DID, _ = r.Str(m["did"], "$.did")
	id.PackPublicKey, _ = r.Str(m["pack_public_key"], "$.pack_public_key")
	id.KeyAttestation, _ = r.Str(m["key_attestation"], "$.key_attestation")
	id.Platform, _ = r.Str(m["platform"], "$.platform")
	if err := r.Err(); err != nil {
		return nil, err
	}
	return id, nil
}

// attestedRecipient returns the attester's pack key after verifying its key
// attestation against the policy: from a URL with a fresh random challenge,
// or from a saved identity FILE with the challenge it was fetched with.
func attestedRecipient(src, policyPath, challengeB64u string, stderr io.Writer) (*envelope.PublicKey, int) {
	rawPolicy, err := readInput(policyPath)
	if err != nil {
		return nil, fail(stderr, "seal", exitCannot, err)
	}
	pol, err := verify.ParsePolicy(rawPolicy)
	if err != nil {
		errorf(stderr, "seal: --policy: %v", err)
		return nil, exitUsage
	}
	var (
		raw       []byte
		challenge []byte
	)
	if strings.HasPrefix(src, "https://") || strings.HasPrefix(src, "http://") {
		if challengeB64u != "" {
			errorf(stderr, "seal: --challenge is for a saved identity FILE; a URL gets a fresh one")
			return nil, exitUsage
		}
		challenge = make([]byte, 32)
		if _, err := rand.Read(challenge); err != nil {
			return nil, fail(stderr, "seal", exitCannot, err)
		}
		errorf(stderr, "seal: fetching the attester identity from %s", src)
		if raw, err = fetchIdentity(src, challenge); err != nil {
			return nil, fail(stderr, "seal", exitCannot, err)
		}
	} else {
		if raw, err = readInput(src); err != nil {
			return nil, fail(stderr, "seal", exitCannot, err)
		}
		if challengeB64u != "" {
			if challenge, err = b64u.Decode(challengeB64u); err != nil {
				errorf(stderr, "seal: --challenge: %v", err)
				return nil, exitUsage
			}
		}
	}
	id, err := parseIdentity(raw)
	if err != nil {
		errorf(stderr, "seal: attester identity: %v", err)
		if hint := inputHint(input{"--attester", src, raw, kindIdentity}); hint != "" {
			errorf(stderr, "seal: %s", hint)
		}
		return nil, exitRejected
	}
	res, err := verify.VerifyKeyAttestation([]byte(id.KeyAttestation), challenge, pol, verify.Options{Now: time.Now})
	if err != nil {
		errorf(stderr, "seal: attester key attestation: %v", err)
		return nil, verifyExit(err)
	}
	if res.AttesterDID != id.DID {
		errorf(stderr, "seal: the key attestation is signed by %s, not by the identity's DID %s", res.AttesterDID, id.DID)
		return nil, exitRejected
	}
	k, err := envelope.ParsePublicKey(id.PackPublicKey)
	if err != nil {
		errorf(stderr, "seal: attester pack key: %v", err)
		return nil, exitRejected
	}
	if res.RecipientX25519 == nil || !bytes.Equal(res.RecipientX25519, k.Bytes()) {
		errorf(stderr, "seal: the key attestation does not bind the attester's pack key")
		return nil, exitRejected
	}
	for _, w := range res.Warnings {
		errorf(stderr, "seal: warning: %s", w)
	}
	sim := ""
	if res.Simulated {
		sim = " (SIMULATED platform)"
	}
	errorf(stderr, "seal: key attestation of %s verified%s", res.AttesterDID, sim)
	return k, exitOK
}

func fetchIdentity(base string, challenge []byte) ([]byte, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/v1/identity")
	if err != nil {
		return nil, err
	}
	q := u.Query()
	q.Set("challenge", b64u.Encode(challenge))
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("attester identity: %s", resp.Status)
	}
	b, err := bounded.Read(resp.Body, maxIdentityBytes, "response")
	if errors.Is(err, bounded.ErrTooLarge) {
		return nil, errors.New("attester identity: response too large")
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}
