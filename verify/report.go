package verify

import (
	"errors"
	"slices"

	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/schema/schemas"
)

// promptReport holds the SystemPromptReport members policy uses.
type promptReport struct {
	recipe    Recipe
	finalHash string
	templates []reportTemplate
}

type reportTemplate struct{ name, hash string }

// readPromptReport reads the members policy uses from a report the schema
// accepted, which makes them strings where present and refuses unknown
// members.
func readPromptReport(root *pohjson.Value) *promptReport {
	rep := &promptReport{}
	if r := root.Get("recipe"); r != nil {
		rep.recipe.ID, _ = r.GetString("id")
		rep.recipe.Version, _ = r.GetString("version")
	}
	if f := root.Get("final"); f != nil {
		rep.finalHash, _ = f.GetString("system_prompt_hash_b64u")
	}
	if in := root.Get("inputs"); in != nil {
		if ts := in.Get("templates"); ts != nil {
			for _, t := range ts.Elems() {
				var rt reportTemplate
				rt.name, _ = t.GetString("name")
				rt.hash, _ = t.GetString("hash")
				rep.templates = append(rep.templates, rt)
			}
		}
	}
	return rep
}

// parseReport parses the report once, strictly, and picks its schema: v2
// (salted commitments, docs/spec/report-v2.md) when it says so, else v1. A
// report the strict parse refuses (a fraction, or not JSON) is checked
// against v1 as it parses with fractions allowed, as the schema package
// would read it.
func parseReport(raw []byte) (*pohjson.Value, string, error) {
	root, err := pohjson.ParseWith(raw, pohjson.ParseOptions{MaxBytes: maxReportBytes})
	if err != nil {
		root, err = pohjson.ParseWith(raw, pohjson.ParseOptions{MaxBytes: maxReportBytes, AllowFloats: true})
		return root, schemas.SystemPromptReportV1, err
	}
	if root.Kind() == pohjson.Object {
		if v, _ := root.GetString("report_version"); v == "2" {
			return root, schemas.SystemPromptReportV2, nil
		}
	}
	return root, schemas.SystemPromptReportV1, nil
}

// checkReport verifies the supplied SystemPromptReport (v1 or v2: both have
// recipe, final and inputs.templates where this check reads them) against
// the attested report hash and prompt hash. The report is parsed once; its
// JCS hash is computed over the bytes received.
func (st *state) checkReport() *Error {
	raw := st.opts.Report
	if raw == nil {
		st.skip(checkReport, "no SystemPromptReport supplied")
		return nil
	}
	root, schemaID, err := parseReport(raw)
	if err != nil {
		return rejected(checkReport, poh.SchemaValidationFailed, ": %s", err)
	}
	if err := schemas.ValidateValue(schemaID, root); err != nil {
		if ve, ok := errors.AsType[*schemas.ValidationError](err); ok {
			return rejected(checkReport, poh.SchemaValidationFailed, "%s: %s", ve.Location, ve.Msg)
		}
		return rejected(checkReport, poh.SchemaValidationFailed, "not a SystemPromptReport v1 or v2")
	}
	h, err := jcs.Hash(raw)
	if err != nil {
		return wrapRejected(checkReport, poh.MalformedEnvelope, err)
	}
	c := &st.res.Commitments
	if h != c.SystemPromptReportHashB64u {
		return rejected(checkReport, poh.PromptCommitmentMismatch, "the report's hash is not the attested system_prompt_report_hash_b64u")
	}
	rep := readPromptReport(root)
	if rep.finalHash != c.SystemPromptHashB64u {
		return rejected(checkReport, poh.PromptCommitmentMismatch, "the report's final prompt hash is not the attested system_prompt_hash_b64u")
	}
	st.report = rep
	st.res.Report = &ReportResult{HashB64u: h, RecipeID: rep.recipe.ID, RecipeVer: rep.recipe.Version, Templates: len(rep.templates)}
	st.pass(checkReport, "recipe %s/%s, %d templates", rep.recipe.ID, rep.recipe.Version, len(rep.templates))
	return nil
}

// checkReportPolicy applies the trusted template and recipe lists.
func checkReportPolicy(rep *promptReport, p *Policy) *Error {
	if len(p.TrustedRecipes) > 0 && !slices.Contains(p.TrustedRecipes, rep.recipe) {
		return policyErr(policyRecipe, "trusted_recipes", "recipe %q version %q is not in trusted_recipes", safetext.Clip(rep.recipe.ID, 48), safetext.Clip(rep.recipe.Version, 48))
	}
	if len(p.TrustedTemplates) > 0 {
		for _, t := range rep.templates {
			if want, ok := p.TrustedTemplates[t.name]; !ok || want != t.hash {
				return policyErr(policyTemplates, "trusted_templates", "template %q with hash %s is not in trusted_templates", safetext.Clip(t.name, 48), safetext.Clip(t.hash, 80))
			}
		}
	}
	return nil
}
