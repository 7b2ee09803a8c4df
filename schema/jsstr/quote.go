package jsstr

// AppendQuote appends s as a JSON string literal the way JSON.stringify
// writes it (ECMAScript QuoteJSONString), which is also the RFC 8785 (JCS)
// string form (section 3.2.2.2): '"' and '\\' escaped, the control
// characters U+0000..U+001F written as \b \f \n \r \t or \u00xx, and
// everything else, including U+2028, U+2029, DEL and HTML characters,
// written as is.
//
// s MUST be valid UTF-8: a lone surrogate has no UTF-8 form and invalid
// bytes have no JSON form, so callers refuse such strings before calling
// (invalid bytes would be copied through unchanged).
func AppendQuote(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = AppendEscape(dst, s)
	return append(dst, '"')
}

// AppendEscape is AppendQuote without the surrounding quotes: it appends
// the escaped characters of s only. s MUST be valid UTF-8.
func AppendEscape(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); i++ {
		// Fast path: skip sixteen, then eight bytes at a time while none
		// needs an escape (most text has none: it is then copied in one
		// append).
		for ; i+16 <= len(s); i += 16 {
			if escapes(word(s[i:i+8]))|escapes(word(s[i+8:i+16])) != 0 {
				break
			}
		}
		for ; i+8 <= len(s); i += 8 {
			if escapes(word(s[i:i+8])) != 0 {
				break
			}
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	return append(dst, s[start:]...)
}

// word is the 8 bytes of b, the first in the low byte. b is sliced to
// exactly 8 bytes by the caller, so the compiler loads it in one move
// without a bounds check per byte.
func word(b string) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// escapes is not zero when one of the 8 bytes of w is a quote, a
// backslash or a control character (below 0x20), the bytes AppendEscape
// escapes. These are the exact "has a
// zero byte" and "has a byte less than n" word tests (Bit Twiddling
// Hacks): a borrow only ever starts at a byte that matches, so a non-ASCII
// byte never makes a false match.
func escapes(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^(ones*'"'), w^(ones*'\\')
	control := (w - ones*0x20) &^ w
	quote = (quote - ones) &^ quote
	backslash = (backslash - ones) &^ backslash
	return (control | quote | backslash) & highs
}
