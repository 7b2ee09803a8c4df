// Package bintest holds what the tests that build and run the real
// binaries share: building a command, and a buffer that a process's log
// pipe and the test can use at once. Only tests import it
// (internal/layers enforces that).
package bintest

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
)

// Build builds the main package in the current directory (the package
// under test) into outDir/name and returns the binary's path. go test puts
// the running toolchain's bin directory first on PATH, so "go" is the
// toolchain running the test.
func Build(outDir, name string) (string, error) {
	return buildPackage(outDir, name, ".")
}

// buildPackage builds the main package pkg (an import path, or a directory
// relative to the current one) into outDir/name and returns the binary's
// path.
func buildPackage(outDir, name, pkg string) (string, error) {
	bin := filepath.Join(outDir, name)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// Buffer is a bytes.Buffer safe for concurrent writers and readers.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Bytes returns a copy of the contents.
func (s *Buffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

func (s *Buffer) String() string { return string(s.Bytes()) }
