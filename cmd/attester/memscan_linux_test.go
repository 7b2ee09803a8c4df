//go:build linux

package main

// TestPromptPlaintextNotInAttesterMemory is the proof of
// docs/spec/sealed-memory.md section 2.1 for the prompt: it starts the real
// attester binary, creates a run from a pack whose plaintext carries a
// random canary, fetches the prompt (the canary is in it), and then reads
// the attester's whole readable memory through /proc/<pid>/maps and
// /proc/<pid>/mem, as root (the service is non-dumpable, so only a process
// with CAP_SYS_PTRACE can do this). The canary must not be found after the
// run is created and the prompt served, nor after the run is closed.
// Sealed buffers are not counted: memfd_secret pages cannot be read at all,
// and the fd-backed mlock fallback is marked MADV_DONTDUMP ("dd" in
// /proc/<pid>/smaps), which no Go heap or stack mapping is. Two positive
// controls show that the scan works: it finds the canary in the test
// process itself, and the run id (which the attester keeps on its heap) in
// the attester. The attester is not asked to collect garbage:
// freed heap memory is not zeroed, so a copy that existed at any time is
// found unless its memory was reused.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/clawea/attester/enclave/sim"
	"github.com/clawea/attester/internal/packtest"
	"github.com/clawea/attester/internal/testfile"
	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/sealed"
)

func TestPromptPlaintextNotInAttesterMemory(t *testing.T) {
	needRoot(t, "reading a non-dumpable process's memory needs root (CAP_SYS_PTRACE)")
	params := packtest.Params(t, "min.params.json")
	var rnd [16]byte
	rand.Read(rnd[:])
	canary := "memscan-canary-" + hex.EncodeToString(rnd[:])
	// A second canary in a part of the pack that is not in the prompt (a
	// skills environment override): the pack plaintext, not only the
	// prompt, must stay out.
	rand.Read(rnd[:])
	packCanary := "memscan-pack-canary-" + hex.EncodeToString(rnd[:])
	var pm map[string]any
	if err := json.Unmarshal(params, &pm); err != nil {
		t.Fatal(err)
	}
	pm["contextFiles"] = []any{map[string]any{"path": "CANARY.md", "content": "The canary is " + canary + ".\n"}}
	params, _ = json.Marshal(pm)
	env, _ := json.Marshal(map[string]string{"MEMSCAN_CANARY": packCanary})
	p := packtest.Build(t, params, promptpack.BuildOptions{SkillsEnvOverrides: env})
	pf := &packFixture{pack: p.Pack, rb: p.Rebuilt, trusted: p.Trusted}

	a := mustStartAttester(t, writeConfig(t, t.TempDir(), pf, nil))
	rn := a.createRun(t, pf, "agent:main:main")
	for i := range 3 { // served more than once: every serving must be copy-free
		r := a.req(t, false, "GET", "/v1/runs/"+rn.id+"/prompt", rn.capability, nil)
		if r.code != http.StatusOK || !bytes.Contains(r.raw, []byte(canary)) {
			t.Fatalf("prompt #%d: status %d, canary present %t", i, r.code, bytes.Contains(r.raw, []byte(canary)))
		}
	}
	a.control.CloseIdleConnections()

	// The scanner finds the canary where it is known to be: in this test
	// process, which built the pack and read the prompt.
	if self := scanProcess(t, os.Getpid(), canary, canary); self.hits == 0 {
		t.Fatalf("the scan does not find the canary in the test process itself (%s)", self)
	}
	pid := a.cmd.Process.Pid
	packScan := scanProcess(t, pid, packCanary, rn.id)
	t.Logf("pack canary after create and serve: %d", packScan.hits)
	if packScan.hits != 0 {
		t.Errorf("pack plaintext outside sealed memory: %d copies of the pack canary", packScan.hits)
	}
	afterServe := scanProcess(t, pid, canary, rn.id)
	t.Logf("after create and serve: canary %d, control %d (%s)", afterServe.hits, afterServe.control, afterServe)
	if afterServe.control == 0 {
		t.Fatalf("the scan did not find the run id in the attester's memory: it does not read the heap (%s)", afterServe)
	}

	if r := a.req(t, false, "DELETE", "/v1/runs/"+rn.id, rn.capability, nil); r.code != http.StatusNoContent {
		t.Fatalf("close run: %d %v", r.code, r.body)
	}
	afterClose := scanProcess(t, pid, canary, rn.id)
	t.Logf("after close: canary %d (%s)", afterClose.hits, afterClose)
	if n := scanProcess(t, pid, packCanary, rn.id).hits; n != 0 {
		t.Errorf("pack plaintext outside sealed memory after close: %d copies of the pack canary", n)
	}
	if afterServe.hits != 0 || afterClose.hits != 0 {
		t.Fatalf("prompt plaintext outside sealed memory: %d copies of the canary after the run was created and served, %d after it was closed", afterServe.hits, afterClose.hits)
	}
}

// TestIdentitySeedNotInAttesterMemory is the proof of
// docs/spec/sealed-memory.md section 2.1.1 for the Ed25519 identity key:
// it starts the real attester with a state directory, so that the identity
// is sealed (with the simulated platform's sealing key) and signs the audit
// log's checkpoint, has it sign several answers (a run's creation, its
// prompt served three times, its close), a run attestation and two key
// attestations, and then scans the attester's readable memory for the
// 32-byte identity seed, which the test reads by unsealing the identity
// file with the same simulated sealing key. No copy of the seed may be
// found outside sealed memory: crypto/ed25519 would leave one in its
// never-zeroed cache of expanded keys after every signature. The positive
// controls are the scan of the test process (which holds the seed on its
// heap) and the run id in the attester.
func TestIdentitySeedNotInAttesterMemory(t *testing.T) {
	needRoot(t, "reading a non-dumpable process's memory needs root (CAP_SYS_PTRACE)")
	pf, cfg, state := stateConfig(t)
	a := mustStartAttester(t, cfg)
	rn := a.createRun(t, pf, "agent:main:main")
	for i := range 3 {
		if r := a.req(t, false, "GET", "/v1/runs/"+rn.id+"/prompt", rn.capability, nil); r.code != http.StatusOK {
			t.Fatalf("prompt #%d: status %d", i, r.code)
		}
	}
	_, agentKey, _ := ed25519.GenerateKey(rand.Reader)
	if r := a.attestRun(t, rn, agentKey, bundleWith(t, pf, rn, agentKey, nil)); r.code != http.StatusOK {
		t.Fatalf("run attestation: %d %v", r.code, r.body)
	}
	for i := range 2 {
		if r := a.req(t, true, "GET", "/v1/identity?challenge="+b64u.Encode([]byte{'m', byte(i)}), "", nil); r.code != http.StatusOK {
			t.Fatalf("key attestation #%d: %d %v", i, r.code, r.body)
		}
	}
	if r := a.req(t, false, "DELETE", "/v1/runs/"+rn.id, rn.capability, nil); r.code != http.StatusNoContent {
		t.Fatalf("close run: %d %v", r.code, r.body)
	}
	a.control.CloseIdleConnections()
	a.tcp.CloseIdleConnections()

	seed := identitySeed(t, filepath.Join(state, "identity.sealed"))
	if self := scanProcess(t, os.Getpid(), string(seed), string(seed)); self.hits == 0 {
		t.Fatalf("the scan does not find the seed in the test process itself (%s)", self)
	}
	res := scanProcess(t, a.cmd.Process.Pid, string(seed), rn.id)
	t.Logf("identity seed: %d copies, control %d (%s)", res.hits, res.control, res)
	if res.control == 0 {
		t.Fatalf("the scan did not find the run id in the attester's memory: it does not read the heap (%s)", res)
	}
	if res.hits != 0 {
		t.Fatalf("identity key outside sealed memory: %d copies of the Ed25519 seed after the attester signed answers and attestations", res.hits)
	}
}

// identitySeed unseals the attester's identity file as the simulated
// platform the attester runs on does (the default simulator's sealing key,
// the kind control.platformSealer gives it) and returns a heap copy of the
// Ed25519 seed, its first 32 bytes.
func identitySeed(t *testing.T, path string) []byte {
	t.Helper()
	blob := testfile.Read(t, path)
	s, err := sim.New(sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := sealed.NewKeySealer("simulated-platform-key/"+s.Platform(), s, sealed.Options{AllowUnlocked: true})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := sealer.Unseal(context.Background(), "clawea.dev/attester/v1/identity", blob)
	if err != nil {
		t.Fatalf("unsealing the identity with the simulated platform's key: %v", err)
	}
	defer secret.Destroy()
	if secret.Len() <= ed25519.SeedSize {
		t.Fatalf("sealed identity is %d bytes", secret.Len())
	}
	return bytes.Clone(secret.Bytes()[:ed25519.SeedSize])
}

type scanResult struct {
	hits, control       int // occurrences of the canary and of the control string
	regions, readBytes  int
	skippedDontDump     int // sealed (MADV_DONTDUMP) regions not counted
	unreadable          int // regions the kernel refused to read (memfd_secret)
	unreadableDontDump  int
	hitsInDontDumpAreas int
}

func (r scanResult) String() string {
	return fmt.Sprintf("%d regions, %d bytes read, %d sealed regions skipped (%d canary hits there), %d unreadable regions (%d of them sealed)",
		r.regions, r.readBytes, r.skippedDontDump, r.hitsInDontDumpAreas, r.unreadable, r.unreadableDontDump)
}

// scanProcess counts needle and control in every readable mapping of pid.
// Mappings marked MADV_DONTDUMP are sealed buffers: their hits are reported
// apart and not counted.
func scanProcess(t *testing.T, pid int, needle, control string) scanResult {
	t.Helper()
	smaps := testfile.Read(t, fmt.Sprintf("/proc/%d/smaps", pid))
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	type region struct {
		start, end uint64
		perms      string
		name       string
		dontDump   bool
	}
	var regions []region
	for line := range strings.Lines(string(smaps)) {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], "-") && len(f[1]) == 4 {
			lo, hi, _ := strings.Cut(f[0], "-")
			s, err1 := strconv.ParseUint(lo, 16, 64)
			e, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("smaps line %q", line)
			}
			name := ""
			if len(f) >= 6 {
				name = strings.Join(f[5:], " ")
			}
			regions = append(regions, region{start: s, end: e, perms: f[1], name: name})
			continue
		}
		if strings.HasPrefix(line, "VmFlags:") && len(regions) > 0 {
			for _, fl := range strings.Fields(line)[1:] {
				if fl == "dd" {
					regions[len(regions)-1].dontDump = true
				}
			}
		}
	}
	var res scanResult
	n1, n2 := []byte(needle), []byte(control)
	overlap := max(len(n1), len(n2)) - 1
	buf := make([]byte, 1<<20+overlap)
	for _, rg := range regions {
		if rg.perms[0] != 'r' || rg.name == "[vvar]" || rg.name == "[vsyscall]" || rg.name == "[vvar_vclock]" {
			continue
		}
		res.regions++
		hits, ctl, ok := 0, 0, true
		carry := 0
		for off := rg.start; off < rg.end; {
			n := min(uint64(len(buf)-carry), rg.end-off)
			got, err := mem.ReadAt(buf[carry:carry+int(n)], int64(off))
			if err != nil && !errors.Is(err, io.EOF) {
				ok = false
				break
			}
			res.readBytes += got
			win := buf[:carry+got]
			hits += bytes.Count(win, n1)
			ctl += bytes.Count(win, n2)
			// Keep the tail so that a match across chunks is found once:
			// the tail is shorter than either string.
			carry = min(overlap, len(win))
			copy(buf, win[len(win)-carry:])
			off += uint64(got)
			if got == 0 {
				break
			}
		}
		switch {
		case !ok && rg.dontDump:
			res.unreadable++
			res.unreadableDontDump++
		case !ok:
			res.unreadable++
			res.hits += hits
			res.control += ctl
		case rg.dontDump:
			res.skippedDontDump++
			res.hitsInDontDumpAreas += hits
		default:
			res.hits += hits
			res.control += ctl
		}
	}
	return res
}
