package gateway

import (
	"crypto/sha256"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/clawea/attester/schema/jcs"
	"github.com/clawea/attester/schema/jsstr"
	"github.com/clawea/attester/schema/pohjson"
)

// errCanon refuses a value that has no canonical form (a number outside
// what JCS represents).
var errCanon = errors.New("no canonical JSON form")

// canonHash is H(JCS(v)) (RFC 8785). Objects are written with their keys
// in UTF-16 order and strings as JSON.stringify quotes them, which is JCS
// for every value without a fractional or exponent number; a value with
// one is passed through the JCS library for its number form.
func canonHash(v *pohjson.Value) ([32]byte, error) {
	return canonHashOf(func(dst []byte) ([]byte, bool) { return appendCanon(dst, v) })
}

// canonHashOf is canonHash of the form write appends to a pooled buffer
// (floats: it kept a non-integer literal, which the JCS library rewrites).
func canonHashOf(write func(dst []byte) (out []byte, floats bool)) ([32]byte, error) {
	bp := canonBufs.Get().(*[]byte)
	defer putCanonBuf(bp)
	b, floats := write((*bp)[:0])
	*bp = b
	if floats {
		var err error
		if b, err = jcs.Canonicalize(b); err != nil {
			return [32]byte{}, errCanon
		}
	}
	return sha256.Sum256(b), nil
}

// canonBufs holds the buffers canonHash writes a value's canonical form
// in, so that hashing a request's messages does not allocate them again.
var canonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// maxPooledCanon is the largest buffer kept for reuse: a rare huge message
// does not stay in the pool.
const maxPooledCanon = 256 << 10

func putCanonBuf(bp *[]byte) {
	if cap(*bp) <= maxPooledCanon {
		canonBufs.Put(bp)
	}
}

// messageHash is a message's canon hash (docs/spec/model-gateway.md
// section 3, canon): H(JCS(m)) with cache_control left out where the
// providers read it as a cache breakpoint, on the message's content blocks
// and on the blocks of a content block's own content (a tool_result's),
// and a string content written as the one text part it means: OpenClaw
// sends a turn's message as [{"type":"text","text":...}] while it is the
// newest (a cache breakpoint sits on it) and as a plain string once it is
// history. A cache_control anywhere else (a tool_use input, the message
// itself) is what the model reads, and is hashed. The text part is written
// in place of the string, not built as a value.
func messageHash(m *pohjson.Value) ([32]byte, error) {
	return canonHashOf(func(dst []byte) ([]byte, bool) {
		return appendObject(dst, m.Members(), false, func(dst []byte, mb pohjson.Member) ([]byte, bool) {
			if mb.Key != "content" {
				return appendCanon(dst, mb.Value)
			}
			if mb.Value.Kind() == pohjson.String {
				dst = append(dst, `[{"text":`...)
				dst = appendString(dst, mb.Value)
				return append(dst, `,"type":"text"}]`...), false
			}
			return appendBlocks(dst, mb.Value, true)
		})
	})
}

// appendBlocks writes a content member: an array's object elements
// without their cache_control member, and with nested, the content of
// each of them the same way (one level: a tool_result's blocks).
func appendBlocks(dst []byte, content *pohjson.Value, nested bool) (out []byte, floats bool) {
	if content.Kind() != pohjson.Array {
		return appendCanon(dst, content)
	}
	dst = append(dst, '[')
	for i, e := range content.Elems() {
		if i > 0 {
			dst = append(dst, ',')
		}
		var f bool
		if e.Kind() != pohjson.Object {
			dst, f = appendCanon(dst, e)
		} else {
			dst, f = appendObject(dst, e.Members(), true, func(dst []byte, mb pohjson.Member) ([]byte, bool) {
				if nested && mb.Key == "content" {
					return appendBlocks(dst, mb.Value, false)
				}
				return appendCanon(dst, mb.Value)
			})
		}
		floats = floats || f
	}
	return append(dst, ']'), floats
}

// appendString writes the string v as JCS does: a string the parser read
// without an escape sequence needs none (pohjson Unescaped), so its bytes
// are copied without a look for what to escape, most of a request's text.
func appendString(dst []byte, v *pohjson.Value) []byte {
	s, _ := v.Str()
	if !v.Unescaped() {
		return jsstr.AppendQuote(dst, s)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendCanon writes v in JCS form except for non-integer numbers, which
// keep their literal; floats reports whether there was one.
func appendCanon(dst []byte, v *pohjson.Value) (out []byte, floats bool) {
	switch v.Kind() {
	case pohjson.Null:
		return append(dst, "null"...), false
	case pohjson.Bool:
		b, _ := v.Bool()
		return strconv.AppendBool(dst, b), false
	case pohjson.Number:
		if n, ok := v.Int(); ok {
			return strconv.AppendInt(dst, n, 10), false
		}
		lit, _ := v.Interface().(interface{ String() string })
		return append(dst, lit.String()...), true
	case pohjson.String:
		return appendString(dst, v), false
	case pohjson.Array:
		dst = append(dst, '[')
		for i, e := range v.Elems() {
			if i > 0 {
				dst = append(dst, ',')
			}
			var f bool
			dst, f = appendCanon(dst, e)
			floats = floats || f
		}
		return append(dst, ']'), floats
	}
	return appendObject(dst, v.Members(), false, func(dst []byte, m pohjson.Member) ([]byte, bool) {
		return appendCanon(dst, m.Value)
	})
}

// maxStackMembers is the member count up to which appendObject sorts a
// copy of an object's members on the stack.
const maxStackMembers = 16

// appendObject writes an object of members in JCS key order (with
// dropCache, cache_control left out), each value written by value.
func appendObject(dst []byte, members []pohjson.Member, dropCache bool, value func([]byte, pohjson.Member) ([]byte, bool)) (out []byte, floats bool) {
	byKey := func(a, b pohjson.Member) int { return jsstr.Compare(a.Key, b.Key) }
	if !slices.IsSortedFunc(members, byKey) {
		var stack [maxStackMembers]pohjson.Member
		members = append(stack[:0:min(len(members), maxStackMembers)], members...)
		slices.SortFunc(members, byKey)
	}
	dst = append(dst, '{')
	first := true
	for _, m := range members {
		if dropCache && m.Key == "cache_control" {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = jsstr.AppendQuote(dst, m.Key)
		dst = append(dst, ':')
		var f bool
		dst, f = value(dst, m)
		floats = floats || f
	}
	return append(dst, '}'), floats
}
