package gate

import (
	"errors"
	"fmt"

	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/schema/jsonobj"
)

// Sentinel errors. Callers branch with errors.Is; a *confdoc.ConfigError
// carries the key.
var (
	// errInvalidConfig is matched by every configuration error (its text
	// starts their messages).
	errInvalidConfig = errors.New("gate config")
	// errUnknownKey: a key the gate does not know (a typo must not silently
	// disable a control).
	errUnknownKey = jsonobj.ErrUnknownField
	// errWrongType: a value of the wrong JSON type, or a document that is
	// not strict JSON.
	errWrongType = jsonobj.ErrWrongType
	// errBadValue: a value outside its allowed set or limits, or a
	// required key that is absent.
	errBadValue = confdoc.ErrBadValue
	// errConflict: keys that may not be combined.
	errConflict = errors.New("conflicting keys")
	// errInsecureURL: a webhook URL that is not https outside development mode.
	errInsecureURL = errors.New("insecure url")
	// errConfigTooLarge: the config document exceeds maxConfigBytes.
	errConfigTooLarge = errors.New("config too large")

	// errInvalidCall: Decide was given a malformed call (bad tool name,
	// parameters that are not a JSON object, limits exceeded).
	errInvalidCall = errors.New("gate: invalid call")
	// errNotOwner: MarkVerified in a turn that is not an owner turn.
	errNotOwner = errors.New("gate: only the owner can verify")
	// errStaleTurn: MarkVerified for a turn that is not the run's
	// current turn.
	errStaleTurn = errors.New("gate: turn is not the current turn")
	// errUnknownRun: NewTurn or MarkVerified for a run that is not open.
	errUnknownRun = errors.New("gate: run is not open")
	// errRunExists: OpenRun for a run that is already open.
	errRunExists = errors.New("gate: run is already open")
	// errTooManyRuns: OpenRun would exceed Options.MaxRuns.
	errTooManyRuns = errors.New("gate: too many open runs")
	// errAudit: the decision could not be appended to the audit log; the
	// call is denied.
	errAudit = errors.New("gate: audit log append failed")
	// errOptions: New was given unusable options.
	errOptions = errors.New("gate: invalid options")
)

// cfgErr returns the *confdoc.ConfigError that names the configuration key
// at fault (key, e.g. "tools.verifier.scope"), the class of the problem
// (sentinel: errUnknownKey, errWrongType, errBadValue, errConflict,
// errInsecureURL or errConfigTooLarge) and what is wrong. It never contains
// a configured value (values may be secrets), and matches errInvalidConfig.
func cfgErr(key string, sentinel error, format string, args ...any) error {
	return &confdoc.ConfigError{Doc: errInvalidConfig, Key: key, Err: sentinel, Msg: fmt.Sprintf(format, args...)}
}
