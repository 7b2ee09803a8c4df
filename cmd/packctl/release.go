package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/promptpack/recipe/openclawrelease"
	"github.com/clawea/attester/schema/b64u"
)

// buildRelease is `packctl build --recipe openclaw-release --capture FILE
// --openclaw DIR` (docs/spec/recipe-openclaw-release.md section 4): it
// parses the capture, loads the fixed text of the capture's exact OpenClaw
// release from the install at DIR (each pinned file checked against its
// hash), finds the layout that reproduces the captured system prompt byte
// for byte and writes the pack. Nothing is written on any refusal.
func buildRelease(capturePath, openclawDir string, o packOutput, policy *admission.Policy, stdout, stderr io.Writer) int {
	c, code := readParsed(capturePath, maxInputBytes, parseCapture, exitRejected, stderr, "build")
	if code != exitOK {
		return code
	}
	defer c.Wipe()
	p, err := promptpack.BuildRelease(c, openclawDir, func(format string, args ...any) {
		progress(stderr, "build: "+format, args...)
	})
	if err != nil {
		errorf(stderr, "build: %v", err)
		if errors.Is(err, openclawrelease.ErrUnsupportedVersion) || errors.Is(err, openclawrelease.ErrFixedText) {
			return exitCannot
		}
		return exitRejected
	}
	defer p.Wipe()
	return admitAndWrite(p, policy, o, stdout, stderr)
}

// progress writes one progress line to stderr.
func progress(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, "packctl: "+format+"\n", args...)
}

// runReleases is `packctl releases [--json]`: the OpenClaw releases this
// build's openclaw-release recipe supports, each with the entry that
// trusts it in a trusted-template list (attester.trustedTemplates,
// --trusted) and its pinned package files (a verify policy's
// trusted_templates for the reports of its packs).
func runReleases(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("releases", "releases [--json]\n\nLists the OpenClaw releases openclaw-release packs can be built for, with\nthe trusted-template entry that admits their packs and their pinned files.", stderr)
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if !wantArgs(fs, stderr, 0, "") {
		return exitUsage
	}
	type entry struct {
		Version string            `json:"openclaw_version"`
		Trust   map[string]string `json:"trusted_templates_entry"`
		Files   map[string]string `json:"files"`
		Table   string            `json:"fragment_table_sha256_b64u"`
	}
	var out []entry
	for _, v := range slices.Sorted(maps.Keys(openclawrelease.Supported())) {
		rel := openclawrelease.Supported()[v]
		trust, err := promptpack.ReleaseTrust(rel)
		if err != nil {
			return fail(stderr, "releases", exitCannot, err)
		}
		e := entry{Version: v, Trust: trust, Files: map[string]string{}, Table: rel.TableSHA256}
		for _, f := range rel.Files {
			d, err := b64u.DecodeHash(f.SHA256)
			if err != nil {
				return fail(stderr, "releases", exitCannot, err)
			}
			e.Files[f.Path] = fmt.Sprintf("sha256:%x", d)
		}
		out = append(out, e)
	}
	if *asJSON {
		printJSON(stdout, map[string]any{"releases": out})
		return exitOK
	}
	for _, e := range out {
		fmt.Fprintf(stdout, "openclaw %s\n", e.Version)
		for n, h := range e.Trust {
			fmt.Fprintf(stdout, "  trust: %s %s\n", n, h)
		}
		fmt.Fprintf(stdout, "  fragment table: %s\n", e.Table)
		for _, p := range slices.Sorted(maps.Keys(e.Files)) {
			fmt.Fprintf(stdout, "  file: %s %s\n", p, e.Files[p])
		}
	}
	return exitOK
}

// parseCapture is openclawrelease.ParseCapture that clears the bytes it
// parsed.
func parseCapture(b []byte) (*openclawrelease.Capture, error) {
	defer clear(b)
	return openclawrelease.ParseCapture(b)
}
