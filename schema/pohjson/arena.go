package pohjson

import "sync"

// arena holds the memory of a parse with ParseOptions.Release: a caller
// that parses one large document per request and drops the result when
// the request ends gives that memory back for the next request instead of
// leaving it to the collector. An arena is used by one parse at a time;
// arenas holds those not in use.
type arena struct {
	vals    chunks[Value]
	members chunks[Member]
	elems   chunks[*Value]
	// stackM and stackE are the parser's work lists (parser.members and
	// parser.elems), kept between parses.
	stackM []Member
	stackE []*Value
}

var arenas = sync.Pool{New: func() any { return new(arena) }}

// takeArena returns an arena of the pool and the function that clears it
// and gives it back (once, however often it is called).
func takeArena() (*arena, func()) {
	a := arenas.Get().(*arena)
	return a, func() {
		if a != nil {
			a.reset()
			arenas.Put(a)
			a = nil
		}
	}
}

// maxArenaChunks is the most chunks of each kind Reset keeps: an arena
// that one huge document grew gives the rest back to the collector, so a
// pooled arena holds at most about maxArenaChunks*maxSlab values.
const maxArenaChunks = 64

// maxArenaStack is the largest work list Reset keeps.
const maxArenaStack = 4 * maxSlab

// reset clears the values of the parse made with a, so that the pool
// holds no pointer into its input; the memory is kept, up to a bound, for
// the next parse.
func (a *arena) reset() {
	a.vals.reset()
	a.members.reset()
	a.elems.reset()
	clear(a.stackM[:cap(a.stackM)])
	clear(a.stackE[:cap(a.stackE)])
	if cap(a.stackM) > maxArenaStack {
		a.stackM = nil
	}
	if cap(a.stackE) > maxArenaStack {
		a.stackE = nil
	}
	a.stackM, a.stackE = a.stackM[:0], a.stackE[:0]
}

// chunks is an arena's list of chunks of maxSlab items: used of them
// handed out since the last reset, the rest zero.
type chunks[T any] struct {
	list [][]T
	used int
}

// next returns the next zero chunk of maxSlab items, made when there is
// none.
func (c *chunks[T]) next() []T {
	if c.used == len(c.list) {
		c.list = append(c.list, make([]T, maxSlab))
	}
	s := c.list[c.used]
	c.used++
	return s
}

func (c *chunks[T]) reset() {
	for _, s := range c.list[:c.used] {
		clear(s)
	}
	if len(c.list) > maxArenaChunks {
		clear(c.list[maxArenaChunks:])
		c.list = c.list[:maxArenaChunks]
	}
	c.used = 0
}
