package control

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/internal/testjson"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/sealed"
)

// TestMain lets this test binary serve as the rebuild worker: the Service
// starts /proc/self/exe with the rebuild worker argument, as the attester does.
func TestMain(m *testing.M) {
	if code, ok := RunWorker(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func newTestService(t testing.TB, trusted map[string]string) *Service {
	t.Helper()
	raw := []byte(`{"attester":{"controlSocket":"` + filepath.Join(t.TempDir(), "ctl", "c.sock") + `","platform":"simulated",
		"trustedTemplates":` + string(testjson.Marshal(t, trusted)) + `,"allowUnlockedMemory":true,"modelProvider":"p","model":"m"}}`)
	cfg, rest, err := parseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	p, rep, err := detect.Open(context.Background(), detect.Simulated, detect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	id, err := LoadIdentity(context.Background(), "", nil, sealed.Options{AllowUnlocked: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(id.Close)
	s, err := New(Deps{Config: cfg, GateConfig: rest, Identity: id, Platform: p, PlatformReport: rep})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newSealedPack builds the min pack, starts a service trusting it, and
// seals the pack to the service: the sealed pack and its manifest's JSON.
func newSealedPack(t testing.TB) (*packtest.Pack, *Service, []byte, []byte) {
	t.Helper()
	p := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	s := newTestService(t, p.Trusted)
	enc, man, err := promptpack.SealPack(p.Pack, s.id.PackKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	mj, _ := man.MarshalJSON()
	return p, s, enc, mj
}

// TestCloseRunEndsGateState: a created run holds its gate state and its
// prompt until it is closed; then the gate no longer holds it, and its
// capability is refused as closed. A refused creation keeps nothing.
func TestCloseRunEndsGateState(t *testing.T) {
	p, s, enc, mj := newSealedPack(t)
	req := func(report string) *createRunRequest {
		return &createRunRequest{PackB64u: b64u.Encode(enc), Manifest: mj, ReportHashB64u: report, AgentID: "main", SessionKey: "agent:main:main"}
	}
	// A report that does not match: refused, nothing kept.
	_, _, _, err := s.CreateRun(from(testProc), decoded(req(b64u.SHA256([]byte("other")))))
	if ce, ok := errors.AsType[*Error](err); !ok || ce.kind != kindUnprocessable || s.runs.open() != 0 {
		t.Fatalf("mismatched report: %v, %d runs open", err, s.runs.open())
	}
	resp, _, _, err := s.CreateRun(from(testProc), decoded(req(p.Rebuilt.ReportHashB64u())))
	if err != nil || s.runs.open() != 1 {
		t.Fatalf("create: %v", err)
	}
	bearer := "Bearer " + resp.Capability
	rn, _, err := s.Authorize(from(testProc), resp.RunID, bearer)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.gate.OpenRun(resp.RunID); err == nil {
		t.Fatal("the gate opened a run it already holds")
	}
	if err := s.CloseRun(rn); err != nil {
		t.Fatal(err)
	}
	if err := s.gate.OpenRun(resp.RunID); err != nil {
		t.Fatalf("the gate still holds the closed run: %v", err)
	}
	if _, _, err := s.Authorize(from(testProc), resp.RunID, bearer); !errors.Is(err, errRunClosed) {
		t.Fatalf("capability of a closed run: %v", err)
	}
	if err := rn.WithPrompt(func(*sealed.Buffer, string) error { return nil }); !errors.Is(err, errRunClosed) {
		t.Fatalf("prompt of a closed run: %v", err)
	}
}

// decoded is a Decoder that gives the method req as its request.
func decoded[T any](req *T) Decoder {
	return func(v any) error {
		*v.(*T) = *req
		return nil
	}
}
