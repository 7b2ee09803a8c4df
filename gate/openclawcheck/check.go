// Package openclawcheck is the operator's preflight for an OpenClaw
// configuration (`packctl openclaw check`): it reports every setting that
// would let OpenClaw run an agent without the clawea gate, or with the
// model's tools outside the recommended isolation layout
// (docs/spec/openclaw-plugin.md section 6).
//
// It reads the configuration as OpenClaw does (JSON5, the last of two equal
// keys wins) and judges only what the file says. It is written for the
// OpenClaw release the plugin supports (2026.9.6); a setting it does not know
// is left to OpenClaw's own validation, but every setting it needs and cannot
// establish is a finding: the check fails closed.
package openclawcheck

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/clawea/attester/schema/bounded"
	"github.com/titanous/json5"
)

// pluginID is the clawea plugin's id (clients/openclaw/openclaw.plugin.json).
const pluginID = "clawea"

// maxConfigBytes bounds the configuration document.
const maxConfigBytes = 1 << 20

// maxManifestBytes bounds a plugin manifest read from a load path.
const maxManifestBytes = 64 << 10

// ErrMalformed is returned when the configuration is not a JSON5 object.
var ErrMalformed = errors.New("openclawcheck: malformed configuration")

// Finding is one unsafe setting: the configuration key (a dotted path, as
// OpenClaw's docs write it) and what it lets happen.
type Finding struct {
	Key     string `json:"key"`
	Problem string `json:"problem"`
}

func (f Finding) String() string { return f.Key + ": " + f.Problem }

// Host is what the check needs to know about the machine, beyond the file.
type Host struct {
	// HarnessUser and HarnessUID are the account OpenClaw runs as. A
	// sandbox backend that runs tools as this account is no isolation.
	HarnessUser string
	HarnessUID  int
	// HomeDir expands a leading "~/" in load paths.
	HomeDir string
	// ReadFile reads a plugin manifest; nil means a bounded read of at
	// most maxManifestBytes (schema/bounded). Tests
	// inject a fake file system.
	ReadFile func(name string) ([]byte, error)
	// IsDir reports whether a load path is a directory; nil means os.Stat.
	IsDir func(name string) (bool, error)
}

// Check parses cfg (JSON5) and returns the findings, sorted by key. An
// empty result means no setting it knows of lets an agent run without the
// gate or outside the layout. It returns ErrMalformed for input that is not
// a JSON5 object or is over maxConfigBytes.
func Check(cfg []byte, h Host) ([]Finding, error) {
	if len(cfg) > maxConfigBytes {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrMalformed, len(cfg), maxConfigBytes)
	}
	var v any
	if err := json5.Unmarshal(cfg, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: the top level is not an object", ErrMalformed)
	}
	c := checker{root: root, host: h}
	for _, step := range []func(){
		c.readLoadPaths,
		c.includes,
		c.pluginLoaded,
		c.pluginHooks,
		c.otherPlugins,
		c.mcpServers,
		c.elevated,
		c.execHost,
		c.sandbox,
		c.modelRoutes,
	} {
		step()
	}
	slices.SortStableFunc(c.out, func(a, b Finding) int { return cmp.Compare(a.Key, b.Key) })
	return c.out, nil
}

type checker struct {
	root  map[string]any
	host  Host
	paths []loadPath // plugins.load.paths, read once
	out   []Finding
}

// loadPath is one plugins.load.paths entry and the id of the native plugin
// found there ("" for none).
type loadPath struct {
	key string
	id  string
	err error
}

func (c *checker) add(key, format string, args ...any) {
	c.out = append(c.out, Finding{Key: key, Problem: fmt.Sprintf(format, args...)})
}

// lookup walks a dotted path of object members; ok is false when a member is
// missing. A member that is present but not an object is returned as is.
func lookup(v any, path ...string) (any, bool) {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[p]; !ok {
			return nil, false
		}
	}
	return v, true
}

func (c *checker) get(path ...string) (any, bool) { return lookup(c.root, path...) }

// includes: a file OpenClaw merges in is not read here, so nothing it sets
// could be checked.
func (c *checker) includes() {
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(v) {
				p := join(path, k)
				if k == "$include" {
					c.add(p, "includes another file, which this check does not read; inline it")
					continue
				}
				walk(v[k], p)
			}
		case []any:
			for i, e := range v {
				walk(e, path+"["+strconv.Itoa(i)+"]")
			}
		}
	}
	walk(c.root, "")
}

// pluginLoaded: plugins on, clawea on a load path that exists, enabled,
// allowed and not denied. OpenClaw 2026.9.6 runs a turn with its own prompt
// and no gate when the plugin does not load, and says nothing.
func (c *checker) pluginLoaded() {
	if v, ok := c.get("plugins", "enabled"); ok && v != true {
		c.add("plugins.enabled", "is %s: no plugin loads, clawea included, and turns run ungated", show(v))
	}
	found := false
	for _, p := range c.paths {
		if p.err != nil {
			c.add(p.key, "%v", p.err)
		}
		found = found || p.id == pluginID
	}
	switch paths, ok := c.get("plugins", "load", "paths"); {
	case !ok:
		c.add("plugins.load.paths", "is not set: the clawea plugin is not loaded")
	case !found:
		if _, isList := paths.([]any); !isList {
			c.add("plugins.load.paths", "is not a list")
		} else {
			c.add("plugins.load.paths", "no entry holds the %s plugin (a directory whose openclaw.plugin.json has id %q)", pluginID, pluginID)
		}
	}
	if v, ok := c.get("plugins", "entries", pluginID, "enabled"); !ok || v != true {
		c.add("plugins.entries."+pluginID+".enabled", "is %s, not true: the plugin may not run", showOpt(v, ok))
	}
	if v, ok := c.get("plugins", "allow"); ok && !listHas(v, pluginID) {
		c.add("plugins.allow", "does not list %q: the allowlist keeps the plugin from loading", pluginID)
	}
	if v, ok := c.get("plugins", "deny"); ok && listHas(v, pluginID) {
		c.add("plugins.deny", "lists %q: the plugin does not load", pluginID)
	}
}

// readLoadPaths reads each plugins.load.paths entry once.
func (c *checker) readLoadPaths() {
	v, _ := c.get("plugins", "load", "paths")
	list, _ := v.([]any)
	for i, p := range list {
		id, err := c.pluginAt(p)
		c.paths = append(c.paths, loadPath{key: "plugins.load.paths[" + strconv.Itoa(i) + "]", id: id, err: err})
	}
}

// pluginAt reads the manifest of the plugin directory at a load path and
// returns its id.
func (c *checker) pluginAt(p any) (string, error) {
	s, ok := p.(string)
	if !ok || s == "" {
		return "", errors.New("is not a path")
	}
	if rest, ok := strings.CutPrefix(s, "~/"); ok && c.host.HomeDir != "" {
		s = filepath.Join(c.host.HomeDir, rest)
	}
	if !filepath.IsAbs(s) {
		return "", fmt.Errorf("%q is not an absolute path", s)
	}
	isDir := c.host.IsDir
	if isDir == nil {
		isDir = func(name string) (bool, error) {
			fi, err := os.Stat(name)
			if err != nil {
				return false, err
			}
			return fi.IsDir(), nil
		}
	}
	dir, err := isDir(s)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%q does not exist: OpenClaw skips it silently", s)
	}
	if err != nil {
		return "", fmt.Errorf("%q cannot be read: %v", s, err)
	}
	if !dir {
		return "", nil // a standalone plugin file: not the clawea plugin
	}
	read := c.host.ReadFile
	if read == nil {
		// Bounded: a load path may hold a huge file or a FIFO there.
		read = func(name string) ([]byte, error) { return bounded.ReadFile(name, maxManifestBytes) }
	}
	raw, err := read(filepath.Join(s, "openclaw.plugin.json"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil // not a native plugin directory
	}
	if errors.Is(err, bounded.ErrTooLarge) || len(raw) > maxManifestBytes {
		return "", fmt.Errorf("%q: the plugin manifest is over %d bytes", s, maxManifestBytes)
	}
	if err != nil {
		return "", fmt.Errorf("%q: the plugin manifest cannot be read: %v", s, err)
	}
	var m struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", fmt.Errorf("%q: the plugin manifest is not JSON: %v", s, err)
	}
	return m.ID, nil
}

// pluginHooks: without allowConversationAccess, or with prompt injection
// forbidden, OpenClaw skips the plugin's prompt and run hooks and runs the
// model with its own prompt.
func (c *checker) pluginHooks() {
	base := "plugins.entries." + pluginID + ".hooks."
	if v, ok := c.get("plugins", "entries", pluginID, "hooks", "allowConversationAccess"); !ok || v != true {
		c.add(base+"allowConversationAccess", "is %s, not true: OpenClaw skips the plugin's prompt and run hooks", showOpt(v, ok))
	}
	if v, ok := c.get("plugins", "entries", pluginID, "hooks", "allowPromptInjection"); ok && v != true {
		c.add(base+"allowPromptInjection", "is %s: OpenClaw blocks the plugin's attested prompt", show(v))
	}
}

// otherPlugins: any other native plugin the file loads or enables runs in
// OpenClaw's process, beside the plugin that holds the run's capability, and
// its tools run on the Gateway side, outside the sandbox.
func (c *checker) otherPlugins() {
	for _, p := range c.paths {
		if p.err == nil && p.id != pluginID {
			c.add(p.key, "loads another plugin in-process beside %s", pluginID)
		}
	}
	entries, _ := c.get("plugins", "entries")
	if m, ok := entries.(map[string]any); ok {
		for _, id := range sortedKeys(m) {
			if id == pluginID {
				continue
			}
			if v, ok := lookup(m[id], "enabled"); ok && v == true {
				c.add("plugins.entries."+id+".enabled", "runs the %q plugin in-process beside %s, its tools outside the sandbox", id, pluginID)
			}
		}
	}
}

// mcpServers: OpenClaw runs MCP servers from the Gateway process, outside
// the sandbox.
func (c *checker) mcpServers() {
	servers, _ := c.get("mcp", "servers")
	m, ok := servers.(map[string]any)
	if !ok {
		return
	}
	for _, name := range sortedKeys(m) {
		if v, ok := lookup(m[name], "enabled"); ok && v == false {
			continue
		}
		c.add("mcp.servers."+name, "MCP server tools run on the Gateway side, outside the sandbox")
	}
}

// agentEntries returns agents.entries' ids and objects, sorted by id.
func (c *checker) agentEntries() ([]string, map[string]any) {
	v, _ := c.get("agents", "entries")
	m, _ := v.(map[string]any)
	return sortedKeys(m), m
}

// modelRoutes: with the plugin's gateway on (docs/spec/openclaw-plugin.md
// section 7), every model reference of an agent must be the plugin's
// provider, whose transport is the attester's gateway, and OpenClaw's config
// must hold no provider key: in that layout only the attester holds them.
func (c *checker) modelRoutes() {
	if v, _ := c.get("plugins", "entries", pluginID, "config", "gateway"); v != true {
		return
	}
	routed := func(key string, v any) {
		if s, ok := v.(string); !ok || !strings.HasPrefix(s, pluginID+"/") {
			c.add(key, "is %s, not a %s/<provider>/<model> model: its calls do not go through the attester's gateway", show(v), pluginID)
		}
	}
	models := func(key string, m any) {
		if s, ok := m.(string); ok {
			routed(key, s)
			return
		}
		mm, ok := m.(map[string]any)
		if !ok {
			return
		}
		if p, ok := mm["primary"]; ok {
			routed(key+".primary", p)
		}
		fb, _ := mm["fallbacks"].([]any)
		for i, f := range fb {
			routed(fmt.Sprintf("%s.fallbacks[%d]", key, i), f)
		}
	}
	if m, ok := c.get("agents", "defaults", "model"); ok {
		models("agents.defaults.model", m)
	} else {
		c.add("agents.defaults.model", "is not set: OpenClaw picks a model of its own, not a %s/<provider>/<model> one", pluginID)
	}
	ids, entries := c.agentEntries()
	for _, id := range ids {
		if m, ok := lookup(entries[id], "model"); ok {
			models("agents.entries."+id+".model", m)
		}
	}
	v, _ := c.get("models", "providers")
	providers, _ := v.(map[string]any)
	for _, id := range sortedKeys(providers) {
		if _, ok := lookup(providers[id], "apiKey"); ok && id != pluginID {
			c.add("models.providers."+id+".apiKey", "is set: in the gateway layout OpenClaw holds no provider key, the attester does")
		}
	}
}

// elevated: elevated exec leaves the sandbox for the Gateway host or a node.
func (c *checker) elevated() {
	if v, ok := c.get("tools", "elevated", "enabled"); ok && v == true {
		c.add("tools.elevated.enabled", "is true: elevated exec runs outside the sandbox")
	}
	ids, m := c.agentEntries()
	for _, id := range ids {
		if v, ok := lookup(m[id], "tools", "elevated", "enabled"); ok && v == true {
			c.add("agents.entries."+id+".tools.elevated.enabled", "is true: elevated exec runs outside the sandbox")
		}
	}
}

// execHost: exec pinned to the Gateway host or a node runs outside the
// sandbox; "auto" and "sandbox" stay in it when the sandbox is on.
func (c *checker) execHost() {
	check := func(key string, v any, ok bool) {
		if !ok {
			return
		}
		if s, _ := v.(string); s != "auto" && s != "sandbox" {
			c.add(key, "is %s: exec runs outside the sandbox", show(v))
		}
	}
	v, ok := c.get("tools", "exec", "host")
	check("tools.exec.host", v, ok)
	ids, m := c.agentEntries()
	for _, id := range ids {
		v, ok := lookup(m[id], "tools", "exec", "host")
		check("agents.entries."+id+".tools.exec.host", v, ok)
	}
}

// sandbox: every session sandboxed, by a backend that runs the tools under
// another account than OpenClaw's.
func (c *checker) sandbox() {
	defaults, _ := c.get("agents", "defaults", "sandbox")
	d, _ := defaults.(map[string]any)
	if v, ok := d["mode"]; !ok || v != "all" {
		c.add("agents.defaults.sandbox.mode", "is %s, not \"all\": tools run on the Gateway host, as OpenClaw's own account", showOpt(v, ok))
	} else {
		c.backend("agents.defaults.sandbox", d)
	}
	ids, m := c.agentEntries()
	for _, id := range ids {
		s, ok := lookup(m[id], "sandbox")
		if !ok {
			continue
		}
		key := "agents.entries." + id + ".sandbox"
		over, isObj := s.(map[string]any)
		if !isObj {
			c.add(key, "is not an object")
			continue
		}
		if v, ok := over["mode"]; ok && v != "all" {
			c.add(key+".mode", "is %s, not \"all\": this agent's tools run on the Gateway host", show(v))
		}
		// The agent's backend settings merge over the defaults, one
		// level deep (docker and ssh are objects of their own).
		merged := maps.Clone(d)
		if merged == nil {
			merged = map[string]any{}
		}
		for _, k := range []string{"backend", "docker", "ssh"} {
			v, ok := over[k]
			if !ok {
				continue
			}
			vm, isObj := v.(map[string]any)
			base, _ := merged[k].(map[string]any)
			if !isObj {
				merged[k] = v
				continue
			}
			nm := maps.Clone(base)
			if nm == nil {
				nm = map[string]any{}
			}
			maps.Copy(nm, vm)
			merged[k] = nm
		}
		if _, set := over["backend"]; set || over["docker"] != nil || over["ssh"] != nil {
			c.backend(key, merged)
		}
	}
}

// backend checks that the sandbox backend runs tools under an account other
// than the harness's: ssh to a named, unprivileged other user, or a
// docker/podman container with a numeric non-root user other than the
// harness's uid. Other backends cannot be judged from the file.
func (c *checker) backend(key string, s map[string]any) {
	b, ok := s["backend"]
	if !ok {
		b = "docker" // OpenClaw's default backend
	}
	switch b {
	case "ssh":
		target, _ := lookup(s, "ssh", "target")
		t, _ := target.(string)
		user, _, hasUser := strings.Cut(t, "@")
		switch {
		case t == "":
			c.add(key+".ssh.target", "is not set")
		case !hasUser || user == "":
			c.add(key+".ssh.target", "names no user: ssh logs in as OpenClaw's own account")
		case user == "root":
			c.add(key+".ssh.target", "logs in as root: tools can read OpenClaw's memory")
		case user == c.host.HarnessUser:
			c.add(key+".ssh.target", "logs in as %q, OpenClaw's own account", user)
		}
	case "docker", "podman":
		u, ok := lookup(s, "docker", "user")
		us, _ := u.(string)
		uid, err := strconv.Atoi(strings.SplitN(us, ":", 2)[0])
		switch {
		case !ok:
			c.add(key+".docker.user", "is not set: the %s sandbox runs tools as the container's root or as OpenClaw's own uid", b)
		case err != nil || uid < 0:
			c.add(key+".docker.user", "is %s, not a numeric uid: the account cannot be judged", show(u))
		case uid == 0:
			c.add(key+".docker.user", "is root")
		case uid == c.host.HarnessUID:
			c.add(key+".docker.user", "is %d, OpenClaw's own uid", uid)
		}
	default:
		c.add(key+".backend", "is %s: this check cannot tell which account it runs tools as (use ssh or podman)", show(b))
	}
}

func listHas(v any, s string) bool {
	l, ok := v.([]any)
	return ok && slices.Contains(l, any(s))
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// show renders a configuration value for a finding. Values come from the
// operator's own file; strings are quoted and cut.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "not JSON"
	}
	if len(b) > 64 {
		return string(b[:61]) + "..."
	}
	return string(b)
}

func showOpt(v any, ok bool) string {
	if !ok {
		return "not set"
	}
	return show(v)
}
