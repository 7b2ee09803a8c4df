package gate

import "testing"

func TestEnforcementFor(t *testing.T) {
	const hook = `"webhook":{"url":"https://v.example"}`
	for _, tc := range []struct {
		name, doc, agent string
		dev              bool
		want             enforcement
	}{
		{"defaults", `{}`, "main", false, enforcement{FailModeDeny: true, VerifyAllowed: true}},
		{"enforced", `{"agents":{"defaults":{"sig":{"enforceVerification":true}}}}`, "main", false,
			enforcement{VerificationEnforced: true, FailModeDeny: true, VerifyAllowed: true}},
		{"enforced, nothing gated", `{"agents":{"defaults":{"sig":{"enforceVerification":true,"gatedTools":[]}}}}`, "main", false,
			enforcement{FailModeDeny: true, VerifyAllowed: true}},
		{"verifier fail open", `{"tools":{"verifier":{"enabled":true,"failMode":"allow",` + hook + `}}}`, "main", false,
			enforcement{VerifyAllowed: true}},
		{"verifier fail closed", `{"tools":{"verifier":{"enabled":true,"failMode":"deny",` + hook + `}}}`, "main", false,
			enforcement{FailModeDeny: true, VerifyAllowed: true}},
		{"agent turns enforcement on and fail mode to deny", `{"tools":{"verifier":{"enabled":true,"failMode":"allow",` + hook + `}},
			"agents":{"list":[{"id":"ops","sig":{"enforceVerification":true},"tools":{"verifier":{"failMode":"deny"}}}]}}`, "ops", false,
			enforcement{VerificationEnforced: true, FailModeDeny: true, VerifyAllowed: true}},
		{"another agent keeps the defaults", `{"tools":{"verifier":{"enabled":true,"failMode":"allow",` + hook + `}},
			"agents":{"list":[{"id":"ops","sig":{"enforceVerification":true},"tools":{"verifier":{"failMode":"deny"}}}]}}`, "main", false,
			enforcement{VerifyAllowed: true}},
		{"development", `{}`, "main", true, enforcement{FailModeDeny: true, Development: true, VerifyAllowed: true}},
		{"verify denied", `{"tools":{"deny":["verify"]}}`, "main", false, enforcement{FailModeDeny: true}},
		{"verify denied by a glob for an agent", `{"agents":{"list":[{"id":"ops","tools":{"deny":["ver*"]}}]}}`, "ops", false,
			enforcement{FailModeDeny: true}},
		{"verify not filtered by allow or profile", `{"tools":{"profile":"minimal","allow":["read"]}}`, "main", false,
			enforcement{FailModeDeny: true, VerifyAllowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newTestGate(t, mustParse(t, tc.doc, ParseOptions{Development: tc.dev}))
			if got := g.EnforcementFor(tc.agent); got != tc.want {
				t.Fatalf("EnforcementFor(%q) = %+v, want %+v", tc.agent, got, tc.want)
			}
		})
	}
}
