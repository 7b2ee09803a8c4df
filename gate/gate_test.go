package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/clawea/attester/gate/audit"
)

func TestToolPolicy(t *testing.T) {
	cfg := mustParse(t, `{
	  "tools": {"allow": ["group:fs", "group:runtime", "web_*", "session_status", "sessions_send"], "deny": ["process", "web_fetch"]},
	  "agents": {"list": [
	    {"id": "coder", "tools": {"profile": "coding", "deny": ["write"]}},
	    {"id": "chat", "tools": {"profile": "messaging", "allow": ["sessions_send", "message"]}},
	    {"id": "tiny", "tools": {"profile": "minimal", "deny": ["verify"]}}
	  ]}}`)
	g := newTestGate(t, cfg)
	cases := []struct {
		agent, tool string
		allow       bool
		reason      string
	}{
		{"", "read", true, ""},
		{"", "  EXEC ", true, ""},
		{"", "bash", true, ""},        // alias of exec
		{"", "Apply-Patch", true, ""}, // alias of apply_patch
		{"", "web_search", true, ""},  // glob
		{"", "web_fetch", false, "denied by tools.deny"},
		{"", "process", false, "denied by tools.deny"}, // deny wins over group:runtime
		{"", "browser", false, "not in tools.allow"},
		{"", "verify", true, ""}, // never filtered by allow lists
		{"main", "read", true, ""},
		{"unlisted", "browser", false, "not in tools.allow"}, // unlisted agents use the global policy
		{"coder", "edit", true, ""},
		{"coder", "write", false, "denied by agents.list[id=coder].tools.deny"},
		{"coder", "process", false, "denied by tools.deny"}, // the agent cannot undo a global deny
		{"coder", "web_search", false, "not in tool profile coding"},
		{"chat", "sessions_send", true, ""},
		{"chat", "message", false, "not in tools.allow"}, // global allow still applies
		{"chat", "read", false, "not in agents.list[id=chat].tools.allow"},
		{"tiny", "session_status", true, ""},
		{"tiny", "read", false, "not in tool profile minimal"},
		{"tiny", "verify", false, "denied by agents.list[id=tiny].tools.deny"}, // explicit deny still denies verify
	}
	for _, tc := range cases {
		c := call(tc.tool)
		c.AgentID = tc.agent
		d := g.decide(t, c)
		if d.Allow != tc.allow {
			t.Errorf("%s/%s: allow = %v (%s)", tc.agent, tc.tool, d.Allow, d.Reason)
			continue
		}
		if d.Stage != stagePolicy {
			t.Errorf("%s/%s: stage %s", tc.agent, tc.tool, d.Stage)
		}
		if !tc.allow && !strings.Contains(d.Reason, "("+tc.reason+")") {
			t.Errorf("%s/%s: reason %q, want %q", tc.agent, tc.tool, d.Reason, tc.reason)
		}
	}
	g.verifyAudit(t, uint64(len(cases)))
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"*", "exec", true}, {"web_*", "web_fetch", true}, {"web_*", "web", false},
		{"*_*", "a_b", true}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false}, {"exec", "exec", true},
		{"*exec", "xexec", true}, {"e*e*e", "eee", true}, {"e*e*e", "ee", false},
	} {
		if got := globMatch(tc.p, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}

const enforced = `{"agents": {"defaults": {"sig": {"enforceVerification": true}},
  "list": [{"id": "ops", "sig": {"gatedTools": ["read"]}}, {"id": "strict", "sig": {"enforceVerification": true}}]}}`

func TestVerificationGate(t *testing.T) {
	g := newTestGate(t, mustParse(t, enforced))
	const r = "run-1"
	exec := Call{Run: r, SessionKey: "agent:main:main", TurnID: "t1", Tool: "exec", Params: []byte(`{"command":"ls"}`)}

	// The run is not open yet: blocked.
	d := g.decide(t, exec)
	if d.Allow || d.Stage != stageVerification || !strings.Contains(d.Reason, "Call the verify tool first") {
		t.Fatalf("before the run: %+v", d)
	}
	if err := g.NewTurn(r, "t1", true); !errors.Is(err, errUnknownRun) {
		t.Fatalf("turn in a run that is not open: %v", err)
	}
	if err := g.OpenRun(r); err != nil {
		t.Fatal(err)
	}
	if err := g.OpenRun(r); !errors.Is(err, errRunExists) {
		t.Fatalf("run opened twice: %v", err)
	}
	if d := g.decide(t, exec); d.Allow || !strings.Contains(d.Reason, "no turn has started") {
		t.Fatalf("before any turn: %+v", d)
	}
	// A non-owner turn cannot be verified; the state is unchanged.
	if err := g.NewTurn(r, "t0", false); err != nil {
		t.Fatal(err)
	}
	if err := g.MarkVerified(r, "t0", VerifiedTemplates); !errors.Is(err, errNotOwner) {
		t.Fatalf("verify in a non-owner turn: %v", err)
	}
	if d := g.decide(t, Call{Run: r, SessionKey: "s", TurnID: "t0", Tool: "exec"}); d.Allow {
		t.Fatal("a non-owner turn was verified")
	}
	if err := g.NewTurn(r, "t1", true); err != nil {
		t.Fatal(err)
	}
	d = g.decide(t, exec)
	if d.Allow || d.Stage != stageVerification || !strings.Contains(d.Reason, "not been verified by the owner") {
		t.Fatalf("unverified turn: %+v", d)
	}
	// Ungated tools and verify itself pass.
	if d := g.decide(t, Call{Run: r, SessionKey: "s", TurnID: "t1", Tool: "read"}); !d.Allow || d.Stage != stagePolicy {
		t.Fatalf("read: %+v", d)
	}
	if d := g.decide(t, Call{Run: r, SessionKey: "s", TurnID: "t1", Tool: "verify"}); !d.Allow {
		t.Fatalf("verify: %+v", d)
	}
	// Verify for another turn or run is refused.
	if err := g.MarkVerified(r, "t0", VerifiedTemplates); !errors.Is(err, errStaleTurn) {
		t.Fatalf("stale turn: %v", err)
	}
	if err := g.MarkVerified("other", "t1", VerifiedTemplates); !errors.Is(err, errUnknownRun) {
		t.Fatalf("unknown run: %v", err)
	}
	if err := g.MarkVerified(r, "t1", "vibes"); !errors.Is(err, errInvalidCall) {
		t.Fatalf("bad method: %v", err)
	}
	// The owner verifies: gated tools pass for this turn.
	if err := g.MarkVerified(r, "t1", VerifiedTemplates); err != nil {
		t.Fatal(err)
	}
	d = g.decide(t, exec)
	if !d.Allow || d.Stage != stageVerification || !strings.Contains(d.Reason, "templates") {
		t.Fatalf("verified: %+v", d)
	}
	// Other runs are unaffected, even with the same session key and turn id.
	if err := g.OpenRun("run-2"); err != nil {
		t.Fatal(err)
	}
	if err := g.NewTurn("run-2", "t1", false); err != nil {
		t.Fatal(err)
	}
	other := exec
	other.Run = "run-2"
	if d := g.decide(t, other); d.Allow {
		t.Fatal("verification leaked across runs")
	}
	// A new turn resets verification; calls from the old turn are blocked too.
	if err := g.NewTurn(r, "t2", true); err != nil {
		t.Fatal(err)
	}
	if d := g.decide(t, exec); d.Allow || !strings.Contains(d.Reason, "not the current turn") {
		t.Fatalf("old turn after reset: %+v", d)
	}
	exec.TurnID = "t2"
	if d := g.decide(t, exec); d.Allow {
		t.Fatal("new turn inherited verification")
	}
	if err := g.MarkVerified(r, "t2", VerifiedMessage); err != nil {
		t.Fatal(err)
	}
	if d := g.decide(t, exec); !d.Allow || !strings.Contains(d.Reason, "message") {
		t.Fatalf("message verification: %+v", d)
	}
	// EndRun forgets the state.
	g.EndRun(r)
	if d := g.decide(t, exec); d.Allow || !strings.Contains(d.Reason, "not open") {
		t.Fatalf("ended run still verified: %+v", d)
	}
	g.verifyAudit(t, 12)
}

func TestVerificationGatePerAgent(t *testing.T) {
	g := newTestGate(t, mustParse(t, enforced))
	if err := g.OpenRun("s"); err != nil {
		t.Fatal(err)
	}
	if err := g.NewTurn("s", "t", true); err != nil {
		t.Fatal(err)
	}
	ops := func(tool string) Call {
		return Call{Run: "s", SessionKey: "s", TurnID: "t", AgentID: "ops", Tool: tool}
	}
	// ops overrides gatedTools with [read]: exec passes, read is gated.
	if d := g.decide(t, ops("exec")); !d.Allow {
		t.Fatalf("ops exec: %+v", d)
	}
	if d := g.decide(t, ops("read")); d.Allow || d.Stage != stageVerification {
		t.Fatalf("ops read: %+v", d)
	}
	// Default agent keeps the default list.
	if d := g.decide(t, Call{Run: "s", SessionKey: "s", TurnID: "t", Tool: "sessions_spawn"}); d.Allow {
		t.Fatal("default gated tool passed")
	}

	// Enforcement off globally; an agent can switch it on but never off.
	g2 := newTestGate(t, mustParse(t, `{"agents":{"list":[{"id":"on","sig":{"enforceVerification":true}},{"id":"off","sig":{"enforceVerification":false}}]}}`))
	if d := g2.decide(t, Call{SessionKey: "s", TurnID: "t", Tool: "exec"}); !d.Allow {
		t.Fatal("gate enforced while disabled")
	}
	if d := g2.decide(t, Call{SessionKey: "s", TurnID: "t", AgentID: "on", Tool: "exec"}); d.Allow {
		t.Fatal("per-agent enforcement ignored")
	}
	g3 := newTestGate(t, mustParse(t, `{"agents":{"defaults":{"sig":{"enforceVerification":true}},"list":[{"id":"off","sig":{"enforceVerification":false}}]}}`))
	if d := g3.decide(t, Call{SessionKey: "s", TurnID: "t", AgentID: "off", Tool: "exec"}); d.Allow {
		t.Fatal("an agent switched enforcement off")
	}
}

func TestMaxRuns(t *testing.T) {
	g := newTestGate(t, mustParse(t, `{}`), func(o *Options) { o.MaxRuns = 2 })
	for _, r := range []string{"a", "b"} {
		if err := g.OpenRun(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.OpenRun("c"); !errors.Is(err, errTooManyRuns) {
		t.Fatalf("third run: %v", err)
	}
	// Turns in an open run cost nothing more.
	for i := range 1000 {
		if err := g.NewTurn("a", fmt.Sprint("t", i), i%2 == 0); err != nil {
			t.Fatal(err)
		}
	}
	// Ending a run frees its slot: the bound is on open runs only.
	g.EndRun("b")
	if err := g.OpenRun("c"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "r\n", strings.Repeat("r", maxRunIDBytes+1), "\xff"} {
		if err := g.OpenRun(bad); !errors.Is(err, errInvalidCall) {
			t.Errorf("OpenRun(%q): %v", bad, err)
		}
	}
	for _, bad := range []string{"", "t\n", strings.Repeat("t", maxTurnIDBytes+1), "\xff"} {
		if err := g.NewTurn("a", bad, true); !errors.Is(err, errInvalidCall) {
			t.Errorf("NewTurn(%q): %v", bad, err)
		}
	}
}

func TestCheckIdentifiers(t *testing.T) {
	if a, err := CheckAgentID("ops"); err != nil || a != "ops" {
		t.Fatalf("CheckAgentID: %q %v", a, err)
	}
	if a, err := CheckAgentID(""); err != nil || a != defaultAgentID {
		t.Fatalf("CheckAgentID empty: %q %v", a, err)
	}
	// Never normalized: a spaced, upper-case or Kelvin-sign id is refused,
	// not mapped onto a configured agent.
	for _, bad := range []string{"a/b", "a b", strings.Repeat("a", 200), " ops ", "OPS", "MAIN\n", "\u212aelvin"} {
		if _, err := CheckAgentID(bad); !errors.Is(err, errInvalidCall) {
			t.Errorf("CheckAgentID(%q): %v", bad, err)
		}
	}
	for _, bad := range []string{"", "s\x00", strings.Repeat("s", MaxSessionKeyBytes+1)} {
		if err := CheckSessionKey(bad); !errors.Is(err, errInvalidCall) {
			t.Errorf("CheckSessionKey(%q): %v", bad, err)
		}
	}
	// What the checks accept, Decide accepts.
	g := newTestGate(t, mustParse(t, `{}`))
	a, _ := CheckAgentID("ops")
	if d := g.decide(t, Call{SessionKey: "agent:x", TurnID: "t", AgentID: a, Tool: "read"}); d.Stage == stageInput {
		t.Fatalf("checked identifiers refused by Decide: %+v", d)
	}
}

func TestInvalidCalls(t *testing.T) {
	g := newTestGate(t, mustParse(t, `{}`))
	bad := []Call{
		{SessionKey: "s", TurnID: "t", Tool: ""},
		{SessionKey: "s", TurnID: "t", Tool: "ex ec"},
		{SessionKey: "s", TurnID: "t", Tool: "exec*"},
		{SessionKey: "s", TurnID: "t", Tool: strings.Repeat("x", maxToolNameBytes+1)},
		{SessionKey: "s", TurnID: "t", Tool: "exec", Params: []byte(`[1]`)},
		{SessionKey: "s", TurnID: "t", Tool: "exec", Params: []byte(`{"a":1,"a":2}`)},
		{SessionKey: "s", TurnID: "t", Tool: "exec", Params: []byte(`{"a":"\ud800"}`)},
		{SessionKey: "s", TurnID: "t", Tool: "exec", Params: []byte(`{`)},
		{SessionKey: "", TurnID: "t", Tool: "exec"},
		{SessionKey: "s", TurnID: "", Tool: "exec"},
		{SessionKey: "s", TurnID: "t", AgentID: "a/b", Tool: "exec"},
		// Agent ids are never trimmed or case-folded onto a listed agent.
		{SessionKey: "s", TurnID: "t", AgentID: "CODER", Tool: "exec"},
		{SessionKey: "s", TurnID: "t", AgentID: " main ", Tool: "exec"},
		{SessionKey: "s", TurnID: "t", AgentID: "\u212aelvin", Tool: "exec"},
		{SessionKey: "s", TurnID: "t", Tool: "exec", MessageProvider: "tele\x00gram"},
		{SessionKey: "s", TurnID: "t", Tool: "exec", Params: []byte(`{"x":"` + strings.Repeat("a", maxParamsBytes) + `"}`)},
	}
	for i, c := range bad {
		d, err := g.Decide(context.Background(), c)
		if !errors.Is(err, errInvalidCall) || d.Allow || d.Stage != stageInput {
			t.Errorf("case %d: %+v %v", i, d, err)
		}
	}
	g.verifyAudit(t, uint64(len(bad)))
	// nil and empty params are {}.
	d1 := g.decide(t, Call{SessionKey: "s", TurnID: "t", Tool: "read"})
	d2 := g.decide(t, Call{SessionKey: "s", TurnID: "t", Tool: "read", Params: []byte(" {} ")})
	if d1.ParamsHash != d2.ParamsHash || !d1.Allow {
		t.Fatal("empty params differ from {}")
	}
	// Params are hashed in JCS form.
	d3 := g.decide(t, Call{SessionKey: "s", TurnID: "t", Tool: "read", Params: []byte(`{"b":1, "a":[1.0,"x"]}`)})
	d4 := g.decide(t, Call{SessionKey: "s", TurnID: "t", Tool: "read", Params: []byte(`{"a":[1,"x"],"b":1}`)})
	if d3.ParamsHash != d4.ParamsHash {
		t.Fatal("params hash is not over JCS")
	}
}

type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestAuditFailureDenies(t *testing.T) {
	w, _ := audit.NewWriter(brokenWriter{}, audit.WriterOptions{})
	g, err := New(Options{Config: mustParse(t, `{}`), Audit: w})
	if err != nil {
		t.Fatal(err)
	}
	d, err := g.Decide(context.Background(), call("read"))
	if !errors.Is(err, errAudit) || d.Allow {
		t.Fatalf("audit failure: %+v %v", d, err)
	}
}

func TestNewOptions(t *testing.T) {
	w, _ := audit.NewWriter(io.Discard, audit.WriterOptions{})
	cfg := mustParse(t, `{}`)
	wh := mustParse(t, `{"tools":{"verifier":{"enabled":true,"webhook":{"url":"https://v.example"}}}}`)
	for i, o := range []Options{
		{Audit: w},
		{Config: cfg},
		{Config: cfg, Audit: w, TelegramAPIBase: "ftp://x"},
		{Config: wh, Audit: w}, // webhook without an HTTP client
	} {
		if _, err := New(o); !errors.Is(err, errOptions) {
			t.Errorf("case %d: %v", i, err)
		}
	}
}

// TestDecideAllocs bounds the allocations of an in-process decision (no
// external verifier), with and without the Info log line. Allocation
// counts are deterministic; times are reported by the benchmarks only.
func TestDecideAllocs(t *testing.T) {
	const maxAllocs = 50
	cfg := mustParse(t, `{"tools":{"profile":"coding","allow":["group:fs","group:runtime"],"deny":["process"]},`+
		`"agents":{"defaults":{"sig":{"enforceVerification":true}}}}`)
	for name, lg := range map[string]*slog.Logger{"quiet": nil, "logged": slog.New(slog.NewJSONHandler(io.Discard, nil))} {
		g := newTestGate(t, cfg, func(o *Options) { o.Audit = discardAudit(t); o.Logger = lg })
		verifiedTurn(t, g.Gate, "run-1", "turn-1")
		for _, tool := range []string{"read", "exec", "process"} {
			c := call(tool)
			c.Params = []byte(`{"path":"/workspace/README.md","offset":0,"limit":200,"opts":{"b":[1,2],"a":"x"}}`)
			n := testing.AllocsPerRun(200, func() {
				if _, err := g.Decide(context.Background(), c); err != nil {
					t.Fatal(err)
				}
			})
			if n > maxAllocs {
				t.Errorf("%s/%s: %.0f allocations per decision, want at most %d", name, tool, n, maxAllocs)
			}
		}
	}
}
