package gate

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/clawea/attester/gate/audit"
	"github.com/clawea/attester/internal/bintest"
	"github.com/clawea/attester/wire/auditrec"
)

var testEpoch = time.Date(2026, 2, 12, 15, 30, 0, 0, time.UTC)

func fixedNow() time.Time { return testEpoch }

type testGate struct {
	*Gate
	audit *bintest.Buffer
	w     *audit.Writer
	logs  *bintest.Buffer
}

type gateOpt func(*Options)

// verifiedTurn opens run in g, starts turn in it as an owner turn and
// marks the turn verified (templates), as an attester does before a gated
// call may be allowed.
func verifiedTurn(t testing.TB, g *Gate, run, turn string) {
	t.Helper()
	if err := g.OpenRun(run); err != nil {
		t.Fatal(err)
	}
	if err := g.NewTurn(run, turn, true); err != nil {
		t.Fatal(err)
	}
	if err := g.MarkVerified(run, turn, VerifiedTemplates); err != nil {
		t.Fatal(err)
	}
}

func mustParse(t testing.TB, doc string, opts ...ParseOptions) *Config {
	t.Helper()
	var o ParseOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	c, err := ParseConfig([]byte(doc), o)
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return c
}

func newTestGate(t testing.TB, cfg *Config, opts ...gateOpt) *testGate {
	t.Helper()
	tg := &testGate{audit: &bintest.Buffer{}, logs: &bintest.Buffer{}}
	w, err := audit.NewWriter(tg.audit, audit.WriterOptions{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Config:               cfg,
		Audit:                w,
		HTTPClient:           &http.Client{},
		Logger:               slog.New(slog.NewJSONHandler(tg.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:                  fixedNow,
		TelegramPollInterval: time.Millisecond,
	}
	for _, f := range opts {
		f(&o)
	}
	g, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	tg.Gate = g
	tg.w = w
	return tg
}

func (tg *testGate) decide(t testing.TB, c Call) Decision {
	t.Helper()
	d, err := tg.Decide(context.Background(), c)
	if err != nil {
		t.Fatalf("Decide(%s): %v", c.Tool, err)
	}
	return d
}

// verifyAudit checks the audit log and that it has n records.
func (tg *testGate) verifyAudit(t testing.TB, n uint64) {
	t.Helper()
	root, count, err := auditrec.Verify(bytes.NewReader(tg.audit.Bytes()))
	if err != nil {
		t.Fatalf("audit log: %v", err)
	}
	wr, wc := tg.w.Root()
	if count != n || wc != n || root != wr {
		t.Fatalf("audit log: %d records (writer %d), want %d", count, wc, n)
	}
}

var nopClient = &http.Client{}

func discardAudit(t testing.TB) *audit.Writer {
	w, err := audit.NewWriter(io.Discard, audit.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func call(tool string) Call {
	return Call{Run: "run-1", SessionKey: "agent:main:main", TurnID: "turn-1", Tool: tool, Params: []byte(`{}`), MessageProvider: "telegram"}
}
