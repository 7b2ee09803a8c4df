package poh

import (
	"slices"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/pohjson"
)

// DisclosureLeaf is one disclosed_leaves member of a selective disclosure.
type DisclosureLeaf struct {
	// Type is the JSON type name of Value: string, number, boolean, null,
	// array or object.
	Type     string
	Value    *pohjson.Value
	SaltB64u string
}

// JSONTypeName is the selective-disclosure type name of v: "null", "array",
// "object", "string", "number" or "boolean".
func JSONTypeName(v *pohjson.Value) string {
	switch v.Kind() {
	case pohjson.Null:
		return "null"
	case pohjson.Bool:
		return "boolean"
	case pohjson.Number:
		return "number"
	case pohjson.String:
		return "string"
	case pohjson.Array:
		return "array"
	case pohjson.Object:
		return "object"
	}
	return ""
}

// DisclosureLeafHash is b64u(SHA-256(UTF-8(path ":" JCS({type, value,
// salt_b64u})))).
func DisclosureLeafHash(path string, leaf DisclosureLeaf) (string, error) {
	obj := pohjson.NewObject(
		pohjson.M("type", pohjson.NewString(leaf.Type)),
		pohjson.M("value", leaf.Value),
		pohjson.M("salt_b64u", pohjson.NewString(leaf.SaltB64u)),
	)
	raw, err := pohjson.Stringify(obj)
	if err != nil {
		return "", err
	}
	canon, err := jcs.Canonicalize(raw)
	if err != nil {
		return "", err
	}
	return b64u.SHA256(append([]byte(path+":"), canon...)), nil
}

// DisclosureRoot is b64u(SHA-256(JCS(sorted leaf hashes))): the leaf hashes
// (redacted and disclosed together) sorted in code-unit order, as a JSON
// array of strings. Duplicates are kept.
func DisclosureRoot(leafHashes []string) (string, error) {
	sorted := slices.Clone(leafHashes)
	// Leaf hashes are base64url (ASCII), so byte order is UTF-16 order.
	slices.Sort(sorted)
	elems := make([]*pohjson.Value, len(sorted))
	for i, h := range sorted {
		elems[i] = pohjson.NewString(h)
	}
	raw, err := pohjson.Stringify(pohjson.NewArray(elems...))
	if err != nil {
		return "", err
	}
	canon, err := jcs.Canonicalize(raw)
	if err != nil {
		return "", err
	}
	return b64u.SHA256(canon), nil
}

// verifySelectiveDisclosure checks a (schema-valid) selective_disclosure
// object against the hash it must commit to (args_hash_b64u or
// result_hash_b64u), in this order:
//
//  1. disclosure_algorithm is vir_v2_typed_lexicographical (DISCLOSURE_ALGORITHM_UNKNOWN)
//  2. merkle_root_b64u equals committed (DISCLOSURE_ROOT_MISMATCH)
//  3. each disclosed leaf's type names the JSON type of its value (DISCLOSURE_TYPE_MISMATCH)
//  4. the root recomputed from the redacted and disclosed leaf hashes equals
//     merkle_root_b64u (DISCLOSURE_ROOT_MISMATCH)
func verifySelectiveDisclosure(sd *pohjson.Value, committed string) error {
	if alg, _ := sd.GetString("disclosure_algorithm"); alg != DisclosureAlgorithm {
		return fail(disclosureAlgorithmUnknown, "disclosure_algorithm", "selective disclosure algorithm is not supported")
	}
	root, _ := sd.GetString("merkle_root_b64u")
	if root != committed {
		return fail(disclosureRootMismatch, "merkle_root_b64u", "disclosure root is not the committed hash")
	}
	var hashes []string
	for _, h := range sd.Get("redacted_leaf_hashes_b64u").Elems() {
		s, _ := h.Str()
		hashes = append(hashes, s)
	}
	for _, m := range sd.Get("disclosed_leaves").Members() {
		field := "disclosed_leaves." + m.Key
		leaf := DisclosureLeaf{Value: m.Value.Get("value")}
		leaf.Type, _ = m.Value.GetString("type")
		leaf.SaltB64u, _ = m.Value.GetString("salt_b64u")
		if leaf.Value == nil || JSONTypeName(leaf.Value) != leaf.Type {
			return fail(disclosureTypeMismatch, field, "leaf type does not match its value")
		}
		h, err := DisclosureLeafHash(m.Key, leaf)
		if err != nil {
			return fail(disclosureRootMismatch, field, "leaf cannot be hashed: %v", err)
		}
		hashes = append(hashes, h)
	}
	got, err := DisclosureRoot(hashes)
	if err != nil || got != root {
		return fail(disclosureRootMismatch, "merkle_root_b64u", "recomputed disclosure root does not match")
	}
	return nil
}
