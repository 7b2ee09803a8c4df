package gate

import (
	"slices"
	"strconv"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/jcs"
)

// policyVersion names the policy document format, including the fixed
// profile and group tables and the pipeline order of docs/spec/gate-v1.md.
const policyVersion = "clawea.gate.policy.v1"

// policyDocument returns the JCS (RFC 8785) bytes of the effective policy:
// every key with defaults applied, tool lists normalized, per-agent overrides
// as given (null = inherit), and each secret replaced by its commitment
// {"sha256_b64u": Secret.commitment()}. It contains no secret.
func (c *Config) policyDocument() []byte {
	doc := map[string]any{
		"policy_version": policyVersion,
		"development":    c.Development,
		"defaults": map[string]any{
			"enforceVerification": c.EnforceVerification,
			"gatedTools":          list(c.GatedTools),
		},
		"tools":    toolPolicyDoc(c.Tools, true),
		"verifier": verifierDoc(&c.Verifier, true),
	}
	agents := make([]any, 0, len(c.Agents))
	for _, a := range c.Agents {
		var sig map[string]any
		if a.Sig.EnforceVerification != nil || a.Sig.GatedTools != nil {
			sig = map[string]any{"enforceVerification": a.Sig.EnforceVerification, "gatedTools": nullableList(a.Sig.GatedTools)}
		}
		var ver any
		if a.Verifier != nil {
			ver = verifierDoc(a.Verifier, false)
		}
		agents = append(agents, map[string]any{
			"id":       a.ID,
			"tools":    toolPolicyDoc(a.Tools, false),
			"sig":      sig,
			"verifier": ver,
		})
	}
	doc["agents"] = agents
	// Only strings, booleans, integers, lists and maps: neither step can
	// fail; nil is returned (and policyHash is "") if one ever did.
	out, err := jcs.Marshal(doc)
	if err != nil {
		return nil
	}
	return out
}

// policyHash is b64u(SHA-256(policyDocument())), the value attestations
// commit to.
func (c *Config) policyHash() string {
	doc := c.policyDocument()
	if doc == nil {
		return ""
	}
	return b64u.SHA256(doc)
}

func list(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nullableList(s []string) any {
	if s == nil {
		return nil
	}
	return s
}

func toolPolicyDoc(t toolPolicy, global bool) map[string]any {
	if global {
		profile := t.Profile
		if profile == "" {
			profile = "full"
		}
		return map[string]any{"profile": profile, "allow": list(t.Allow), "deny": list(t.Deny)}
	}
	var profile any
	if t.Profile != "" {
		profile = t.Profile
	}
	return map[string]any{"profile": profile, "allow": nullableList(t.Allow), "deny": nullableList(t.Deny)}
}

func commitment(s secretText) any {
	if !s.isSet() {
		return nil
	}
	return map[string]any{"sha256_b64u": s.commitment()}
}

// doc is s as its config section: the lists that are set.
func (s *scope) doc() map[string]any {
	d := map[string]any{}
	if s.Include != nil {
		d["include"] = s.Include
	}
	if s.Exclude != nil {
		d["exclude"] = s.Exclude
	}
	return d
}

func verifierDoc(v *verifierConfig, global bool) map[string]any {
	d := map[string]any{}
	switch {
	case v.Enabled != nil:
		d["enabled"] = *v.Enabled
	case global:
		d["enabled"] = false
	default:
		d["enabled"] = nil
	}
	switch {
	case v.FailMode != "":
		d["failMode"] = string(v.FailMode)
	case global:
		d["failMode"] = string(failDeny)
	default:
		d["failMode"] = nil
	}
	if v.Scope != nil {
		d["scope"] = v.Scope.doc()
	} else {
		d["scope"] = nil
	}
	if w := v.Webhook; w != nil {
		names := make([]string, 0, len(w.Headers))
		for k := range w.Headers {
			names = append(names, k)
		}
		slices.Sort(names)
		hdrs := map[string]any{}
		for _, k := range names {
			hdrs[k] = commitment(w.Headers[k])
		}
		d["webhook"] = map[string]any{
			"url":            w.URL,
			"timeoutSeconds": int64(w.Timeout.Seconds()),
			"headers":        hdrs,
			"secret":         commitment(w.Secret),
		}
	} else {
		d["webhook"] = nil
	}
	if t := v.Telegram; t != nil {
		ids := make([]string, 0, len(t.AllowedUserIDs))
		for _, id := range t.AllowedUserIDs {
			ids = append(ids, strconv.FormatInt(id, 10))
		}
		d["telegram"] = map[string]any{
			"enabled":        t.Enabled,
			"botToken":       commitment(t.BotToken),
			"chatId":         t.ChatID,
			"timeoutSeconds": int64(t.Timeout.Seconds()),
			"allowedUserIds": ids,
		}
	} else {
		d["telegram"] = nil
	}
	return d
}
