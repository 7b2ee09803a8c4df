package gate

// enforcement is what the gate enforces for one agent's runs: the facts a
// sensitive admission policy's run-time obligations ask about
// (docs/spec/admission-policy-v1.md section 7).
type enforcement struct {
	// VerificationEnforced: the turn-scoped verification gate applies to
	// the agent's runs (enforceVerification on, at least one gated tool).
	VerificationEnforced bool
	// FailModeDeny: the agent's external verifier, when enabled, denies a
	// call it cannot get a verdict for (effective failMode deny). True
	// when no verifier is enabled: there is no verifier to fail open.
	FailModeDeny bool
	// Development: the gate was configured in development mode (it
	// accepts http webhooks).
	Development bool
	// VerifyAllowed: the agent's tool policy lets it call the verify tool
	// (only an explicit deny entry can refuse it, section 2.4). The
	// attester's verify route refuses a turn it would deny, so a denied
	// verify cannot be done by calling the route without asking the gate.
	VerifyAllowed bool
}

// EnforcementFor returns what the gate enforces for runs of agent (an id
// as CheckAgentID returns it; an agent without its own entry gets the
// defaults, as Decide does).
func (g *Gate) EnforcementFor(agent string) enforcement {
	p := g.policyFor(agent)
	return enforcement{
		VerificationEnforced: p.enforce && p.gated != nil && (len(p.gated.exact) > 0 || len(p.gated.globs) > 0),
		FailModeDeny:         !p.verifier.enabled || p.verifier.failMode == failDeny,
		Development:          g.cfg.Development,
		VerifyAllowed:        p.checkPolicy(verifyToolName) == "",
	}
}
