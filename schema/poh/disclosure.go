package poh

import (
	"slices"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/pohjson"
)

// DisclosureLeaf is one leaf of a selective disclosure: the member at Path
// of the committed object.
type DisclosureLeaf struct {
	Path string
	// Type is the JSON type name of Value: string, number, boolean, null,
	// array or object. NewDisclosure fills in an empty Type from Value.
	Type     string
	Value    *pohjson.Value
	SaltB64u string
	// Redacted leaves appear in the disclosure by their hash only.
	Redacted bool
}

// NewDisclosure builds the selective_disclosure object over leaves
// (algorithm vir_v2_typed_lexicographical) and returns it with its Merkle
// root, the value the receipt commits to as args_hash_b64u or
// result_hash_b64u. Disclosed leaves keep their order.
func NewDisclosure(leaves []DisclosureLeaf) (*pohjson.Value, string, error) {
	var all []string
	var redacted []*pohjson.Value
	var disclosed []pohjson.Member
	for _, l := range leaves {
		if l.Type == "" {
			l.Type = jsonTypeName(l.Value)
		}
		h, err := disclosureLeafHash(l)
		if err != nil {
			return nil, "", err
		}
		all = append(all, h)
		if l.Redacted {
			redacted = append(redacted, pohjson.NewString(h))
			continue
		}
		disclosed = append(disclosed, pohjson.M(l.Path, pohjson.NewObject(
			pohjson.M("type", pohjson.NewString(l.Type)),
			pohjson.M("value", l.Value),
			pohjson.M("salt_b64u", pohjson.NewString(l.SaltB64u)),
		)))
	}
	root, err := disclosureRoot(all)
	if err != nil {
		return nil, "", err
	}
	return pohjson.NewObject(
		pohjson.M("disclosure_algorithm", pohjson.NewString(disclosureAlgorithm)),
		pohjson.M("merkle_root_b64u", pohjson.NewString(root)),
		pohjson.M("redacted_leaf_hashes_b64u", pohjson.NewArray(redacted...)),
		pohjson.M("disclosed_leaves", pohjson.NewObject(disclosed...)),
	), root, nil
}

// jsonTypeName is the selective-disclosure type name of v: "null", "array",
// "object", "string", "number" or "boolean".
func jsonTypeName(v *pohjson.Value) string {
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

// disclosureLeafHash is b64u(SHA-256(UTF-8(leaf.Path ":" JCS({type, value,
// salt_b64u})))).
func disclosureLeafHash(leaf DisclosureLeaf) (string, error) {
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
	return b64u.SHA256(append([]byte(leaf.Path+":"), canon...)), nil
}

// disclosureRoot is b64u(SHA-256(JCS(sorted leaf hashes))): the leaf hashes
// (redacted and disclosed together) sorted in code-unit order, as a JSON
// array of strings. Duplicates are kept.
func disclosureRoot(leafHashes []string) (string, error) {
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
	if alg, _ := sd.GetString("disclosure_algorithm"); alg != disclosureAlgorithm {
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
		leaf := DisclosureLeaf{Path: m.Key, Value: m.Value.Get("value")}
		leaf.Type, _ = m.Value.GetString("type")
		leaf.SaltB64u, _ = m.Value.GetString("salt_b64u")
		if leaf.Value == nil || jsonTypeName(leaf.Value) != leaf.Type {
			return fail(disclosureTypeMismatch, field, "leaf type does not match its value")
		}
		h, err := disclosureLeafHash(leaf)
		if err != nil {
			return fail(disclosureRootMismatch, field, "leaf cannot be hashed: %v", err)
		}
		hashes = append(hashes, h)
	}
	got, err := disclosureRoot(hashes)
	if err != nil || got != root {
		return fail(disclosureRootMismatch, "merkle_root_b64u", "recomputed disclosure root does not match")
	}
	return nil
}
