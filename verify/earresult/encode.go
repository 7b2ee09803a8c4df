package earresult

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/veraison/ear"
)

// marshal returns exactly the bytes of ar.MarshalJSON (ear's validation,
// then encoding/json over ear's AsMap: every object's keys sorted, HTML
// characters escaped) without the reflection and the maps in between: on
// a verifier answering a thousand requests a second, AsMap's reflection
// (reflect.FuncOf per AsMap call) and the map round trip cost more than
// the EAR's signature. A result with claims New never makes (raw evidence,
// TEE info, policy claims, key attestation) goes through ar.MarshalJSON
// itself. TestMarshalMatchesEAR holds the two to the same bytes.
func marshal(ar *ear.AttestationResult) ([]byte, error) {
	if ar.RawEvidence != nil || ar.VeraisonTeeInfo != nil {
		return ar.MarshalJSON()
	}
	for _, ap := range ar.Submods {
		if ap == nil || ap.VeraisonPolicyClaims != nil || ap.VeraisonKeyAttestation != nil {
			return ar.MarshalJSON()
		}
	}
	if err := validateEAR(ar); err != nil {
		return nil, err
	}
	e := encoder{buf: make([]byte, 0, 2048)}
	// The members in sorted order: ear.verifier-id, eat_nonce,
	// eat_profile, iat, submods.
	e.buf = append(e.buf, `{"ear.verifier-id":`...)
	e.buf = append(e.buf, `{"build":`...)
	e.strPtr(ar.VerifierID.Build)
	e.buf = append(e.buf, `,"developer":`...)
	e.strPtr(ar.VerifierID.Developer)
	e.buf = append(e.buf, '}')
	if ar.Nonce != nil {
		e.buf = append(e.buf, `,"eat_nonce":`...)
		e.str(*ar.Nonce)
	}
	e.buf = append(e.buf, `,"eat_profile":`...)
	e.str(*ar.Profile)
	e.buf = append(e.buf, `,"iat":`...)
	e.buf = strconv.AppendInt(e.buf, *ar.IssuedAt, 10)
	e.buf = append(e.buf, `,"submods":`...)
	if ar.Submods == nil {
		e.buf = append(e.buf, "null"...)
	} else {
		e.buf = append(e.buf, '{')
		for i, name := range slices.Sorted(maps.Keys(ar.Submods)) {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.str(name)
			e.buf = append(e.buf, ':')
			if err := e.appraisal(ar.Submods[name]); err != nil {
				return nil, err
			}
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, '}')
	if e.err != nil {
		return nil, e.err
	}
	return e.buf, nil
}

// validateEAR is ear's validation of an AttestationResult (the checks and
// the message of its unexported validate), which MarshalJSON runs first.
func validateEAR(ar *ear.AttestationResult) error {
	var missing, invalid []string
	if ar.Profile == nil {
		missing = append(missing, "'eat_profile'")
	} else if *ar.Profile != ear.EatProfile {
		invalid = append(invalid, fmt.Sprintf("eat_profile (%s)", *ar.Profile))
	}
	if ar.IssuedAt == nil {
		missing = append(missing, "'iat'")
	}
	if ar.VerifierID == nil {
		missing = append(missing, "'verifier-id'")
	}
	if ar.Nonce != nil {
		if n := len(*ar.Nonce); n > 88 || n < 8 {
			invalid = append(invalid, fmt.Sprintf("eat_nonce (%d bytes)", n))
		}
	}
	if len(ar.Submods) == 0 {
		missing = append(missing, "'submods' (at least one appraisal must be present)")
	}
	for name, ap := range ar.Submods {
		if ap.Status == nil {
			invalid = append(invalid, fmt.Sprintf("submods[%s]: missing mandatory 'ear.status'", name))
		}
	}
	if len(missing) == 0 && len(invalid) == 0 {
		return nil
	}
	// ear's message, both parts when both apply.
	var msg string
	if len(missing) != 0 {
		msg = "missing mandatory " + strings.Join(missing, ", ")
	}
	if len(invalid) != 0 {
		if msg != "" {
			msg += "; "
		}
		msg += "invalid value(s) for " + strings.Join(invalid, ", ")
	}
	return errors.New(msg)
}

// typeTrustTier names the type in the error encoding/json gives for a
// trust tier ear cannot name.
var typeTrustTier = reflect.TypeFor[ear.TrustTier]()

// appraisal encodes one submod: ear.appraisal-policy-id, ear.status,
// ear.trustworthiness-vector, ear.veraison.annotated-evidence (sorted).
func (e *encoder) appraisal(ap *ear.Appraisal) error {
	e.buf = append(e.buf, '{')
	if ap.AppraisalPolicyID != nil {
		e.buf = append(e.buf, `"ear.appraisal-policy-id":`...)
		e.str(*ap.AppraisalPolicyID)
		e.buf = append(e.buf, ',')
	}
	tier, ok := ear.TrustTierToString[*ap.Status]
	if !ok {
		// encoding/json's error for a failing MarshalJSON.
		return &json.MarshalerError{Type: typeTrustTier, Err: fmt.Errorf("unknown trust tier '%d'", *ap.Status)}
	}
	e.buf = append(e.buf, `"ear.status":`...)
	e.str(tier)
	if tv := ap.TrustVector; tv != nil {
		// TrustVector.AsMap: all eight claims, numbers, sorted.
		for i, c := range [...]struct {
			name  string
			claim ear.TrustClaim
		}{
			{"configuration", tv.Configuration}, {"executables", tv.Executables},
			{"file-system", tv.FileSystem}, {"hardware", tv.Hardware},
			{"instance-identity", tv.InstanceIdentity}, {"runtime-opaque", tv.RuntimeOpaque},
			{"sourced-data", tv.SourcedData}, {"storage-opaque", tv.StorageOpaque},
		} {
			if i == 0 {
				e.buf = append(e.buf, `,"ear.trustworthiness-vector":{`...)
			} else {
				e.buf = append(e.buf, ',')
			}
			e.buf = append(append(append(e.buf, '"'), c.name...), `":`...)
			e.buf = strconv.AppendInt(e.buf, int64(c.claim), 10)
		}
		e.buf = append(e.buf, '}')
	}
	if a := ap.VeraisonAnnotatedEvidence; a != nil {
		e.buf = append(e.buf, `,"ear.veraison.annotated-evidence":`...)
		e.value(*a)
	}
	e.buf = append(e.buf, '}')
	return nil
}

// encoder appends JSON as encoding/json.Marshal writes it.
type encoder struct {
	buf []byte
	err error
}

func (e *encoder) strPtr(s *string) {
	if s == nil {
		e.buf = append(e.buf, "null"...)
		return
	}
	e.str(*s)
}

// str appends s quoted. Strings of printable ASCII other than the
// characters encoding/json escapes (", \, and <, > and & for HTML) are
// copied; any other goes through encoding/json.
func (e *encoder) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			e.marshal(s)
			return
		}
	}
	e.buf = append(e.buf, '"')
	e.buf = append(e.buf, s...)
	e.buf = append(e.buf, '"')
}

// value appends an annotation value: the kinds New puts there are
// written here, any other by encoding/json.
func (e *encoder) value(v interface{}) {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case string:
		e.str(x)
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case int:
		e.buf = strconv.AppendInt(e.buf, int64(x), 10)
	case int64:
		e.buf = strconv.AppendInt(e.buf, x, 10)
	case uint64:
		e.buf = strconv.AppendUint(e.buf, x, 10)
	case map[string]interface{}:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return
		}
		e.buf = append(e.buf, '{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.str(k)
			e.buf = append(e.buf, ':')
			e.value(x[k])
		}
		e.buf = append(e.buf, '}')
	case []interface{}:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return
		}
		e.buf = append(e.buf, '[')
		for i, y := range x {
			if i > 0 {
				e.buf = append(e.buf, ',')
			}
			e.value(y)
		}
		e.buf = append(e.buf, ']')
	default:
		e.marshal(v)
	}
}

// marshal appends encoding/json's form of v: the same bytes as v has
// inside a larger value.
func (e *encoder) marshal(v interface{}) {
	b, err := json.Marshal(v)
	if err != nil && e.err == nil {
		e.err = err
	}
	e.buf = append(e.buf, b...)
}
