// Package goldengen makes the audit log of the gate's golden decision
// sequence (gate/testdata/decisions.golden.jsonl): a fixed configuration,
// clock and sequence of calls (allow, policy deny, verification gate deny
// and allow, malformed input, parameters in every JSON shape). The golden
// file was written by the implementation before speed work on the
// decision path; TestDecisionsGolden checks that neither the decisions nor
// the audit bytes have changed since.
//
// Run `go generate ./gate` to rewrite the file (only on purpose: it pins
// the audit format).
package goldengen

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/clawea/attester/gate"
	"github.com/clawea/attester/gate/audit"
)

// Path is the golden file, relative to gate/.
const Path = "testdata/decisions.golden.jsonl"

// epoch is the fixed clock of the gate and its audit writer.
var epoch = time.Date(2026, 2, 12, 15, 30, 0, 0, time.UTC)

func fixedNow() time.Time { return epoch }

const config = `{"tools":{"profile":"coding","allow":["group:fs","group:runtime","web_*"],"deny":["process"]},` +
	`"agents":{"defaults":{"sig":{"enforceVerification":true}}}}`

// calls is the sequence; a turn opens before the fourth call and is
// verified before the fifth.
var calls = []struct {
	tool, params string
	allow        bool
}{
	{"read", `{"path":"/workspace/README.md","offset":0,"limit":200}`, true},
	{"process", `{}`, false},
	{"exec", `{"command":"ls -la","workdir":"/workspace"}`, false},
	{"verify", ``, true},
	{"read", ` { "b" : [ 1 , 2.50, 0, 1e3 ] , "a" : "x\/y\u0041\u00e9\u2028\n\t\"\\\u001f\u007f\ud83d\ude00" } `, true},
	{"read", `{"a":1,"a":2}`, false},
	{"read", `{"z":-0}`, false},
	{"Bash", `[1]`, false},
	{"web_fetch", `{"url":"https://example.com/?q=<&>"}`, false},
}

// Result is the audit log of the sequence and the writer's view of it.
type Result struct {
	// Audit is the log, byte for byte.
	Audit []byte
	// Root and Count are the audit writer's head and record count.
	Root  string
	Count uint64
	// Calls is the number of calls decided.
	Calls int
}

// Decisions runs the sequence through a new gate. It fails when a call is
// not decided as the sequence expects.
func Decisions(ctx context.Context) (*Result, error) {
	cfg, err := gate.ParseConfig([]byte(config), gate.ParseOptions{})
	if err != nil {
		return nil, err
	}
	var log bytes.Buffer
	w, err := audit.NewWriter(&log, audit.WriterOptions{Now: fixedNow})
	if err != nil {
		return nil, err
	}
	g, err := gate.New(gate.Options{Config: cfg, Audit: w, Now: fixedNow})
	if err != nil {
		return nil, err
	}
	if err := g.OpenRun("run-1"); err != nil {
		return nil, err
	}
	for i, c := range calls {
		if i == 3 {
			if err := g.NewTurn("run-1", "turn-1", true); err != nil {
				return nil, err
			}
		}
		if i == 4 {
			if err := g.MarkVerified("run-1", "turn-1", gate.VerifiedTemplates); err != nil {
				return nil, err
			}
		}
		d, _ := g.Decide(ctx, gate.Call{
			Run: "run-1", SessionKey: "agent:main:main", TurnID: "turn-1", Tool: c.tool,
			Params: []byte(c.params), MessageProvider: "telegram",
		})
		if d.Allow != c.allow {
			return nil, fmt.Errorf("call %d (%s): allow %v, want %v: %s", i, c.tool, d.Allow, c.allow, d.Reason)
		}
	}
	root, count := w.Root()
	return &Result{Audit: log.Bytes(), Root: root, Count: count, Calls: len(calls)}, nil
}
