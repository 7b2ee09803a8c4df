package gateway

import "net/http"

// Reason codes (docs/spec/model-gateway.md section 5). They are stable:
// the OpenClaw provider plugin branches on them.
const (
	reasonRequestMalformed  = "GATEWAY_REQUEST_MALFORMED"
	reasonLLMCallMalformed  = "GATEWAY_LLM_CALL_MALFORMED"
	reasonUpstreamUnknown   = "GATEWAY_UPSTREAM_UNKNOWN"
	reasonTurnStale         = "GATEWAY_TURN_STALE"
	reasonLLMCallReused     = "GATEWAY_LLM_CALL_REUSED"
	reasonBodyTooLarge      = "GATEWAY_BODY_TOO_LARGE"
	reasonModelNotAllowed   = "GATEWAY_MODEL_NOT_ALLOWED"
	reasonSystemMismatch    = "GATEWAY_SYSTEM_MISMATCH"
	reasonToolsMismatch     = "GATEWAY_TOOLS_MISMATCH"
	reasonHistoryChanged    = "GATEWAY_HISTORY_CHANGED"
	reasonHistoryTooLong    = "GATEWAY_HISTORY_TOO_LONG"
	reasonUserMessage       = "GATEWAY_USER_MESSAGE_MISMATCH"
	reasonResultUndecided   = "GATEWAY_TOOL_RESULT_UNDECIDED"
	reasonResultUnrequested = "GATEWAY_TOOL_RESULT_UNREQUESTED"
	reasonResultMismatch    = "GATEWAY_TOOL_RESULT_MISMATCH"
	reasonLLMCallMismatch   = "GATEWAY_LLM_CALL_MISMATCH"
	reasonLimit             = "GATEWAY_LIMIT"
	reasonUpstreamUnreach   = "GATEWAY_UPSTREAM_UNREACHABLE"
	reasonUpstreamMalformed = "GATEWAY_UPSTREAM_MALFORMED"
	reasonUpstreamTimeout   = "GATEWAY_UPSTREAM_TIMEOUT"
	reasonUpstreamCut       = "GATEWAY_UPSTREAM_CUT"
	reasonResponseTooLarge  = "GATEWAY_RESPONSE_TOO_LARGE"
	reasonAuditFailed       = "GATEWAY_AUDIT_FAILED"
	reasonUnavailable       = "GATEWAY_UNAVAILABLE"
)

// refusal is a call the gateway refuses or fails: the status, the reason
// code and a message safe to show (it names a rule, an index or a tool,
// never prompt, message or parameter bytes).
type refusal struct {
	Status int
	Reason string
	Msg    string
}

func (r *refusal) Error() string { return r.Reason + ": " + r.Msg }

func refuse(reason, msg string) *refusal {
	st := http.StatusUnprocessableEntity
	switch reason {
	case reasonRequestMalformed, reasonLLMCallMalformed:
		st = http.StatusBadRequest
	case reasonUpstreamUnknown:
		st = http.StatusForbidden
	case reasonTurnStale, reasonLLMCallReused:
		st = http.StatusConflict
	case reasonBodyTooLarge:
		st = http.StatusRequestEntityTooLarge
	case reasonLimit:
		st = http.StatusTooManyRequests
	case reasonUpstreamUnreach, reasonUpstreamMalformed:
		st = http.StatusBadGateway
	case reasonUpstreamTimeout:
		st = http.StatusGatewayTimeout
	}
	return &refusal{Status: st, Reason: reason, Msg: msg}
}
