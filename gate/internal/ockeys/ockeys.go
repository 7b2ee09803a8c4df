// Package ockeys extracts, from a released OpenClaw's own config schema
// (`openclaw config schema`), the keys of the config sections the gate
// reads. The gate passes over exactly these keys (and refuses every other
// undeclared key) when it reads its keys out of a full OpenClaw config;
// gen writes them into gate/openclawrelease.go, and a gate test checks that
// file against an install.
package ockeys

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/clawea/attester/schema/pohjson"
)

// Release is the supported OpenClaw release (hack/e2e-openclaw/install.sh).
const Release = "2026.9.6"

// sections maps a gate section (confdoc section syntax) to the JSON
// pointer-like route of its object schema in OpenClaw's config schema.
// agents.list[] entries are OpenClaw's per-agent entries
// (agents.entries.<id>), which carry the same keys.
var sections = map[string][]string{
	"agents":              {"properties", "agents"},
	"agents.defaults":     {"properties", "agents", "properties", "defaults"},
	"agents.list[]":       {"properties", "agents", "properties", "entries", "additionalProperties"},
	"agents.list[].tools": {"properties", "agents", "properties", "entries", "additionalProperties", "properties", "tools"},
	"tools":               {"properties", "tools"},
}

// Keys runs `openclaw config schema` of the install at dir (the
// openclaw-VERSION directory holding node_modules/openclaw) with nodeBin
// (may be "") first on PATH, and returns, per section, the sorted keys that
// schema declares (schemaKeys).
func Keys(dir, nodeBin string) (map[string][]string, error) {
	schema, err := configSchema(dir, nodeBin)
	if err != nil {
		return nil, err
	}
	return schemaKeys(schema)
}

// configSchema runs `openclaw config schema` of the install at dir with
// nodeBin (may be "") first on PATH, in a throwaway HOME.
func configSchema(dir, nodeBin string) ([]byte, error) {
	home, err := os.MkdirTemp("", "ockeys-home-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(home)
	cmd := exec.Command(dir+"/node_modules/.bin/openclaw", "config", "schema")
	path := os.Getenv("PATH")
	if nodeBin != "" {
		path = nodeBin + string(os.PathListSeparator) + path
	}
	cmd.Env = []string{"PATH=" + path, "HOME=" + home, "OPENCLAW_NO_AUTO_UPDATE=1", "NO_COLOR=1"}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("openclaw config schema: %w: %s", err, stderr.String())
	}
	return out, nil
}

// schemaKeys returns, per section, the sorted keys OpenClaw's config
// schema declares. Every section must be a closed object schema
// (additionalProperties false), so that its key list is complete.
func schemaKeys(schema []byte) (map[string][]string, error) {
	root, err := pohjson.ParseWith(schema, pohjson.ParseOptions{MaxBytes: 64 << 20, MaxDepth: 512, AllowFloats: true})
	if err != nil {
		return nil, fmt.Errorf("config schema: %w", err)
	}
	out := make(map[string][]string, len(sections))
	for name, route := range sections {
		n := root
		for _, step := range route {
			if n, err = deref(root, n); err != nil {
				return nil, err
			}
			if n = n.Get(step); n == nil {
				return nil, fmt.Errorf("section %s: no %q in the schema", name, step)
			}
		}
		if n, err = deref(root, n); err != nil {
			return nil, err
		}
		if t, _ := n.GetString("type"); t != "object" {
			return nil, fmt.Errorf("section %s: not an object schema", name)
		}
		if ap := n.Get("additionalProperties"); ap == nil || ap.Kind() != pohjson.Bool {
			return nil, fmt.Errorf("section %s: the schema does not close the object (additionalProperties)", name)
		} else if b, _ := ap.Bool(); b {
			return nil, fmt.Errorf("section %s: the schema allows any key", name)
		}
		props := n.Get("properties")
		if props.Kind() != pohjson.Object {
			return nil, fmt.Errorf("section %s: no properties", name)
		}
		var keys []string
		for _, m := range props.Members() {
			keys = append(keys, m.Key)
		}
		slices.Sort(keys)
		out[name] = keys
	}
	return out, nil
}

// deref follows local "$ref": "#/a/b" references.
func deref(root, n *pohjson.Value) (*pohjson.Value, error) {
	for range 32 {
		ref, ok := n.GetString("$ref")
		if !ok {
			return n, nil
		}
		p, ok := strings.CutPrefix(ref, "#/")
		if !ok {
			return nil, fmt.Errorf("non-local $ref %q", ref)
		}
		n = root
		for _, step := range strings.Split(p, "/") {
			step = strings.ReplaceAll(strings.ReplaceAll(step, "~1", "/"), "~0", "~")
			if n = n.Get(step); n == nil {
				return nil, fmt.Errorf("unresolved $ref %q", ref)
			}
		}
	}
	return nil, errors.New("$ref chain too long")
}
