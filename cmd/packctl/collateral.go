package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/clawea/attester/verify/collateral"
	"github.com/clawea/attester/wire/evidence"
	"github.com/clawea/attester/wire/evidencedoc"
)

const (
	collateralFetchSynopsis = "collateral fetch --evidence FILE [--evidence FILE...] --collateral DIR [--offline] [--kds-url URL] [--pcs-url URL] [--intel-certs-url URL] [--attempts N] [--backoff DURATION] [--min-validity DURATION] [--at TIME] [--json]"
	collateralCheckSynopsis = "collateral check --evidence FILE [--evidence FILE...] --collateral DIR [--min-validity DURATION] [--at TIME] [--json]"
)

func runCollateral(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "fetch":
			return runCollateralFetch(args[1:], false, stdout, stderr)
		case "check":
			return runCollateralFetch(args[1:], true, stdout, stderr)
		case "-h", "--help", "help":
			fmt.Fprintf(stdout, "usage: packctl %s\n       packctl %s\n", collateralFetchSynopsis, collateralCheckSynopsis)
			return exitOK
		}
	}
	fmt.Fprintf(stderr, "usage: packctl %s\n       packctl %s\n", collateralFetchSynopsis, collateralCheckSynopsis)
	return exitUsage
}

type collateralJSON struct {
	Complete  bool                   `json:"complete"`
	ExitCode  int                    `json:"exit_code"`
	Documents []collateralStatusJSON `json:"documents"`
	Error     string                 `json:"error,omitempty"`
}

type collateralStatusJSON struct {
	Kind       string `json:"kind"`
	Path       string `json:"path"`
	State      string `json:"state"`
	ValidUntil string `json:"valid_until,omitempty"`
	Fetched    bool   `json:"fetched"`
	Detail     string `json:"detail,omitempty"`
}

// runCollateralFetch implements collateral fetch and, with offline (or
// --offline), collateral check: exit 0 when every document the evidence
// needs is fresh, 3 when one is missing, stale or could not be fetched, 2
// for evidence that does not parse, 1 for usage errors.
func runCollateralFetch(args []string, offline bool, stdout, stderr io.Writer) int {
	name, synopsis := "collateral fetch", collateralFetchSynopsis
	if offline {
		name, synopsis = "collateral check", collateralCheckSynopsis
	}
	fs := newFlagSet(name, synopsis, stderr)
	var evPaths []string
	fs.Func("evidence", "evidence document (compact JWS), as given to packctl verify; repeatable", func(s string) error {
		evPaths = append(evPaths, s)
		return nil
	})
	dir := fs.String("collateral", "", "collateral directory (docs/spec/collateral-v1.md); created if missing")
	minValidity := fs.Duration("min-validity", collateral.DefaultMinValidity, "refetch a document that expires within this duration")
	at := fs.String("at", "", "time to judge validity at, RFC 3339 (default: now)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	var (
		offlineFlag                  *bool
		kdsURL, pcsURL, intelCertURL *string
		attempts                     *int
		backoff                      *time.Duration
	)
	if !offline {
		offlineFlag = fs.Bool("offline", false, "no network: report what is missing or stale (same as collateral check)")
		kdsURL = fs.String("kds-url", collateral.DefaultKDSURL, "AMD KDS base URL (mirror, test service)")
		pcsURL = fs.String("pcs-url", collateral.DefaultPCSURL, "Intel PCS base URL")
		intelCertURL = fs.String("intel-certs-url", collateral.DefaultIntelCertsURL, "Intel certificate service base URL (SGX Root CA CRL)")
		attempts = fs.Int("attempts", collateral.DefaultAttempts, "requests per document before giving up (network errors, 5xx, 429)")
		backoff = fs.Duration("backoff", collateral.DefaultBackoff, "delay before the first retry, doubled per retry up to 30s")
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if offlineFlag != nil && *offlineFlag {
		offline = true
	}
	switch {
	case len(evPaths) == 0:
		errorf(stderr, "%s: --evidence is required", name)
		return exitUsage
	case *dir == "":
		errorf(stderr, "%s: --collateral is required", name)
		return exitUsage
	case fs.NArg() != 0:
		errorf(stderr, "%s: unexpected argument %q", name, fs.Arg(0))
		return exitUsage
	case !offline && (*attempts < 1 || *attempts > 10 || *backoff <= 0 || *backoff > time.Minute):
		errorf(stderr, "%s: --attempts is 1 to 10 and --backoff above 0 and at most 1m", name)
		return exitUsage
	}
	now := time.Now
	if *at != "" {
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			errorf(stderr, "%s: --at: not an RFC 3339 time", name)
			return exitUsage
		}
		now = func() time.Time { return t }
	}
	var evs []*evidence.Evidence
	for _, p := range evPaths {
		items, code := readEvidenceItems(p, name, stderr)
		if code != exitOK {
			return code
		}
		evs = append(evs, items...)
	}
	items, err := collateral.Needs(evs)
	if err != nil {
		errorf(stderr, "%s: %v", name, err)
		return exitRejected
	}
	mv := *minValidity
	if mv == 0 {
		mv = -1 // the flag's 0 means "any remaining validity"
	}
	f := &collateral.Fetcher{Now: now, MinValidity: mv}
	var sts []collateral.Status
	var ferr error
	if offline {
		sts, ferr = f.Check(*dir, items)
		if ferr == nil {
			ferr = collateral.Incomplete(sts)
		}
	} else {
		f.KDSURL, f.PCSURL, f.IntelCertsURL = strings.TrimSuffix(*kdsURL, "/"), strings.TrimSuffix(*pcsURL, "/"), strings.TrimSuffix(*intelCertURL, "/")
		f.Attempts, f.Backoff = *attempts, *backoff
		f.Progress = func(line string) { errorf(stderr, "%s: %s", name, line) }
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		sts, ferr = f.Fetch(ctx, *dir, items)
	}
	code := exitOK
	if ferr != nil {
		code = exitCannot
		errorf(stderr, "%s: %v", name, ferr)
	}
	if *asJSON {
		out := collateralJSON{Complete: ferr == nil, ExitCode: code, Documents: []collateralStatusJSON{}}
		if ferr != nil {
			out.Error = ferr.Error()
		}
		for _, s := range sts {
			j := collateralStatusJSON{Kind: s.Item.Kind, Path: s.Item.Path, State: string(s.State), Fetched: s.Fetched, Detail: s.Detail}
			if !s.ValidUntil.IsZero() {
				j.ValidUntil = s.ValidUntil.UTC().Format(time.RFC3339)
			}
			out.Documents = append(out.Documents, j)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
		return code
	}
	for _, s := range sts {
		until := ""
		if !s.ValidUntil.IsZero() {
			until = " valid until " + s.ValidUntil.UTC().Format(time.RFC3339)
		}
		detail := ""
		if s.State != collateral.StateFresh && s.Detail != "" {
			detail = " (" + s.Detail + ")"
		}
		fmt.Fprintf(stdout, "  %-8s %s%s%s\n", s.State, s.Item.Path, until, detail)
	}
	if ferr == nil {
		fmt.Fprintf(stdout, "COMPLETE: %d documents\n", len(sts))
	} else {
		fmt.Fprintln(stdout, "INCOMPLETE")
	}
	return code
}

// readEvidenceItems reads an evidence document and returns its hardware
// evidence. The document's signature is checked against the key it names
// (integrity only: nothing here is trusted, the evidence only selects which
// documents to fetch).
func readEvidenceItems(path, name string, stderr io.Writer) ([]*evidence.Evidence, int) {
	b, err := readInput(path)
	if err != nil {
		errorf(stderr, "%s: %v", name, err)
		return nil, exitCannot
	}
	jws := []byte(strings.TrimRight(string(b), "\r\n"))
	key, err := evidencedoc.SignerKey(jws)
	if err == nil {
		var doc *evidencedoc.Document
		if doc, err = evidencedoc.Parse(jws, key); err == nil {
			var evs []*evidence.Evidence
			for _, it := range doc.Items {
				evs = append(evs, it.Evidence)
			}
			return evs, exitOK
		}
	}
	if errors.Is(err, evidencedoc.ErrTooLarge) {
		errorf(stderr, "%s: %s: %v", name, path, err)
		return nil, exitRejected
	}
	errorf(stderr, "%s: %s: not an evidence document: %v", name, path, err)
	return nil, exitRejected
}
