package evidencedoc

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"fmt"

	"github.com/clawea/attester/schema/pohjson"
)

// Names the external tests (package evidencedoc_test) use but no other
// package needs.
const (
	Type          = jwsType
	MaxBlobBytes  = maxBlobBytes
	SensitiveTrue = sensitiveTrue
)

// DecodePayloadBoth decodes a JWS payload (the kid and key of the signer
// given) with decodePayload and with referenceDecodePayload, the decoder
// it replaced, for FuzzDecodePayloadAgrees.
func DecodePayloadBoth(payload []byte, key ed25519.PublicKey, did string) (got, ref *Document, gotErr, refErr error) {
	got, gotErr = decodePayload(payload, did, key, []byte("jws"))
	ref, refErr = referenceDecodePayload(payload, did, key, []byte("jws"))
	return got, ref, gotErr, refErr
}

// referenceDecodePayload is the decoder decodePayload replaced (kept, but
// for the shared version check, as the reference of
// FuzzDecodePayloadAgrees): it decodes the
// payload leniently with encoding/json and accepts it only if
// pohjson.Marshal re-encodes the result to the same bytes. It reads the
// payload five times; decodePayload reads it twice.
func referenceDecodePayload(payload []byte, did string, key ed25519.PublicKey, jws []byte) (*Document, error) {
	// The version check is decodePayload's own (payloadTree, without the
	// canonical-form check): what the reference stands for is the member
	// reading below.
	v, err := payloadTree(payload, false)
	if err != nil {
		return nil, err
	}
	// One re-encoding decides the form: the payload must be exactly the
	// canonical (JSON.stringify) encoding of the struct decoded from it.
	// That refuses a payload that is not canonical JSON, unknown members
	// (absent from the re-encoding), members in another order or case,
	// duplicates (decoded last-wins, re-encoded once), null or empty
	// optional members and missing required ones, so the lenient decoder
	// below never decides what is accepted. (Comparing Stringify(v) with the
	// payload as well would prove nothing more and cost a full encoding.)
	var w wirePayload
	if err := json.Unmarshal(payload, &w); err != nil {
		return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	re, err := pohjson.Marshal(&w)
	if err != nil || !bytes.Equal(re, payload) {
		return nil, fmt.Errorf("%w: payload is not the canonical form of a known document: members unknown, missing, empty or in the wrong order, case or form", ErrMalformed)
	}
	if w.AttesterDID != did {
		return nil, fmt.Errorf("%w: attester_did differs from the jws kid", ErrSignature)
	}
	d, err := fromWire(&w)
	if err != nil {
		return nil, err
	}
	var ctxMember *pohjson.Value
	if d.Kind == KindExecution {
		ctxMember = v.Get("execution")
	} else {
		ctxMember = v.Get("key")
	}
	if d.context, err = pohjson.Stringify(ctxMember); err != nil {
		return nil, fmt.Errorf("%w: evidence context: %v", ErrMalformed, err)
	}
	d.AttesterKey = append(ed25519.PublicKey(nil), key...)
	d.JWS = append([]byte(nil), jws...)
	return d, nil
}
