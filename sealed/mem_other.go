//go:build !linux

package sealed

type stubAllocator struct{}

func platformAllocator() allocator { return stubAllocator{} }

func (stubAllocator) alloc(int, Options) ([]byte, string, error) { return nil, "", ErrNotSupported }

func (stubAllocator) free(mem []byte, _ string) { Wipe(mem) }
