package poh

import (
	"errors"
	"slices"

	"github.com/clawea/attester/schema/jsstr"
	"github.com/clawea/attester/schema/pohjson"
)

// PromptPackEntry is one prompt_pack.v1 entry commitment.
type PromptPackEntry struct {
	EntryID         string
	ContentHashB64u string
}

// errDuplicateEntry is returned by PromptRootHash for a repeated entry_id.
var errDuplicateEntry = errors.New("poh: duplicate prompt pack entry_id")

// PromptRootHash is the PoH prompt_pack.v1 root (its schema description):
// b64u(SHA-256(JSON.stringify({prompt_pack_version: "1", entries:
// entries_sorted.map(({entry_id, content_hash_b64u}) => ({entry_id,
// content_hash_b64u}))}))) with entries sorted by entry_id as JavaScript's
// default sort orders strings (UTF-16 code units). Duplicate ids are
// refused.
func PromptRootHash(entries []PromptPackEntry) (string, error) {
	sorted := slices.Clone(entries)
	slices.SortStableFunc(sorted, func(a, b PromptPackEntry) int {
		return jsstr.Compare(a.EntryID, b.EntryID)
	})
	elems := make([]*pohjson.Value, 0, len(sorted))
	for i, e := range sorted {
		if i > 0 && sorted[i-1].EntryID == e.EntryID {
			return "", errDuplicateEntry
		}
		elems = append(elems, pohjson.NewObject(
			pohjson.M("entry_id", pohjson.NewString(e.EntryID)),
			pohjson.M("content_hash_b64u", pohjson.NewString(e.ContentHashB64u)),
		))
	}
	return pohjson.Hash(pohjson.NewObject(
		pohjson.M("prompt_pack_version", pohjson.NewString("1")),
		pohjson.M("entries", pohjson.NewArray(elems...)),
	))
}
