package auditrec

// Bridges for the external tests (package auditrec_test).

// ErrHashMismatch is errHashMismatch.
var ErrHashMismatch = errHashMismatch

// HashOf is r's record hash.
func HashOf(r *Record) (string, error) { return r.hash() }

// MarshalCanonical is r's canonical encoding without its record hash.
func MarshalCanonical(r *Record) ([]byte, error) { return r.marshalCanonical() }

// Seal is r's seal: r's canonical line with its record hash, appended to dst.
func Seal(r *Record, dst []byte) ([]byte, error) { return r.seal(dst) }
