//go:build !linux

package sealed

type stubAllocator struct{}

func platformAllocator() allocator { return stubAllocator{} }

func (stubAllocator) alloc(int, Options) ([]byte, string, error) { return nil, "", ErrNotSupported }

func (stubAllocator) free(mem []byte, _ string) { Wipe(mem) }

func (stubAllocator) allocShared(int, Options) ([]byte, int, string, error) {
	return nil, -1, "", ErrNotSupported
}

func (stubAllocator) mapFd(int, int, bool, Options) ([]byte, string, error) {
	return nil, "", ErrNotSupported
}

func (stubAllocator) unmap([]byte, string) {}

func (stubAllocator) closeFd(int) {}
