package gate

import "testing"

func TestEnforcementFor(t *testing.T) {
	const hook = `"webhook":{"url":"https://v.example"}`
	for _, tc := range []struct {
		name, doc, agent string
		dev              bool
		want             enforcement
	}{
		{"defaults", `{}`, "main", false, enforcement{FailModeDeny: true}},
		{"enforced", `{"agents":{"defaults":{"sig":{"enforceVerification":true}}}}`, "main", false,
			enforcement{VerificationEnforced: true, FailModeDeny: true}},
		{"enforced, nothing gated", `{"agents":{"defaults":{"sig":{"enforceVerification":true,"gatedTools":[]}}}}`, "main", false,
			enforcement{FailModeDeny: true}},
		{"verifier fail open", `{"tools":{"verifier":{"enabled":true,"failMode":"allow",` + hook + `}}}`, "main", false,
			enforcement{}},
		{"verifier fail closed", `{"tools":{"verifier":{"enabled":true,"failMode":"deny",` + hook + `}}}`, "main", false,
			enforcement{FailModeDeny: true}},
		{"agent turns enforcement on and fail mode to deny", `{"tools":{"verifier":{"enabled":true,"failMode":"allow",` + hook + `}},
			"agents":{"list":[{"id":"ops","sig":{"enforceVerification":true},"tools":{"verifier":{"failMode":"deny"}}}]}}`, "ops", false,
			enforcement{VerificationEnforced: true, FailModeDeny: true}},
		{"another agent keeps the defaults", `{"tools":{"verifier":{"enabled":true,"failMode":"allow",` + hook + `}},
			"agents":{"list":[{"id":"ops","sig":{"enforceVerification":true},"tools":{"verifier":{"failMode":"deny"}}}]}}`, "main", false,
			enforcement{}},
		{"development", `{}`, "main", true, enforcement{FailModeDeny: true, Development: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGate(t, mustParse(t, tc.doc, ParseOptions{Development: tc.dev}))
			if got := g.EnforcementFor(tc.agent); got != tc.want {
				t.Fatalf("EnforcementFor(%q) = %+v, want %+v", tc.agent, got, tc.want)
			}
		})
	}
}
