package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/promptpack/recipe/openclawrelease"
)

// buildRelease is `packctl build --recipe openclaw-release --capture FILE
// --openclaw DIR` (docs/spec/recipe-openclaw-release.md section 4): it
// parses the capture, loads the fixed text of the capture's exact OpenClaw
// release from the install at DIR (each pinned file checked against its
// hash), finds the layout that reproduces the captured system prompt byte
// for byte and writes the pack. Nothing is written on any refusal.
func buildRelease(capturePath, openclawDir, out string, force bool, policy *admission.Policy, stdout, stderr io.Writer) int {
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
	rel, err := openclawrelease.Lookup(c.OpenClawVersion)
	if err != nil {
		errorf(stderr, "build: %v", err)
		return exitCannot
	}
	if _, err := os.Stat(openclawDir); err != nil {
		errorf(stderr, "build: --openclaw: %v", err)
		return exitCannot
	}
	pkg := openclawrelease.PackageDir(openclawDir)
	progress(stderr, "build: reading the fixed text of OpenClaw %s from %s", rel.OpenClawVersion, pkg)
	fixed, err := openclawrelease.LoadFixed(rel, pkg)
	if err != nil {
		errorf(stderr, "build: %v", err)
		return exitCannot
	}
	progress(stderr, "build: %d fragments; reproducing the captured prompt (%d bytes)", len(fixed.Fragments), len(c.SystemPrompt))
	p, err := promptpack.BuildRelease(c, fixed)
	if err != nil {
		errorf(stderr, "build: %v", err)
		if errors.Is(err, openclawrelease.ErrUnsupportedVersion) || errors.Is(err, openclawrelease.ErrFixedText) {
			return exitCannot
		}
		return exitRejected
	}
	defer p.Wipe()
	if policy != nil {
		if err := policy.Admit(p); err != nil {
			errorf(stderr, "build: %v", err)
			return admissionExit(err)
		}
	}
	enc, err := p.Encode()
	if err != nil {
		errorf(stderr, "build: %v", err)
		return exitRejected
	}
	defer clear(enc)
	if err := writeOutput(out, enc, 0o600, stdout, force); err != nil {
		errorf(stderr, "build: %v", err)
		if errors.Is(err, errExists) {
			return exitUsage
		}
		return exitCannot
	}
	return exitOK
}

// progress writes one progress line to stderr.
func progress(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "packctl: "+format+"\n", args...)
}
