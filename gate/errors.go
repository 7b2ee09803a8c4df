package gate

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch with errors.Is; ConfigError carries the key.
var (
	// ErrInvalidConfig is matched by every configuration error.
	ErrInvalidConfig = errors.New("gate: invalid config")
	// ErrUnknownKey: a key the gate does not know (a typo must not silently
	// disable a control).
	ErrUnknownKey = errors.New("unknown key")
	// ErrWrongType: a value of the wrong JSON type.
	ErrWrongType = errors.New("wrong type")
	// ErrBadValue: a value outside its allowed set or limits.
	ErrBadValue = errors.New("invalid value")
	// ErrConflict: keys that may not be combined.
	ErrConflict = errors.New("conflicting keys")
	// ErrInsecureURL: a webhook URL that is not https outside development mode.
	ErrInsecureURL = errors.New("insecure url")
	// ErrConfigTooLarge: the config document exceeds MaxConfigBytes.
	ErrConfigTooLarge = errors.New("config too large")

	// ErrInvalidCall: Decide was given a malformed call (bad tool name,
	// parameters that are not a JSON object, limits exceeded).
	ErrInvalidCall = errors.New("gate: invalid call")
	// ErrNotOwner: MarkVerified in a turn that is not an owner turn.
	ErrNotOwner = errors.New("gate: only the owner can verify")
	// ErrStaleTurn: MarkVerified for a turn that is not the run's
	// current turn.
	ErrStaleTurn = errors.New("gate: turn is not the current turn")
	// ErrUnknownRun: NewTurn or MarkVerified for a run that is not open.
	ErrUnknownRun = errors.New("gate: run is not open")
	// ErrRunExists: OpenRun for a run that is already open.
	ErrRunExists = errors.New("gate: run is already open")
	// ErrTooManyRuns: OpenRun would exceed Options.MaxRuns.
	ErrTooManyRuns = errors.New("gate: too many open runs")
	// ErrAudit: the decision could not be appended to the audit log; the
	// call is denied.
	ErrAudit = errors.New("gate: audit log append failed")
	// ErrOptions: New was given unusable options.
	ErrOptions = errors.New("gate: invalid options")
)

// ConfigError names the configuration key at fault. It never contains a
// configured value (values may be secrets).
type ConfigError struct {
	Key string // dotted key path, e.g. "tools.verifier.scope"
	Err error  // one of ErrUnknownKey, ErrWrongType, ErrBadValue, ErrConflict, ErrInsecureURL, ErrConfigTooLarge
	Msg string
}

func (e *ConfigError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("gate config: %v: %s", e.Err, e.Msg)
	}
	return fmt.Sprintf("gate config: %s: %s", e.Key, e.Msg)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// Is makes every ConfigError match ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

func cfgErr(key string, sentinel error, format string, args ...any) error {
	return &ConfigError{Key: key, Err: sentinel, Msg: fmt.Sprintf(format, args...)}
}
