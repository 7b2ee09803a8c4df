package verify

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsonobj"
	"github.com/clawea/attester/schema/poh"
	"github.com/clawea/attester/schema/pohjson"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/schema/schemas"
)

// promptReport holds the SystemPromptReport.v1 members policy uses.
type promptReport struct {
	Recipe struct {
		ID      string `json:"id"`
		Version string `json:"version"`
	} `json:"recipe"`
	Final struct {
		SystemPromptHashB64u string `json:"system_prompt_hash_b64u"`
	} `json:"final"`
	Inputs struct {
		Templates []struct {
			Name string `json:"name"`
			Hash string `json:"hash"`
		} `json:"templates"`
	} `json:"inputs"`
}

// checkReport verifies the supplied SystemPromptReport.v1 against the
// attested report hash and prompt hash.
func (st *state) checkReport() *Error {
	raw := st.opts.Report
	if raw == nil {
		st.skip(checkReport, "no SystemPromptReport supplied")
		return nil
	}
	// v1 or v2 (salted commitments, docs/spec/report-v2.md): both have
	// recipe, final and inputs.templates where this check reads them.
	schemaID := schemas.SystemPromptReportV1
	if root, err := jsonobj.ParseObject(raw, pohjson.ParseOptions{MaxBytes: maxReportBytes}); err == nil {
		if v, _ := root.GetString("report_version"); v == "2" {
			schemaID = schemas.SystemPromptReportV2
		}
	}
	if err := schemas.Validate(schemaID, raw); err != nil {
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
	// The schema refuses unknown members, so decoding cannot meet a case
	// variant of a known name.
	var rep promptReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return rejected(checkReport, poh.SchemaValidationFailed, "unexpected report shape")
	}
	if rep.Final.SystemPromptHashB64u != c.SystemPromptHashB64u {
		return rejected(checkReport, poh.PromptCommitmentMismatch, "the report's final prompt hash is not the attested system_prompt_hash_b64u")
	}
	st.report = &rep
	st.res.Report = &ReportResult{HashB64u: h, RecipeID: rep.Recipe.ID, RecipeVer: rep.Recipe.Version, Templates: len(rep.Inputs.Templates)}
	st.pass(checkReport, "recipe %s/%s, %d templates", rep.Recipe.ID, rep.Recipe.Version, len(rep.Inputs.Templates))
	return nil
}

// checkReportPolicy applies the trusted template and recipe lists.
func checkReportPolicy(rep *promptReport, p *Policy) *Error {
	if len(p.TrustedRecipes) > 0 && !slices.Contains(p.TrustedRecipes, Recipe{ID: rep.Recipe.ID, Version: rep.Recipe.Version}) {
		return policyErr(policyRecipe, "trusted_recipes", "recipe %q version %q is not in trusted_recipes", safetext.Clip(rep.Recipe.ID, 48), safetext.Clip(rep.Recipe.Version, 48))
	}
	if len(p.TrustedTemplates) > 0 {
		for _, t := range rep.Inputs.Templates {
			if want, ok := p.TrustedTemplates[t.Name]; !ok || want != t.Hash {
				return policyErr(policyTemplates, "trusted_templates", "template %q with hash %s is not in trusted_templates", safetext.Clip(t.Name, 48), safetext.Clip(t.Hash, 80))
			}
		}
	}
	return nil
}
