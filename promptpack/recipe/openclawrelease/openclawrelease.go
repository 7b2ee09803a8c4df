// Package openclawrelease implements the "openclaw-release" prompt recipe:
// packs built from what a released OpenClaw (npm package openclaw) really
// sends to the model, captured from the author's own install and workspace
// (docs/spec/recipe-openclaw-release.md).
//
// A capture (ParseCapture) holds the system prompt and the tool definitions
// exactly as they went on the wire, the workspace's bootstrap files and the
// OpenClaw version. Report commits every one of those inputs. Build accepts
// a capture only when a Release for its exact OpenClaw version re-renders
// the captured system prompt byte for byte from the release's fixed text
// (data loaded from that release's own dist/ files, pinned by hash) and the
// capture's inputs.
//
// Supported lists the releases this recipe version can re-render. It is
// empty: no released OpenClaw's assembly rules are implemented yet, so Build
// refuses every capture with ErrUnsupportedVersion (fail closed). A pack is
// never built from a capture that was not reproduced.
package openclawrelease

import (
	"errors"

	"github.com/clawea/attester/promptpack/recipe"
)

const (
	// ID is the recipe name carried in prompt packs.
	ID = "openclaw-release"
	// Version is the version of the recipe's rules.
	Version = "1"
	// CaptureVersion is the capture_version of the capture format.
	CaptureVersion = "1"
	// ReportVersion is the report_version of a capture report.
	ReportVersion = "openclaw-release/1"
)

// Recipe is the recipe.Recipe of this package.
type Recipe struct{}

// ID returns ID.
func (Recipe) ID() string { return ID }

// Version returns Version.
func (Recipe) Version() string { return Version }

var _ recipe.Recipe = Recipe{}

// Size limits. Every input is bounded before it is parsed.
const (
	MaxCaptureSize      = 32 << 20 // one capture file
	MaxSystemPrompt     = 4 << 20  // the captured system prompt, bytes
	MaxTools            = 512      // tool definitions
	MaxToolNameLen      = 128      // bytes of a tool name
	MaxToolDescription  = 64 << 10 // bytes of a tool description
	MaxBootstrapFiles   = 64       // bootstrap files
	MaxBootstrapNameLen = 255      // bytes of a bootstrap file name
	MaxBootstrapFile    = 2 << 20  // bytes of one bootstrap file
	MaxVersionLen       = 64       // bytes of an OpenClaw version string
)

// Sentinel errors. Errors returned by this package wrap one of them.
var (
	// ErrInvalidCapture: the capture is malformed, oversized or
	// inconsistent (an unknown member, a duplicate tool or file, a path in
	// a file name, invalid UTF-8).
	ErrInvalidCapture = errors.New("openclawrelease: invalid capture")
	// ErrUnsupportedVersion: no Release of this recipe version re-renders
	// the capture's OpenClaw version. Unknown versions are refused, never
	// approximated by a neighbouring release.
	ErrUnsupportedVersion = errors.New("openclawrelease: unsupported OpenClaw version")
	// ErrFixedText: the release's fixed text is missing or its hash is not
	// the pinned one.
	ErrFixedText = errors.New("openclawrelease: fixed text does not match the pinned hash")
	// ErrNotReproduced: the re-rendered system prompt differs from the
	// captured one.
	ErrNotReproduced = errors.New("openclawrelease: the captured system prompt is not reproduced")
)
