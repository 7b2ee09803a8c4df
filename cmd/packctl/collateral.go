package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
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
	return dispatch("collateral", collateralFetchSynopsis+"\n       packctl "+collateralCheckSynopsis, subcommands{
		"fetch": func(args []string, stdout, stderr io.Writer) int {
			return runCollateralFetch(args, false, stdout, stderr)
		},
		"check": func(args []string, stdout, stderr io.Writer) int {
			return runCollateralFetch(args, true, stdout, stderr)
		},
	}, args, stdout, stderr)
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

// collateralCmd is the state of collateral fetch and check: the flags,
// then what each step learns for the next.
type collateralCmd struct {
	name           string
	offline        bool
	stdout, stderr io.Writer

	evPaths                      []string
	dir, at                      string
	minValidity, backoff         time.Duration
	asJSON, offlineFlag          bool
	kdsURL, pcsURL, intelCertURL string
	attempts                     int

	now   func() time.Time
	items []collateral.Item
	sts   []collateral.Status
	ferr  error
	stop  func() // releases the interrupt handler of a fetch
}

// runCollateralFetch implements collateral fetch and, with offline (or
// --offline), collateral check: exit 0 when every document the evidence
// needs is fresh, 3 when one is missing, stale or could not be fetched, 2
// for evidence that does not parse, 1 for usage errors.
func runCollateralFetch(args []string, offline bool, stdout, stderr io.Writer) int {
	c := &collateralCmd{name: "collateral fetch", offline: offline, stdout: stdout, stderr: stderr}
	fs := c.flagSet()
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if c.offlineFlag {
		c.offline = true
	}
	defer c.cleanup()
	return runSteps(
		func() int { return c.checkFlags(fs) },
		c.parseAt,
		c.readNeeds,
		c.fetch,
		c.print,
	)
}

func (c *collateralCmd) flagSet() *flag.FlagSet {
	synopsis := collateralFetchSynopsis
	if c.offline {
		c.name, synopsis = "collateral check", collateralCheckSynopsis
	}
	fs := newFlagSet(c.name, synopsis, c.stderr)
	defaults := collateral.Defaults()
	fs.Func("evidence", "evidence document (compact JWS), as given to packctl verify; repeatable", func(s string) error {
		c.evPaths = append(c.evPaths, s)
		return nil
	})
	fs.StringVar(&c.dir, "collateral", "", "collateral directory (docs/spec/collateral-v1.md); created if missing")
	fs.DurationVar(&c.minValidity, "min-validity", defaults.MinValidity, "refetch a document that expires within this duration")
	fs.StringVar(&c.at, "at", "", "time to judge validity at, RFC 3339 (default: now)")
	fs.BoolVar(&c.asJSON, "json", false, "print the result as JSON")
	if !c.offline {
		fs.BoolVar(&c.offlineFlag, "offline", false, "no network: report what is missing or stale (same as collateral check)")
		fs.StringVar(&c.kdsURL, "kds-url", defaults.KDSURL, "AMD KDS base URL (mirror, test service)")
		fs.StringVar(&c.pcsURL, "pcs-url", defaults.PCSURL, "Intel PCS base URL")
		fs.StringVar(&c.intelCertURL, "intel-certs-url", defaults.IntelCertsURL, "Intel certificate service base URL (SGX Root CA CRL)")
		fs.IntVar(&c.attempts, "attempts", defaults.Attempts, "requests per document before giving up (network errors, 5xx, 429)")
		fs.DurationVar(&c.backoff, "backoff", defaults.Backoff, "delay before the first retry, doubled per retry up to 30s")
	}
	return fs
}

func (c *collateralCmd) cleanup() {
	if c.stop != nil {
		c.stop()
	}
}

func (c *collateralCmd) checkFlags(fs *flag.FlagSet) int {
	switch {
	case len(c.evPaths) == 0:
		errorf(c.stderr, "%s: --evidence is required", c.name)
		return exitUsage
	case c.dir == "":
		errorf(c.stderr, "%s: --collateral is required", c.name)
		return exitUsage
	case fs.NArg() != 0:
		errorf(c.stderr, "%s: unexpected argument %q", c.name, fs.Arg(0))
		return exitUsage
	case !c.offline && (c.attempts < 1 || c.attempts > 10 || c.backoff <= 0 || c.backoff > time.Minute):
		errorf(c.stderr, "%s: --attempts is 1 to 10 and --backoff above 0 and at most 1m", c.name)
		return exitUsage
	}
	return exitOK
}

// parseAt sets the clock from --at.
func (c *collateralCmd) parseAt() (code int) {
	c.now, code = parseAt(c.at, c.stderr, c.name)
	return code
}

// readNeeds reads the evidence and lists the documents it needs.
func (c *collateralCmd) readNeeds() int {
	var evs []*evidence.Evidence
	for _, p := range c.evPaths {
		items, code := readEvidenceItems(p, c.name, c.stderr)
		if code != exitOK {
			return code
		}
		evs = append(evs, items...)
	}
	if code := c.refuseSimulatedAtVendors(evs); code != exitOK {
		return code
	}
	items, err := collateral.Needs(evs)
	if err != nil {
		errorf(c.stderr, "%s: %v", c.name, err)
		return exitRejected
	}
	c.items = items
	return exitOK
}

// refuseSimulatedAtVendors refuses to ask AMD's or Intel's services for
// collateral of simulated evidence: they publish none for the simulation
// roots, so the requests could only fail after minutes of retries. A
// mirror or test service given with --kds-url or --pcs-url may serve it.
func (c *collateralCmd) refuseSimulatedAtVendors(evs []*evidence.Evidence) int {
	if c.offline {
		return exitOK
	}
	defaults := collateral.Defaults()
	for i, ev := range evs {
		vendor := (ev.Platform == evidence.PlatformSEVSNP || ev.Platform == evidence.PlatformAzureSNP) && c.kdsURL == defaults.KDSURL ||
			(ev.Platform == evidence.PlatformTDX || ev.Platform == evidence.PlatformAzureTDX) && (c.pcsURL == defaults.PCSURL || c.intelCertURL == defaults.IntelCertsURL)
		if ev.Simulated && vendor {
			errorf(c.stderr, "%s: evidence item %d (%s) is simulated: AMD and Intel publish no collateral for the simulation roots, so nothing was fetched (give --kds-url or --pcs-url for a service that serves it)", c.name, i, ev.Platform)
			return exitUsage
		}
	}
	return exitOK
}

// fetch fetches the documents, or checks them offline; an incomplete
// result is reported by print.
func (c *collateralCmd) fetch() int {
	mv := c.minValidity
	if mv == 0 {
		mv = -1 // the flag's 0 means "any remaining validity"
	}
	f := &collateral.Fetcher{Now: c.now, MinValidity: mv, Offline: c.offline}
	ctx := context.Background()
	if !c.offline {
		f.KDSURL, f.PCSURL, f.IntelCertsURL = strings.TrimSuffix(c.kdsURL, "/"), strings.TrimSuffix(c.pcsURL, "/"), strings.TrimSuffix(c.intelCertURL, "/")
		f.Attempts, f.Backoff = c.attempts, c.backoff
		f.Progress = func(line string) { errorf(c.stderr, "%s: %s", c.name, line) }
		ctx, c.stop = signal.NotifyContext(ctx, os.Interrupt)
	}
	c.sts, c.ferr = f.Collect(ctx, c.dir, c.items)
	return exitOK
}

// print prints the state of each document and returns exitCannot when one
// is not fresh.
func (c *collateralCmd) print() int {
	code := exitOK
	if c.ferr != nil {
		code = exitCannot
		errorf(c.stderr, "%s: %v", c.name, c.ferr)
	}
	if c.asJSON {
		out := collateralJSON{Complete: c.ferr == nil, ExitCode: code, Documents: []collateralStatusJSON{}}
		if c.ferr != nil {
			out.Error = c.ferr.Error()
		}
		for _, s := range c.sts {
			j := collateralStatusJSON{Kind: s.Item.Kind, Path: s.Item.Path, State: string(s.State), Fetched: s.Fetched, Detail: s.Detail}
			if !s.ValidUntil.IsZero() {
				j.ValidUntil = s.ValidUntil.UTC().Format(time.RFC3339)
			}
			out.Documents = append(out.Documents, j)
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(out)
		return code
	}
	for _, s := range c.sts {
		until := ""
		if !s.ValidUntil.IsZero() {
			until = " valid until " + s.ValidUntil.UTC().Format(time.RFC3339)
		}
		detail := ""
		if s.Detail != "" { // set only for a state other than fresh
			detail = " (" + s.Detail + ")"
		}
		fmt.Fprintf(c.stdout, "  %-8s %s%s%s\n", s.State, s.Item.Path, until, detail)
	}
	if c.ferr == nil {
		fmt.Fprintf(c.stdout, "COMPLETE: %d documents\n", len(c.sts))
	} else {
		fmt.Fprintln(c.stdout, "INCOMPLETE")
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
