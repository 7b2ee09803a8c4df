// Package openclawrelease implements the "openclaw-release" prompt recipe:
// packs built from what a released OpenClaw (npm package openclaw) really
// sends to the model, captured from the author's own install and workspace
// (docs/spec/recipe-openclaw-release.md).
//
// A capture (ParseCapture) holds the system prompt and the tool definitions
// exactly as they went on the wire, the workspace's bootstrap files and the
// OpenClaw version. Reproduce accepts a capture only when it finds a layout
// that renders the captured system prompt byte for byte from the fixed text
// of the capture's exact release (fragments of that release's pinned
// package files, loadFixed), the capture's tools and bootstrap files, and
// values in the release's slots. The layout, the fragments it uses and the
// capture travel in the pack as a release document. Rebuild is the rebuild
// side in one call: it reads the document, has the caller's trust check
// accept the document's release first, and only then checks the layout
// against the release's fragment table, embedded in this package as hashes
// only, and re-renders the prompt (finish); it needs no install.
//
// Supported lists the releases this recipe version knows (OpenClaw
// 2026.9.6). Any other version is refused with ErrUnsupportedVersion, and
// a capture the release does not reproduce with errNotReproduced: nothing
// is approximated.
package openclawrelease

import "errors"

const (
	// ID is the recipe name carried in prompt packs.
	ID = "openclaw-release"
	// Version is the version of the recipe's rules.
	Version = "1"
	// captureVersion is the capture_version of the capture format.
	captureVersion = "1"
	// reportVersion is the report_version of a capture report.
	reportVersion = "openclaw-release/1"
)

// Size limits. Every input is bounded before it is parsed.
const (
	maxCaptureSize      = 32 << 20 // one capture file
	maxSystemPrompt     = 4 << 20  // the captured system prompt, bytes
	maxTools            = 512      // tool definitions
	maxToolNameLen      = 128      // bytes of a tool name
	maxToolDescription  = 64 << 10 // bytes of a tool description
	maxBootstrapFiles   = 64       // bootstrap files
	maxBootstrapNameLen = 255      // bytes of a bootstrap file name
	maxBootstrapFile    = 2 << 20  // bytes of one bootstrap file
	maxVersionLen       = 64       // bytes of an OpenClaw version string
)

// Sentinel errors. Errors returned by this package wrap one of them.
var (
	// errInvalidCapture: the capture is malformed, oversized or
	// inconsistent (an unknown member, a duplicate tool or file, a path in
	// a file name, invalid UTF-8).
	errInvalidCapture = errors.New("openclawrelease: invalid capture")
	// ErrUnsupportedVersion: no Release of this recipe version re-renders
	// the capture's OpenClaw version. Unknown versions are refused, never
	// approximated by a neighbouring release.
	ErrUnsupportedVersion = errors.New("openclawrelease: unsupported OpenClaw version")
	// ErrFixedText: a pinned file of the release is missing, oversized or
	// not the pinned one, or the fragment table is not the pinned one.
	ErrFixedText = errors.New("openclawrelease: fixed text does not match the pinned hash")
	// errNotReproduced: no layout renders the captured system prompt, or
	// the re-rendered prompt differs from the captured one.
	errNotReproduced = errors.New("openclawrelease: the captured system prompt is not reproduced")
)
