package main

import (
	"errors"
	"io"

	"github.com/clawea/attester/promptpack/recipe/openclawrelease"
)

// buildRelease is `packctl build --recipe openclaw-release --capture FILE`
// (docs/spec/recipe-openclaw-release.md section 4): it parses the capture
// and asks the recipe to reproduce it. Only a capture whose system prompt
// the recipe re-renders byte for byte could become a pack; this recipe
// version reproduces no OpenClaw release yet, so it always refuses and
// writes nothing.
func buildRelease(capturePath string, stderr io.Writer) int {
	b, err := readLimited(capturePath, openclawrelease.MaxCaptureSize)
	if err != nil {
		errorf(stderr, "build: %v", err)
		return exitCannot
	}
	c, err := openclawrelease.ParseCapture(b)
	clear(b)
	if err != nil {
		errorf(stderr, "build: %s: %v", capturePath, err)
		return exitRejected
	}
	defer c.Wipe()
	res, err := openclawrelease.Build(c, openclawrelease.Supported(), nil)
	switch {
	case errors.Is(err, openclawrelease.ErrUnsupportedVersion):
		errorf(stderr, "build: %v", err)
		return exitCannot
	case err != nil:
		errorf(stderr, "build: %v", err)
		return exitRejected
	}
	// Unreachable while Supported is empty; a reproduced capture still has
	// no pack format to go into, so nothing is written.
	errorf(stderr, "build: capture reproduced (report %s) but openclaw-release packs are not defined yet", res.ReportHashB64u())
	return exitCannot
}
