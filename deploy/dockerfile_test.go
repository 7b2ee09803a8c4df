// Package deploy holds the deployment files (Dockerfile checks, the Helm
// chart in helm/, the systemd unit in systemd/). No Docker engine runs in CI:
// these tests parse the Dockerfile and .dockerignore instead of building.
package deploy

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

const root = ".."

// instruction is one Dockerfile instruction after joining continuation lines.
type instruction struct {
	line int
	cmd  string // upper case
	args []string
}

func parseDockerfile(t *testing.T, text string) []instruction {
	t.Helper()
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, l := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(l)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		} else if strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if s, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		f := strings.Fields(cur.String())
		out = append(out, instruction{line: start, cmd: strings.ToUpper(f[0]), args: f[1:]})
		cur.Reset()
	}
	if cur.Len() != 0 {
		t.Fatalf("Dockerfile ends inside a continued line")
	}
	return out
}

// ignoreMatcher applies .dockerignore patterns with Docker's rules: paths
// are relative to the context root, "**" matches any number of folders,
// "*" and "?" do not cross "/", a pattern that matches a folder excludes
// everything under it, "!" re-includes, the last matching pattern wins.
type ignoreMatcher struct {
	res []*regexp.Regexp
	neg []bool
}

func newIgnoreMatcher(t *testing.T, text string) *ignoreMatcher {
	t.Helper()
	m := &ignoreMatcher{}
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		neg := strings.HasPrefix(l, "!")
		l = strings.TrimPrefix(l, "!")
		l = strings.Trim(filepath.ToSlash(filepath.Clean(l)), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(l); i++ {
			switch c := l[i]; {
			case strings.HasPrefix(l[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(l[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			case c == '[' || c == '\\':
				t.Fatalf(".dockerignore: pattern %q uses a character class or escape this check does not model", l)
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("(/.*)?$")
		m.res = append(m.res, regexp.MustCompile(re.String()))
		m.neg = append(m.neg, neg)
	}
	return m
}

func (m *ignoreMatcher) excluded(path string) bool {
	ex := false
	for i, re := range m.res {
		if re.MatchString(path) {
			ex = !m.neg[i]
		}
	}
	return ex
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	return string(testfile.Read(t, filepath.Join(root, name)))
}

// fullyQualified matches registry/path:tag or @sha256:digest references
// whose first component is a registry host (it has a dot or a port).
var fullyQualified = regexp.MustCompile(`^[a-z0-9.-]+\.[a-z0-9.-]+(:[0-9]+)?/[a-z0-9._/-]+(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?$`)

func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t, readFile(t, "Dockerfile"))
	ignore := newIgnoreMatcher(t, readFile(t, ".dockerignore"))
	stages := map[string]bool{}
	var last string
	var stamped bool
	var runs string
	users := map[string]string{}
	for _, in := range ins {
		switch in.cmd {
		case "FROM":
			if len(in.args) != 3 || !strings.EqualFold(in.args[1], "AS") {
				t.Errorf("line %d: FROM must be \"FROM image AS name\": %v", in.line, in.args)
				continue
			}
			img := in.args[0]
			if !stages[img] {
				if !fullyQualified.MatchString(img) || !(strings.Contains(img[strings.LastIndex(img, "/"):], ":") || strings.Contains(img, "@sha256:")) {
					t.Errorf("line %d: base image %q is not fully qualified with a tag or digest", in.line, img)
				}
				if strings.HasSuffix(img, ":latest") {
					t.Errorf("line %d: base image %q uses :latest", in.line, img)
				}
			}
			last = in.args[2]
			stages[last] = true
		case "ADD":
			t.Errorf("line %d: use COPY, not ADD (no remote fetches, no archive unpacking)", in.line)
		case "COPY":
			args := in.args
			from := ""
			for len(args) > 0 && strings.HasPrefix(args[0], "--") {
				if v, ok := strings.CutPrefix(args[0], "--from="); ok {
					from = v
				}
				args = args[1:]
			}
			if len(args) < 2 {
				t.Errorf("line %d: COPY needs a source and a destination", in.line)
				continue
			}
			if from != "" {
				if !stages[from] {
					t.Errorf("line %d: COPY --from=%s names no earlier stage", in.line, from)
				}
				for _, src := range args[:len(args)-1] {
					if bin, ok := strings.CutPrefix(src, "/out/"); ok && !strings.Contains(runs, " ./cmd/"+bin+" ") {
						t.Errorf("line %d: COPY %s: no RUN builds ./cmd/%s", in.line, src, bin)
					}
				}
				continue
			}
			for _, src := range args[:len(args)-1] {
				src = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(src)), "./")
				if src == "." {
					continue
				}
				if ignore.excluded(src) {
					t.Errorf("line %d: COPY source %s is excluded by .dockerignore", in.line, src)
				}
				if _, err := os.Stat(filepath.Join(root, src)); err != nil {
					t.Errorf("line %d: COPY source %s: %v", in.line, src, err)
				}
			}
		case "USER":
			users[last] = in.args[0]
		case "RUN":
			runs += " " + strings.Join(in.args, " ") + " "
			if strings.Contains(strings.Join(in.args, " "), "-X github.com/clawea/attester/cmd/internal/buildinfo.version=${VERSION}") {
				stamped = true
			}
		}
	}
	if !stamped {
		t.Errorf("no RUN stamps the version (-X github.com/clawea/attester/cmd/internal/buildinfo.version=${VERSION}) like the Makefile")
	}
	for _, s := range []string{"attester", "packctl", "verifier"} {
		if !stages[s] {
			t.Errorf("no %q target stage", s)
		}
		if u := users[s]; u == "" || strings.HasPrefix(u, "0") || strings.HasPrefix(u, "root") || !regexp.MustCompile(`^[0-9]+:[0-9]+$`).MatchString(u) {
			t.Errorf("stage %s: USER %q; want a numeric non-root uid:gid", s, u)
		}
	}
	if last != "attester" {
		t.Errorf("the default (last) stage is %q, want attester", last)
	}
}

func TestDockerignoreKeepsSecretsOut(t *testing.T) {
	ignore := newIgnoreMatcher(t, readFile(t, ".dockerignore"))
	for _, p := range []string{
		".git/config", "demo-out/pack.sealed", "e2e-out/run/audit.jsonl", "bin/attester",
		"hack/demo/out/recipient.pem", "signing.key", "x/y/recipient-key.json", "hack/jose-interop/node_modules/jose/package.json",
		"sub/demo-out/a", "some/dir/tls.pem", "deploy/helm/clawea/values.yaml",
	} {
		if !ignore.excluded(p) {
			t.Errorf(".dockerignore lets %s into the build context", p)
		}
	}
}

// TestDockerContextHasBuildInputs checks that every file the image build
// compiles or embeds is inside the build context, so a key pattern never
// silently drops a source file.
func TestDockerContextHasBuildInputs(t *testing.T) {
	ignore := newIgnoreMatcher(t, readFile(t, ".dockerignore"))
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,Module,GoFiles,EmbedFiles,OtherFiles", "./cmd/attester", "./cmd/packctl", "./cmd/verifier")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			Dir                             string
			Module                          *struct{ Path string }
			GoFiles, EmbedFiles, OtherFiles []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || p.Module.Path != "github.com/clawea/attester" {
			continue
		}
		rel, err := filepath.Rel(abs, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range slices.Concat(p.GoFiles, p.EmbedFiles, p.OtherFiles) {
			n++
			if path := filepath.ToSlash(filepath.Join(rel, f)); ignore.excluded(path) {
				t.Errorf("%s is needed by the image build but excluded by .dockerignore", path)
			}
		}
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if ignore.excluded(f) {
			t.Errorf("%s is excluded by .dockerignore", f)
		}
	}
	if n < 50 {
		t.Fatalf("go list named %d module files; the build has more", n)
	}
}

// TestDockerContextHoldsNoPrivateKey scans the tracked files that enter the
// build context for PEM private keys.
func TestDockerContextHoldsNoPrivateKey(t *testing.T) {
	ignore := newIgnoreMatcher(t, readFile(t, ".dockerignore"))
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var n int
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if f == "" || ignore.excluded(f) {
			continue
		}
		n++
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the work tree
		}
		if strings.Contains(string(b), "PRIVATE KEY-----") {
			t.Errorf("%s enters the build context and holds a PEM private key", f)
		}
	}
	if n < 50 {
		t.Fatalf("only %d files in the build context", n)
	}
}

// TestBuildFlagsMatchMakefile: `make build` and the image build the
// commands with the same environment, flags and version stamp (issue 17
// item 5), so a binary from either says the same about itself.
func TestBuildFlagsMatchMakefile(t *testing.T) {
	mk, df := []byte(readFile(t, "Makefile")), readFile(t, "Dockerfile")
	ldflags := regexp.MustCompile(`(?m)^LDFLAGS\s*:=\s*(.+)$`).FindSubmatch(mk)
	recipe := regexp.MustCompile(`(?m)^\t(CGO_ENABLED=0) \$\(GO\) build (-trimpath) -ldflags '\$\(LDFLAGS\)' -o \$\(BIN\)/ \./cmd/\.\.\.$`).FindSubmatch(mk)
	if ldflags == nil || recipe == nil {
		t.Fatal("Makefile: no LDFLAGS line or no build recipe of the expected form")
	}
	fromMake := strings.Join([]string{string(recipe[1]), string(recipe[2]),
		strings.ReplaceAll(strings.TrimSpace(string(ldflags[1])), "$(VERSION)", "V")}, " | ")
	var fromImage string
	for _, in := range parseDockerfile(t, df) {
		line := strings.Join(in.args, " ")
		if in.cmd != "RUN" || !strings.Contains(line, "go build") {
			continue
		}
		m := regexp.MustCompile(`^(CGO_ENABLED=0) go build (-trimpath) -ldflags="([^"]*)" -o /out/ `).FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("Dockerfile line %d: go build not of the expected form: %s", in.line, line)
		}
		fromImage = strings.Join([]string{m[1], m[2], strings.ReplaceAll(m[3], "${VERSION}", "V")}, " | ")
	}
	if fromImage != fromMake {
		t.Fatalf("build flags differ:\n  Makefile:   %s\n  Dockerfile: %s", fromMake, fromImage)
	}
}

// TestDockerfilePins: every base image is pinned by digest (a tag alone can
// be rebuilt under us), and the Go image is the go.mod language version.
func TestDockerfilePins(t *testing.T) {
	df, mod := readFile(t, "Dockerfile"), []byte(readFile(t, "go.mod"))
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)(\.\d+)?$`).FindSubmatch(mod)
	if goLine == nil {
		t.Fatal("go.mod has no go line")
	}
	pinned := regexp.MustCompile(`^([a-z0-9./-]+):([A-Za-z0-9._-]+)@sha256:[0-9a-f]{64}$`)
	froms := 0
	for _, in := range parseDockerfile(t, df) {
		if in.cmd != "FROM" {
			continue
		}
		froms++
		m := pinned.FindStringSubmatch(in.args[0])
		if m == nil {
			t.Errorf("Dockerfile line %d: FROM %s is not image:tag@sha256:digest", in.line, in.args[0])
			continue
		}
		if strings.HasSuffix(m[1], "/golang") && !strings.HasPrefix(m[2], string(goLine[1])+".") {
			t.Errorf("Dockerfile line %d: Go image %s, go.mod says go %s", in.line, m[2], goLine[1])
		}
	}
	if froms < 2 {
		t.Fatalf("%d FROM lines; the build and runtime stages are missing", froms)
	}
}
