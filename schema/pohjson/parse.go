package pohjson

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/clawea/attester/schema/jsstr"
)

// Default limits for Parse.
const (
	defaultMaxBytes = 16 << 20
	defaultMaxDepth = 64
)

// ParseOptions relax or tighten Parse. The zero value is the strict default.
type ParseOptions struct {
	// MaxBytes limits the input size; 0 means defaultMaxBytes.
	MaxBytes int
	// MaxDepth limits array/object nesting; 0 means defaultMaxDepth.
	MaxDepth int
	// AllowFloats accepts any RFC 8259 number (kept as its literal) for
	// validation-only uses such as JCS input. Stringify still refuses them.
	AllowFloats bool
	// Canonical accepts only input that is exactly the JSON.stringify form
	// of the value it parses to, what Stringify returns for it: no
	// whitespace, only the escapes JSON.stringify writes, members in
	// JavaScript property order, integers only, and at most
	// defaultMaxDepth levels. So a canonical document is checked without
	// encoding it again.
	Canonical bool
	// OneCopy makes the strings read without an escape sequence, keys and
	// values, substrings of one copy of the input made once, where each
	// would otherwise be a copy of its own: a large document is read with
	// a handful of allocations. A string kept from the result keeps that
	// whole copy alive, so a caller that keeps one longer than the
	// document clones it (strings.Clone). An object or array whose input
	// text is already its Stringify form keeps that text too, so that
	// Stringify and Hash of it read it instead of encoding it again.
	OneCopy bool
	// Borrow is OneCopy without the copy: the strings read without an
	// escape sequence and the texts kept are substrings of data itself.
	// It saves the copy of a large input (its bytes and its allocation)
	// when the caller owns data and promises that no byte of it changes
	// while any string of the result, or the result, is in use (not
	// after the parse, not by another goroutine, not when a pool
	// reuses the buffer); a string kept from the result keeps all of
	// data alive. The result is the one OneCopy gives.
	Borrow bool
	// Release, when set, makes the parse take the memory of the result's
	// values, members and element lists from a pool of the package, and
	// sets *Release to the function that clears it (no pointer into data
	// stays in the pool) and gives it back. The caller calls it (after an
	// error too) once nothing of the result is in use: no value, member
	// list or element list read from it; strings read from the result
	// stay valid (they are data's or their own). The result is the one
	// given without Release. The pool keeps a bounded memory per parse.
	Release *func()
}

// Parse parses one JSON text strictly (RFC 8259 plus the restrictions in the
// package comment). Insignificant whitespace is accepted; nothing may follow
// the value.
func Parse(data []byte) (*Value, error) { return ParseWith(data, ParseOptions{}) }

// ParseWith is Parse with options.
func ParseWith(data []byte, opts ParseOptions) (*Value, error) {
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = defaultMaxBytes
	}
	if len(data) > maxBytes {
		return nil, &Error{Offset: maxBytes, Err: ErrTooLarge, Msg: "input is " + strconv.Itoa(len(data)) + " bytes, limit " + strconv.Itoa(maxBytes)}
	}
	p := &parser{data: data, opts: opts, maxDepth: opts.MaxDepth}
	if opts.Release != nil {
		a, release := takeArena()
		*opts.Release = release
		p.arena, p.members, p.elems = a, a.stackM[:0], a.stackE[:0]
		defer func() { a.stackM, a.stackE = p.members[:0], p.elems[:0] }()
	}
	switch {
	case opts.Borrow:
		// The caller's promise (ParseOptions.Borrow) is what makes
		// these strings immutable.
		p.text = unsafe.String(unsafe.SliceData(data), len(data))
		p.opts.OneCopy = true
	case opts.OneCopy:
		p.text = string(data)
	}
	if p.maxDepth <= 0 || opts.Canonical && p.maxDepth > defaultMaxDepth {
		p.maxDepth = defaultMaxDepth // Stringify's limit
	}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.data) {
		return nil, p.errf(errSyntax, "data after the JSON value")
	}
	if p.notCanonical != nil {
		return nil, p.notCanonical
	}
	return v, nil
}

type parser struct {
	data     []byte
	i        int
	opts     ParseOptions
	maxDepth int
	// notCanonical is the first departure from the JSON.stringify form
	// (with opts.Canonical), returned once the input parsed.
	notCanonical error
	// departures counts the departures from the JSON.stringify form found
	// so far (with opts.Canonical or opts.OneCopy): a container with none
	// inside is in that form.
	departures int
	// text is the input's one copy (ParseOptions.OneCopy), or the input
	// itself (ParseOptions.Borrow).
	text string
	// slab holds Values not yet handed out: one allocation serves many.
	slab     []Value
	slabSize int
	// members and elems are the members and elements read so far of the
	// objects and arrays being parsed, innermost last; each is copied out
	// once, at its final size, when its container closes, into
	// memberSlab or elemSlab. What is left past their length is not
	// cleared: it points into this parse's own result, which the parser
	// does not outlive.
	members        []Member
	elems          []*Value
	memberSlab     []Member
	memberSlabSize int
	elemSlab       []*Value
	elemSlabSize   int
	// arena, when set, gives the slabs (ParseOptions.Release).
	arena *arena
}

// maxSlab is the most items newValue and keep take in one allocation.
const maxSlab = 128

// keep returns a copy of items in *slab, with no room after it (an append
// to it never writes over a neighbor). When *slab is short it takes a new
// one: the next chunk of c (maxSlab items) when the parser has an arena,
// else one of twice the last one's size *last (at least 8 and len(items),
// at most maxSlab). A list of more than maxSlab items gets an allocation
// of its own.
func keep[T any](slab *[]T, last *int, c *chunks[T], items []T) []T {
	n := len(items)
	if n > maxSlab {
		return slices.Clone(items)
	}
	if n > len(*slab) {
		if c != nil {
			*slab = c.next()
		} else {
			*last = min(max(2**last, 8, n), maxSlab)
			*slab = make([]T, *last)
		}
	}
	out := (*slab)[:n:n]
	copy(out, items)
	*slab = (*slab)[n:]
	return out
}

// keepMembers and keepElems are keep into the parser's slabs, which its
// arena gives when it has one.
func (p *parser) keepMembers(items []Member) []Member {
	var c *chunks[Member]
	if p.arena != nil {
		c = &p.arena.members
	}
	return keep(&p.memberSlab, &p.memberSlabSize, c, items)
}

func (p *parser) keepElems(items []*Value) []*Value {
	var c *chunks[*Value]
	if p.arena != nil {
		c = &p.arena.elems
	}
	return keep(&p.elemSlab, &p.elemSlabSize, c, items)
}

// newValue returns a Value of the parser's slab, of kind and otherwise
// zero. The caller sets the fields it needs one by one: while the collector
// marks, each pointer written costs a write barrier, and a whole Value
// copied in would pay for its three pointer fields, nil or not.
func (p *parser) newValue(kind Kind) *Value {
	if len(p.slab) == 0 && p.arena != nil {
		p.slab = p.arena.vals.next()
	} else if len(p.slab) == 0 {
		// Twice the last slab, from 8 up to 128: a small document does
		// not pay for a large slab.
		p.slabSize = min(max(2*p.slabSize, 8), maxSlab)
		p.slab = make([]Value, p.slabSize)
	}
	nv := &p.slab[0]
	p.slab = p.slab[1:]
	nv.kind = kind
	return nv
}

// departs records a departure from the JSON.stringify form at offset at.
func (p *parser) departs(at int, msg string) {
	p.departures++
	if p.opts.Canonical && p.notCanonical == nil {
		p.notCanonical = &Error{Offset: at, Err: ErrNotCanonical, Msg: msg}
	}
}

// checksForm reports whether the parser looks for departures from the
// JSON.stringify form: for Canonical, and for OneCopy, which keeps the text
// of the containers that have none (keepForm).
func (p *parser) checksForm() bool { return p.opts.Canonical || p.opts.OneCopy }

// keepForm keeps, with OneCopy, the input text of the container v that
// began at offset at and ended before p.i, when it is v's Stringify form:
// no departure was found since the parser's count was departures (every
// departure the form check looks for, whitespace, escapes JSON.stringify
// does not write, members out of property order and numbers Stringify
// refuses, is counted; duplicate keys and invalid UTF-8 are parse errors),
// and no subtree is deeper than Stringify writes.
func (p *parser) keepForm(v *Value, at, departures int) {
	if p.opts.OneCopy && p.departures == departures && p.maxDepth <= defaultMaxDepth {
		v.s = p.text[at:p.i]
	}
}

func (p *parser) errf(sentinel error, msg string) error {
	return &Error{Offset: p.i, Err: sentinel, Msg: msg}
}

// prependPath adds the key (string) or index (int) of the enclosing member
// or element to the path of a parse error.
func prependPath(err error, elem any) error {
	if e, ok := err.(*Error); ok {
		e.Path = append([]any{elem}, e.Path...)
	}
	return err
}

func (p *parser) ws() {
	at := p.i
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			if p.i > at {
				p.departs(at, "whitespace")
			}
			return
		}
	}
	if p.i > at {
		p.departs(at, "whitespace")
	}
}

func (p *parser) literal(lit string) bool {
	if len(p.data)-p.i >= len(lit) && string(p.data[p.i:p.i+len(lit)]) == lit {
		p.i += len(lit)
		return true
	}
	return false
}

// skip skips white space and then b, when b comes next.
func (p *parser) skip(b byte) bool {
	p.ws()
	if p.i < len(p.data) && p.data[p.i] == b {
		p.i++
		return true
	}
	return false
}

func (p *parser) value(depth int) (*Value, error) {
	if p.i >= len(p.data) {
		return nil, p.errf(errSyntax, "unexpected end of input")
	}
	switch c := p.data[p.i]; {
	case (c == '{' || c == '[') && depth+1 > p.maxDepth:
		return nil, p.errf(ErrTooDeep, "more than "+strconv.Itoa(p.maxDepth)+" levels")
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, plain, err := p.str()
		if err != nil {
			return nil, err
		}
		v := p.newValue(String)
		v.s, v.plain = s, plain
		return v, nil
	case c == 't':
		if p.literal("true") {
			v := p.newValue(Bool)
			v.b = true
			return v, nil
		}
	case c == 'f':
		if p.literal("false") {
			return p.newValue(Bool), nil
		}
	case c == 'n':
		if p.literal("null") {
			return p.newValue(Null), nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, p.errf(errSyntax, "unexpected character "+strconv.QuoteRune(rune(p.data[p.i])))
}

// inPropertyOrder reports whether members are in JavaScript own-property
// order, the order Stringify writes them in.
func inPropertyOrder(members []Member) bool {
	keys := make([]string, len(members))
	for i, m := range members {
		keys[i] = m.Key
	}
	for i, j := range jsstr.PropertyOrder(keys) {
		if i != j {
			return false
		}
	}
	return true
}

// dupScanMax is the member count up to which object looks for a duplicate
// key by scanning.
const dupScanMax = 16

func (p *parser) object(depth int) (*Value, error) {
	objAt, departures := p.i, p.departures
	p.i++ // '{'
	v := p.newValue(Object)
	base := len(p.members)
	indexed := false // an array-index key was seen (form checked: order to check)
	// Duplicate keys: a scan of the members so far for small objects, a
	// set from the dupScanMax-th member on (no map for the many small ones).
	var seen map[string]struct{}
	if p.skip('}') {
		v.members = []Member{}
		p.keepForm(v, objAt, departures)
		return v, nil
	}
	for {
		p.ws()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, p.errf(errSyntax, "expected object key")
		}
		keyAt := p.i
		k, _, err := p.str()
		if err != nil {
			return nil, err
		}
		dup := false
		switch read := p.members[base:]; {
		case len(read) < dupScanMax:
			for _, m := range read {
				dup = dup || m.Key == k
			}
		case seen == nil:
			seen = make(map[string]struct{}, 2*dupScanMax)
			for _, m := range read {
				seen[m.Key] = struct{}{}
			}
			fallthrough
		default:
			_, dup = seen[k]
			seen[k] = struct{}{}
		}
		if dup {
			return nil, &Error{Offset: keyAt, Err: ErrDuplicateKey, Msg: strconv.Quote(k), Path: []any{k}}
		}
		indexed = indexed || p.checksForm() && jsstr.IsArrayIndex(k)
		if !p.skip(':') {
			return nil, p.errf(errSyntax, "expected ':'")
		}
		p.ws()
		mv, err := p.value(depth)
		if err != nil {
			return nil, prependPath(err, k)
		}
		p.members = append(p.members, Member{Key: k, Value: mv})
		done, err := p.afterItem('}', "object")
		if err != nil {
			return nil, err
		}
		if done {
			v.members = p.keepMembers(p.members[base:])
			p.members = p.members[:base]
			if indexed && !inPropertyOrder(v.members) {
				p.departs(objAt, "members out of JavaScript property order")
			}
			p.keepForm(v, objAt, departures)
			return v, nil
		}
	}
}

func (p *parser) array(depth int) (*Value, error) {
	arrAt, departures := p.i, p.departures
	p.i++ // '['
	v := p.newValue(Array)
	if p.skip(']') {
		v.arr = []*Value{}
		p.keepForm(v, arrAt, departures)
		return v, nil
	}
	base := len(p.elems)
	for {
		p.ws()
		ev, err := p.value(depth)
		if err != nil {
			return nil, prependPath(err, len(p.elems)-base)
		}
		p.elems = append(p.elems, ev)
		done, err := p.afterItem(']', "array")
		if err != nil {
			return nil, err
		}
		if done {
			v.arr = p.keepElems(p.elems[base:])
			p.elems = p.elems[:base]
			p.keepForm(v, arrAt, departures)
			return v, nil
		}
	}
}

// afterItem reads what follows an item of an object or array: ',' (done
// is false) or the closing byte (done is true).
func (p *parser) afterItem(closing byte, container string) (done bool, err error) {
	p.ws()
	if p.i >= len(p.data) {
		return false, p.errf(errSyntax, "unexpected end of input in "+container)
	}
	switch p.data[p.i] {
	case ',':
		p.i++
		return false, nil
	case closing:
		p.i++
		return true, nil
	}
	return false, p.errf(errSyntax, "expected ',' or '"+string(closing)+"'")
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (p *parser) number() (*Value, error) {
	start := p.i
	if p.data[p.i] == '-' {
		p.i++
	}
	if p.i >= len(p.data) || !isDigit(p.data[p.i]) {
		return nil, p.errf(errSyntax, "invalid number")
	}
	if p.data[p.i] == '0' {
		p.i++
	} else {
		for p.i < len(p.data) && isDigit(p.data[p.i]) {
			p.i++
		}
	}
	integer := true
	if p.i < len(p.data) && p.data[p.i] == '.' {
		integer = false
		p.i++
		if p.i >= len(p.data) || !isDigit(p.data[p.i]) {
			return nil, p.errf(errSyntax, "invalid number")
		}
		for p.i < len(p.data) && isDigit(p.data[p.i]) {
			p.i++
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		integer = false
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if p.i >= len(p.data) || !isDigit(p.data[p.i]) {
			return nil, p.errf(errSyntax, "invalid number")
		}
		for p.i < len(p.data) && isDigit(p.data[p.i]) {
			p.i++
		}
	}
	lit := string(p.data[start:p.i])
	if !integer {
		if p.opts.AllowFloats {
			f, err := strconv.ParseFloat(lit, 64)
			if err != nil || f != f {
				return nil, &Error{Offset: start, Err: errNumber, Msg: "number " + lit + " is out of IEEE 754 double range"}
			}
			p.departs(start, "a number Stringify refuses")
			return p.numberLiteral(lit), nil
		}
		return nil, &Error{Offset: start, Err: errNumber, Msg: "non-integer number " + lit + " (only integers are supported)"}
	}
	if lit == "-0" {
		return nil, &Error{Offset: start, Err: errNumber, Msg: "negative zero"}
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil || n > MaxSafeInteger || n < -MaxSafeInteger {
		if p.opts.AllowFloats {
			if _, err := strconv.ParseFloat(lit, 64); err == nil {
				p.departs(start, "a number Stringify refuses")
				return p.numberLiteral(lit), nil
			}
		}
		return nil, &Error{Offset: start, Err: errNumber, Msg: "integer " + lit + " is outside ±(2^53-1)"}
	}
	v := p.newValue(Number)
	v.n = n
	return v, nil
}

// numberLiteral is a Number kept as its literal (AllowFloats).
func (p *parser) numberLiteral(lit string) *Value {
	v := p.newValue(Number)
	v.s = lit
	return v
}

// stops8 is not zero when one of the 8 bytes of w is not plain ASCII in a
// string: a quote, a backslash, a control character or non-ASCII. The
// tests are the exact "has a zero byte" and "has a byte less than n" word
// tests (Bit Twiddling Hacks), on bytes already known to be ASCII.
func stops8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := w^(ones*'"'), w^(ones*'\\')
	control := (w - ones*0x20) &^ w
	quote = (quote - ones) &^ quote
	backslash = (backslash - ones) &^ backslash
	return (w | control | quote | backslash) & highs
}

// shortRun is how far str looks for the end of a run with stops8 before
// it takes the run for a long one: keys and most values end within it,
// and a memchr call costs more than a few word tests.
const shortRun = 32

// stopsRun is the length of the run of data's bytes up to its first byte
// that is not plain ASCII in a string (stops8): eight bytes a step, then
// byte by byte.
func stopsRun(data []byte) int {
	n := 0
	for n+8 <= len(data) && stops8(binary.LittleEndian.Uint64(data[n:])) == 0 {
		n += 8
	}
	for n < len(data) {
		if c := data[n]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			break
		}
		n++
	}
	return n
}

// plainRun8 is not zero when one of the 8 bytes of w is a control
// character or non-ASCII, the bytes a run of a string (which holds no
// quote or backslash: str) stops at. It is the exact "has a byte less
// than n" word test (Bit Twiddling Hacks) on bytes known to be ASCII,
// and the high bits.
func plainRun8(w uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return (w | (w-ones*0x20)&^w) & highs
}

// plainRun is the length of the run of run's bytes up to its first
// control or non-ASCII byte: sixteen, then eight bytes a step, then byte
// by byte.
func plainRun(run []byte) int {
	n := 0
	for n+16 <= len(run) {
		w := run[n : n+16]
		if plainRun8(binary.LittleEndian.Uint64(w))|plainRun8(binary.LittleEndian.Uint64(w[8:])) != 0 {
			break
		}
		n += 16
	}
	for n+8 <= len(run) && plainRun8(binary.LittleEndian.Uint64(run[n:])) == 0 {
		n += 8
	}
	for n < len(run) && run[n] >= 0x20 && run[n] < utf8.RuneSelf {
		n++
	}
	return n
}

// str parses a JSON string starting at the opening quote; plain says it
// held no escape sequence.
func (p *parser) str() (s string, plain bool, err error) {
	p.i++ // opening quote
	var buf []byte
	start := p.i
	// A run of plain ASCII ends at a quote, a backslash, a control or a
	// non-ASCII byte. A run longer than shortRun is taken for a long text:
	// quote and backslash are then the offsets of the next '"' and '\\'
	// at or after p.i (len(p.data) when there is none), found at memchr
	// speed (bytes.IndexByte) and kept while p.i has not passed them; the
	// run ends at the nearer one, or before at a control or non-ASCII
	// byte, which is all plainRun looks for.
	quote, backslash := -1, -1
	for {
		head := p.data[p.i:min(len(p.data), p.i+shortRun)]
		n := stopsRun(head)
		p.i += n
		if n == shortRun {
			if quote < p.i {
				quote = indexFrom(p.data, p.i, '"')
			}
			if backslash < p.i {
				backslash = indexFrom(p.data[:quote], p.i, '\\')
			}
			p.i += plainRun(p.data[p.i:min(quote, backslash)])
		}
		if p.i >= len(p.data) {
			return "", false, p.errf(errSyntax, "unterminated string")
		}
		c := p.data[p.i]
		switch {
		case c == '"':
			switch {
			case buf != nil:
				s = string(append(buf, p.data[start:p.i]...))
			case p.opts.OneCopy:
				s = p.text[start:p.i]
			default:
				s = string(p.data[start:p.i])
			}
			p.i++
			return s, buf == nil, nil
		case c == '\\':
			buf = append(buf, p.data[start:p.i]...)
			at := p.i
			r, err := p.escape()
			if err != nil {
				return "", false, err
			}
			var form [16]byte // the longest escape read, a surrogate pair, is 12 bytes
			if p.checksForm() && string(p.data[at:p.i]) != string(jsstr.AppendEscape(form[:0], string(r))) {
				p.departs(at, "an escape JSON.stringify does not write")
			}
			buf = utf8.AppendRune(buf, r)
			start = p.i
		case c < 0x20:
			return "", false, p.errf(errSyntax, "unescaped control character in string")
		default: // the plain ASCII bytes were consumed above
			r, size := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && size <= 1 {
				return "", false, p.errf(errString, "invalid UTF-8")
			}
			p.i += size
		}
	}
}

// escape decodes one escape sequence at p.i (the backslash) and returns the
// rune; \u surrogate pairs are combined and lone surrogates refused.
func (p *parser) escape() (rune, error) {
	at := p.i
	p.i++
	if p.i >= len(p.data) {
		return 0, p.errf(errSyntax, "unterminated escape")
	}
	c := p.data[p.i]
	p.i++
	switch c {
	case '"':
		return '"', nil
	case '\\':
		return '\\', nil
	case '/':
		return '/', nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r1, ok := p.hex4()
		if !ok {
			return 0, &Error{Offset: at, Err: errSyntax, Msg: "invalid \\u escape"}
		}
		if !utf16.IsSurrogate(r1) {
			return r1, nil
		}
		if r1 >= 0xDC00 || p.i+1 >= len(p.data) || p.data[p.i] != '\\' || p.data[p.i+1] != 'u' {
			return 0, &Error{Offset: at, Err: errString, Msg: "lone surrogate"}
		}
		p.i += 2
		r2, ok := p.hex4()
		if !ok {
			return 0, &Error{Offset: at, Err: errSyntax, Msg: "invalid \\u escape"}
		}
		r := utf16.DecodeRune(r1, r2)
		if r == utf8.RuneError {
			return 0, &Error{Offset: at, Err: errString, Msg: "lone surrogate"}
		}
		return r, nil
	}
	return 0, &Error{Offset: at, Err: errSyntax, Msg: "invalid escape"}
}

// indexFrom is the offset of the first b in data at or after from, or
// len(data).
func indexFrom(data []byte, from int, b byte) int {
	if i := bytes.IndexByte(data[from:], b); i >= 0 {
		return from + i
	}
	return len(data)
}

func (p *parser) hex4() (rune, bool) {
	if len(p.data)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.i : p.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	p.i += 4
	return r, true
}
