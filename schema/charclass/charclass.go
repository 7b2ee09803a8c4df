// Package charclass is the one place where identifiers are checked
// against a class of ASCII bytes (tool names, agent and run ids, pack ids,
// header names, lowercase hex, ...). The component that owns an identifier
// declares its class with this package and exports the check (STYLE item
// 19); the loop over the bytes is written once, here.
package charclass

// Set is a set of ASCII bytes; no byte of 0x80 or above is ever a member.
// The zero Set is empty. A Set is a value: build it once (a package-level
// variable of the owner) and use it from any goroutine.
type Set struct{ lo, hi uint64 }

// Of returns the set of the bytes of chars, which must be ASCII.
func Of(chars string) Set {
	var s Set
	for i := 0; i < len(chars); i++ {
		s = s.with(chars[i])
	}
	return s
}

// Range returns the set of the bytes first to last inclusive, which must
// be ASCII.
func Range(first, last byte) Set {
	var s Set
	for c := int(first); c <= int(last); c++ {
		s = s.with(byte(c))
	}
	return s
}

func (s Set) with(c byte) Set {
	switch {
	case c < 64:
		s.lo |= 1 << c
	case c < 128:
		s.hi |= 1 << (c - 64)
	default:
		panic("charclass: non-ASCII byte in a class")
	}
	return s
}

// Or returns the union of s and others.
func (s Set) Or(others ...Set) Set {
	for _, o := range others {
		s.lo |= o.lo
		s.hi |= o.hi
	}
	return s
}

// Contains reports whether c is in s.
func (s Set) Contains(c byte) bool {
	if c < 64 {
		return s.lo&(1<<c) != 0
	}
	return c < 128 && s.hi&(1<<(c-64)) != 0
}

// All reports whether every byte of str is in s; it is true for "", so
// callers check the length they allow.
func (s Set) All(str string) bool {
	for i := 0; i < len(str); i++ {
		if !s.Contains(str[i]) {
			return false
		}
	}
	return true
}

// The classes identifiers are made of.

// Lower returns a-z.
func Lower() Set { return Range('a', 'z') }

// Upper returns A-Z.
func Upper() Set { return Range('A', 'Z') }

// Digit returns 0-9.
func Digit() Set { return Range('0', '9') }

// Alnum returns A-Z a-z 0-9.
func Alnum() Set { return Lower().Or(Upper(), Digit()) }

// LowerHex returns 0-9 a-f, the hex digits of a digest as this project
// writes them.
func LowerHex() Set { return Digit().Or(Range('a', 'f')) }
