package poh

import (
	"fmt"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/schema/pohjson"
)

// harnessOpenClaw is the metadata.harness.id of a bundle written by the
// OpenClaw plugin (clients/openclaw). Such a bundle must carry
// metadata.clawea_llm_calls (docs/spec/openclaw-plugin.md section 3.1).
const harnessOpenClaw = "openclaw"

// llmCallKeys are the members of a clawea_llm_calls payload, in the order
// the plugin's JSON.stringify writes them.
var llmCallKeys = [...]string{
	"llm_call_version", "call_id", "provider", "model",
	"system_prompt_hash_b64u", "system_prompt_report_hash_b64u", "system_text_hash_b64u",
	"attested_prefix", "suffix_utf16_len", "suffix_hash_b64u",
}

// emptyHashB64u is b64u(SHA-256("")), the suffix hash of an empty suffix.
var emptyHashB64u = b64u.SHA256(nil)

// checkLLMCalls checks metadata.clawea_llm_calls (docs/spec/attestation-v1.md
// section 5.1, docs/spec/openclaw-plugin.md section 3.1). It applies when
// the bundle names the OpenClaw harness, the attestation does
// (PromptCommitments.HarnessID), or the bundle carries the member: then the i-th
// payload is the one of the chain's i-th llm_call event (its JSON.stringify
// hash is the event's payload_hash_b64u), states the attested prompt and
// report, and is consistent in itself.
func checkLLMCalls(b *Bundle, md *pohjson.Value, want PromptCommitments) error {
	const lf = "payload.metadata.clawea_llm_calls"
	lv := md.Get("clawea_llm_calls")
	if lv == nil {
		if id, _ := md.Get("harness").GetString("id"); id == harnessOpenClaw || want.HarnessID == harnessOpenClaw {
			return fail(MissingRequiredField, lf, "an OpenClaw bundle must state what each llm_call sent")
		}
		return nil
	}
	if lv.Kind() != pohjson.Array {
		return fail(SchemaValidationFailed, lf, "must be an array")
	}
	payloads := lv.Elems()
	n := 0
	for i, e := range b.Events {
		if e.EventType != EventTypeLLMCall {
			continue
		}
		if n >= len(payloads) {
			return fail(PromptCommitmentMismatch, fmt.Sprintf("payload.event_chain[%d]", i), "llm_call event without its clawea_llm_calls payload")
		}
		f := fmt.Sprintf("%s[%d]", lf, n)
		if err := checkLLMCall(payloads[n], f, want); err != nil {
			return err
		}
		h, err := pohjson.Hash(payloads[n])
		if err != nil {
			return fail(MalformedEnvelope, f, "cannot be serialized")
		}
		if h != e.PayloadHashB64u {
			return fail(HashMismatch, f, "is not the payload of llm_call event payload.event_chain[%d]", i)
		}
		n++
	}
	if n != len(payloads) {
		return fail(PromptCommitmentMismatch, fmt.Sprintf("%s[%d]", lf, n), "payload without its llm_call event")
	}
	return nil
}

// CheckLLMCall checks one llm_call payload (v, at JSON path f) as
// checkLLMCalls checks each element of clawea_llm_calls: its members, and
// its prompt, report and model against want. The model gateway applies it
// to the event a model call names (docs/spec/model-gateway.md section 1),
// so a payload it accepts is one the attestation accepts.
func CheckLLMCall(v *pohjson.Value, f string, want PromptCommitments) error {
	return checkLLMCall(v, f, want)
}

// checkLLMCall checks one clawea_llm_calls payload on its own and against
// the attested prompt and report hashes.
func checkLLMCall(v *pohjson.Value, f string, want PromptCommitments) error {
	if v.Kind() != pohjson.Object {
		return fail(SchemaValidationFailed, f, "must be an object")
	}
	ms := v.Members()
	for i, m := range ms {
		if i >= len(llmCallKeys) || m.Key != llmCallKeys[i] {
			if i < len(llmCallKeys) && !v.Has(llmCallKeys[i]) {
				return fail(MissingRequiredField, f+"."+llmCallKeys[i], "missing")
			}
			return fail(SchemaValidationFailed, f+"."+m.Key, "unknown or out-of-order member")
		}
	}
	if len(ms) < len(llmCallKeys) {
		return fail(MissingRequiredField, f+"."+llmCallKeys[len(ms)], "missing")
	}
	str := func(k string) (string, error) {
		s, ok := v.GetString(k)
		if !ok {
			return "", fail(SchemaValidationFailed, f+"."+k, "must be a string")
		}
		return s, nil
	}
	hash := func(k string) (string, error) {
		s, err := str(k)
		if err != nil {
			return "", err
		}
		if _, err := b64u.DecodeHash(s); err != nil {
			return "", fail(SchemaValidationFailed, f+"."+k, "must be a b64u SHA-256 hash")
		}
		return s, nil
	}
	var s [len(llmCallKeys)]string
	for i, k := range llmCallKeys[:7] {
		var err error
		if i < 4 {
			s[i], err = str(k)
		} else {
			s[i], err = hash(k)
		}
		if err != nil {
			return err
		}
	}
	if s[0] != "1" {
		return fail(SchemaValidationFailed, f+".llm_call_version", "unknown version")
	}
	if s[2] != "" && s[2] != want.Provider {
		return fail(EvidenceMismatch, f+".provider", "differs from the attested model identity")
	}
	if s[3] != "" && s[3] != want.Model {
		return fail(EvidenceMismatch, f+".model", "differs from the attested model identity")
	}
	if s[4] != want.SystemPromptHashB64u {
		return fail(PromptCommitmentMismatch, f+".system_prompt_hash_b64u", "the call names another system prompt")
	}
	if s[5] != want.SystemPromptReportHashB64u {
		return fail(PromptCommitmentMismatch, f+".system_prompt_report_hash_b64u", "the call names another SystemPromptReport")
	}
	if p, ok := v.Get("attested_prefix").Bool(); !ok {
		return fail(SchemaValidationFailed, f+".attested_prefix", "must be a boolean")
	} else if !p {
		return fail(PromptCommitmentMismatch, f+".attested_prefix", "the system text sent does not start with the attested prompt")
	}
	n, ok := v.Get("suffix_utf16_len").Int()
	if !ok || n < 0 || n > pohjson.MaxSafeInteger {
		return fail(SchemaValidationFailed, f+".suffix_utf16_len", "must be a non-negative safe integer")
	}
	sh, err := hash("suffix_hash_b64u")
	if err != nil {
		return err
	}
	// An empty suffix hashes to SHA-256(""), and the system text is then
	// the attested prompt itself; a non-empty one (SHA-256 being collision
	// resistant) to neither.
	if (n == 0) != (sh == emptyHashB64u) {
		return fail(HashMismatch, f+".suffix_hash_b64u", "does not agree with suffix_utf16_len")
	}
	if (n == 0) != (s[6] == want.SystemPromptHashB64u) {
		return fail(HashMismatch, f+".system_text_hash_b64u", "does not agree with suffix_utf16_len and the attested prompt hash")
	}
	return nil
}
