package control

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/sealed"
)

var testMemOpts = sealed.Options{AllowUnlocked: true}

type rebuildFixture struct {
	pack    *promptpack.Pack
	rb      *promptpack.Rebuilt
	trusted map[string]string
	key     *envelope.PrivateKey
	enc     []byte
	mj      []byte
	man     *envelope.Manifest
}

func newRebuildFixture(t testing.TB) *rebuildFixture {
	t.Helper()
	p := packtest.Build(t, packtest.Params(t, "min.params.json"), promptpack.BuildOptions{})
	pack, rb, trusted := p.Pack, p.Rebuilt, p.Trusted
	key, err := envelope.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	enc, man, err := promptpack.SealPack(pack, key.Public())
	if err != nil {
		t.Fatal(err)
	}
	mj, err := man.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return &rebuildFixture{pack: pack, rb: rb, trusted: trusted, key: key, enc: enc, mj: mj, man: man}
}

func (f *rebuildFixture) request() rebuildRequest {
	return rebuildRequest{Pack: f.enc, Manifest: f.mj, ReportHash: f.rb.ReportHash, Trusted: f.trusted}
}

func newTestRebuilder(t testing.TB, cfg rebuildConfig) *rebuilder {
	t.Helper()
	cfg.Memory = testMemOpts
	r, err := newRebuilder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.close)
	return r
}

// TestRebuildInWorker: the worker returns the exact prompt in a sealed
// buffer, with the commitments an in-process rebuild computes.
func TestRebuildInWorker(t *testing.T) {
	f := newRebuildFixture(t)
	r := newTestRebuilder(t, rebuildConfig{Key: f.key})
	res, err := r.run(context.Background(), f.request())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Prompt.Destroy()
	if !bytes.Equal(res.Prompt.Bytes(), f.rb.Prompt) {
		t.Fatal("the worker's prompt differs from the in-process rebuild")
	}
	if res.Prompt.Backing() == "" {
		t.Fatal("prompt buffer has no sealed backing")
	}
	if res.PromptHashB64u != f.rb.PromptHashB64u() || res.ReportHashB64u != f.rb.ReportHashB64u() ||
		res.PackID != f.rb.PackID || res.Chars != f.rb.Report.Final.SystemPromptChars {
		t.Fatalf("commitments differ: %+v", res)
	}
	// The key survives a worker: a second rebuild works (the worker maps
	// the key read-only and must not zero it).
	res2, err := r.run(context.Background(), f.request())
	if err != nil {
		t.Fatal(err)
	}
	res2.Prompt.Destroy()
}

// TestWorkerRefusals: every refusal comes back as the sentinel an
// in-process open would give, and nothing is returned.
func TestWorkerRefusals(t *testing.T) {
	f := newRebuildFixture(t)
	r := newTestRebuilder(t, rebuildConfig{Key: f.key})
	other, _ := envelope.GenerateKey()
	rOther := newTestRebuilder(t, rebuildConfig{Key: other})
	untrusted := map[string]string{}
	for k, v := range f.trusted {
		untrusted[k] = v
	}
	untrusted["identity.txt"] = "sha256:" + strings.Repeat("00", 32)
	tampered := bytes.Clone(f.enc)
	tampered[len(tampered)-5] ^= 1
	wrongReport := f.rb.ReportHash
	wrongReport[0] ^= 1

	tests := []struct {
		name string
		r    *rebuilder
		req  func(rebuildRequest) rebuildRequest
		want error
	}{
		{"not a recipient", rOther, func(q rebuildRequest) rebuildRequest { return q }, envelope.ErrNoMatchingRecipient},
		{"wrong report hash", r, func(q rebuildRequest) rebuildRequest { q.ReportHash = wrongReport; return q }, envelope.ErrContextMismatch},
		{"tampered", r, func(q rebuildRequest) rebuildRequest { q.Pack = tampered; return q }, nil},
		{"untrusted template", r, func(q rebuildRequest) rebuildRequest { q.Trusted = untrusted; return q }, openclawsig.ErrTemplateUntrusted},
		{"malformed manifest", r, func(q rebuildRequest) rebuildRequest { q.Manifest = []byte(`{}`); return q }, nil},
	}
	for _, tt := range tests {
		res, err := tt.r.run(context.Background(), tt.req(f.request()))
		if err == nil || res != nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		if errors.Is(err, errRebuildWorker) || errors.Is(err, errRebuildBusy) {
			t.Errorf("%s: %v, want a refusal of the pack", tt.name, err)
		}
		if tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	_, err := r.run(context.Background(), rebuildRequest{Pack: f.enc, Manifest: f.mj, ReportHash: f.rb.ReportHash, Trusted: untrusted})
	var te *openclawsig.TemplateError
	if !errors.As(err, &te) || te.Name != "identity.txt" {
		t.Errorf("untrusted template: %v, want a TemplateError naming identity.txt", err)
	}
}

// TestWorkerRefusesToRunAlone: the hidden mode does nothing unless started
// by a rebuilder (environment and descriptors).
func TestWorkerRefusesToRunAlone(t *testing.T) {
	var stderr bytes.Buffer
	if code := workerMain(strings.NewReader(""), &stderr); code != 2 || !strings.Contains(stderr.String(), "internal") {
		t.Fatalf("without environment: exit %d, %q", code, stderr.String())
	}
	t.Setenv(workerEnv, workerEnvValue)
	stderr.Reset()
	// This test process's fd 4 (if open at all) is not a SOCK_SEQPACKET
	// socket.
	if code := workerMain(strings.NewReader(""), &stderr); code != 2 {
		t.Fatalf("without descriptors: exit %d, %q", code, stderr.String())
	}
}

// TestWorkerLimits: a worker that does not answer in time is killed and
// reported as a worker failure; a request that finds every slot taken is
// errRebuildBusy; a binary that is not a worker is a worker failure.
func TestWorkerLimits(t *testing.T) {
	f := newRebuildFixture(t)
	dir := t.TempDir()
	slow := filepath.Join(dir, "slow")
	if err := os.WriteFile(slow, []byte("#!/bin/sh\nexec sleep 30\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := newTestRebuilder(t, rebuildConfig{Key: f.key, Exe: slow, Timeout: 300 * time.Millisecond, MaxWorkers: 1})
	start := time.Now()
	_, err := r.run(context.Background(), f.request())
	if !errors.Is(err, errRebuildWorker) || time.Since(start) > 10*time.Second {
		t.Fatalf("slow worker: %v after %v", err, time.Since(start))
	}

	var wg sync.WaitGroup
	wg.Add(1)
	held := make(chan struct{})
	go func() {
		defer wg.Done()
		r.sem <- struct{}{} // take the only slot
		close(held)
		time.Sleep(500 * time.Millisecond)
		<-r.sem
	}()
	<-held
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := r.run(ctx, f.request()); !errors.Is(err, errRebuildBusy) {
		t.Fatalf("no free slot: %v", err)
	}
	wg.Wait()

	rFalse := newTestRebuilder(t, rebuildConfig{Key: f.key, Exe: "/bin/true"})
	if _, err := rFalse.run(context.Background(), f.request()); !errors.Is(err, errRebuildWorker) {
		t.Fatalf("not a worker: %v", err)
	}
}

// TestKeyNotInheritedAtExec: the worker starts with no descriptor of sealed
// memory (the key arrives over the socket once the worker is hardened), and
// descriptor 3 is the socket.
func TestKeyNotInheritedAtExec(t *testing.T) {
	f := newRebuildFixture(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "fds")
	script := filepath.Join(dir, "worker")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nls -l /proc/$$/fd/ > "+out+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := newTestRebuilder(t, rebuildConfig{Key: f.key, Exe: script})
	if _, err := r.run(context.Background(), f.request()); !errors.Is(err, errRebuildWorker) {
		t.Fatalf("a script is not a worker: %v", err)
	}
	listing := testfile.Read(t, out)
	for _, bad := range []string{"secretmem", "memfd:"} {
		if strings.Contains(string(listing), bad) {
			t.Errorf("the worker inherited %q:\n%s", bad, listing)
		}
	}
	if !strings.Contains(string(listing), " 3 -> socket:") {
		t.Errorf("descriptor 3 is not the socket:\n%s", listing)
	}
}

// BenchmarkRebuildInWorker measures one pack opened in a worker process
// (process start included), against BenchmarkRebuildInProcess.
func BenchmarkRebuildInWorker(b *testing.B) {
	f := newRebuildFixture(b)
	r := newTestRebuilder(b, rebuildConfig{Key: f.key})
	for b.Loop() {
		res, err := r.run(context.Background(), f.request())
		if err != nil {
			b.Fatal(err)
		}
		res.Prompt.Destroy()
	}
}

// BenchmarkRebuildInProcess is the same work without a worker.
func BenchmarkRebuildInProcess(b *testing.B) {
	f := newRebuildFixture(b)
	m, err := envelope.ParseManifest(f.mj)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		o, err := promptpack.OpenPack(f.enc, m, f.key, f.rb.ReportHash, promptpack.OpenOptions{AllowUnlocked: true})
		if err != nil {
			b.Fatal(err)
		}
		rb, err := o.Rebuild(f.trusted)
		if err != nil {
			b.Fatal(err)
		}
		rb.Wipe()
		o.Destroy()
	}
}
