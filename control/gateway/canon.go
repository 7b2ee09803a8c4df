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

// canonHash is H(JCS(v)) (RFC 8785); with dropCache, every member named
// cache_control is left out at any depth (docs/spec/model-gateway.md
// section 3, canon). Objects are written with their keys in UTF-16 order
// and strings as JSON.stringify quotes them, which is JCS for every value
// without a fractional or exponent number; a value with one is passed
// through the JCS library for its number form.
func canonHash(v *pohjson.Value, dropCache bool) ([32]byte, error) {
	bp := canonBufs.Get().(*[]byte)
	defer putCanonBuf(bp)
	b, floats := appendCanon((*bp)[:0], v, dropCache)
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

// messageHash is canonHash of a message with cache_control left out and a
// string content written as the one text part it means: OpenClaw sends a
// turn's message as [{"type":"text","text":...}] while it is the newest
// (a cache breakpoint sits on it) and as a plain string once it is history.
func messageHash(m *pohjson.Value) ([32]byte, error) {
	if s, ok := m.Get("content").Str(); ok {
		ms := slices.Clone(m.Members())
		for i := range ms {
			if ms[i].Key == "content" {
				ms[i].Value = pohjson.NewArray(pohjson.NewObject(pohjson.M("type", pohjson.NewString("text")), pohjson.M("text", pohjson.NewString(s))))
			}
		}
		m = pohjson.NewObject(ms...)
	}
	return canonHash(m, true)
}

// appendCanon writes v in JCS form except for non-integer numbers, which
// keep their literal; floats reports whether there was one.
func appendCanon(dst []byte, v *pohjson.Value, dropCache bool) (out []byte, floats bool) {
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
		s, _ := v.Str()
		return jsstr.AppendQuote(dst, s), false
	case pohjson.Array:
		dst = append(dst, '[')
		for i, e := range v.Elems() {
			if i > 0 {
				dst = append(dst, ',')
			}
			var f bool
			dst, f = appendCanon(dst, e, dropCache)
			floats = floats || f
		}
		return append(dst, ']'), floats
	}
	members := v.Members()
	byKey := func(a, b pohjson.Member) int { return jsstr.Compare(a.Key, b.Key) }
	if !slices.IsSortedFunc(members, byKey) {
		members = slices.Clone(members)
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
		dst, f = appendCanon(dst, m.Value, dropCache)
		floats = floats || f
	}
	return append(dst, '}'), floats
}
