package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"
)

func main() {
	shared := flag.String("shared", "", "build the pack from the OpenClaw SIG conformance harness in this shared `folder` (e.g. ../shared) instead of the example harness")
	outDir := flag.String("out", "demo-out", "output directory")
	vector := flag.String("vector", "full", "openclaw-sig vector whose params the pack uses (with -shared)")
	attester := flag.String("attester", "bin/attester", "the attester `binary` to start (make demo builds it)")
	logPath := flag.String("log", "", "write the attesters' JSON logs (their stderr) here (default: discard)")
	flag.Parse()
	work, err := os.MkdirTemp("", "clawea-demo-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	defer os.RemoveAll(work)
	var logw io.Writer = io.Discard
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			os.Exit(1)
		}
		defer f.Close()
		logw = f
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := runDemo(ctx, options{
		Shared: *shared, Vector: *vector, Attester: *attester, OutDir: *outDir, WorkDir: work, Log: log.New(logw, "", 0),
		Say: func(s string) { fmt.Fprintln(os.Stderr, "== "+s) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	abs, _ := filepath.Abs(*outDir)
	fmt.Printf("run_id:                  %s\n", out.RunID)
	fmt.Printf("attester_did:            %s (SIMULATED platform: %v)\n", out.AttesterDID, out.Simulated)
	fmt.Printf("agent_did:               %s\n", out.AgentDID)
	fmt.Printf("system_prompt_hash_b64u: %s\n", out.PromptHash)
	fmt.Printf("report_hash_b64u:        %s\n", out.ReportHash)
	fmt.Printf("audit log:               %s records, root %s\n", out.AuditCount, out.AuditRoot)
	if sv := out.Sensitive; sv != nil {
		fmt.Printf("sensitive run_id:        %s (attester %s)\n", sv.RunID, sv.AttesterDID)
		fmt.Printf("admission policy:        %s (sensitive; %s)\n", sv.AdmissionPolicyHash, admissionFile)
		fmt.Printf("disclosed to an auditor: %s (%s)\n", sv.Disclosed, disclosureFile)
	}
	fmt.Printf("artifacts:               %s\n", abs)
}
