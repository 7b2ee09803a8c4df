// Command verifier is the stateless clawea verifier service: POST
// /v1/verify takes what packctl verify takes and returns the same result
// plus a signed EAR, using the same verify package (docs/spec/verifier-api.md).
// Policies and collateral come from files, re-read when they change.
//
// Usage:
//
//	verifier --ear-key FILE (--policy FILE | --policy-dir DIR) [--collateral DIR] [--listen ADDR] ...
//	verifier --version
//
// Exit codes: 0 clean shutdown, 1 usage or configuration error, 3 the
// server failed.
package main

import (
	"context"
	"crypto"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/clawea/attester/cmd/internal/buildinfo"
	"github.com/clawea/attester/cmd/internal/gcflag"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/verify/earresult"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	code := buildinfo.VersionOr("verifier", os.Args[1:], os.Stdout, func() int { return run(ctx, os.Args[1:], os.Stderr) })
	stop()
	os.Exit(code)
}

const (
	exitOK     = 0
	exitUsage  = 1
	exitServer = 3
)

func run(ctx context.Context, args []string, stderr io.Writer) int {
	// A FlagSet of our own: go-sev-guest and go-tdx-guest register global
	// flags when imported.
	fs := flag.NewFlagSet("verifier", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve on")
	policyFile := fs.String("policy", "", "policy file, served as the policy named \"default\"")
	policyDir := fs.String("policy-dir", "", "directory of NAME.json policy files")
	collDir := fs.String("collateral", "", "collateral directory (docs/spec/verify-platform.md)")
	earKey := fs.String("ear-key", "", "PEM PKCS#8 Ed25519 or ECDSA P-256 key that signs the EARs")
	var previous fileList
	fs.Var(&previous, "ear-previous-key", "PEM public (or retired private) key of an earlier EAR key, still published after a rotation; repeatable")
	reload := fs.Duration("reload-interval", 5*time.Second, "how often policy and collateral files are checked for changes")
	maxBody := fs.Int("max-body", DefaultMaxBody, "request body limit in bytes")
	maxInflight := fs.Int("max-inflight", DefaultMaxInflight, "verifications served at once; more get 503")
	cacheSize := fs.Int("cert-cache", 1024, "verified SEV-SNP chains kept in memory")
	readHeader := fs.Duration("read-header-timeout", 5*time.Second, "time to read a request's headers")
	readTimeout := fs.Duration("read-timeout", 30*time.Second, "time to read a whole request")
	writeTimeout := fs.Duration("write-timeout", 30*time.Second, "time to verify and write a response")
	shutdown := fs.Duration("shutdown-timeout", 20*time.Second, "time in-flight requests get after SIGTERM")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	gcPercent := gcflag.Define(fs, DefaultGCPercent)
	fs.Bool("version", false, "print the version and exit (the only argument)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	var level slog.Level
	switch {
	case level.UnmarshalText([]byte(*logLevel)) != nil:
		fmt.Fprintln(stderr, "verifier: --log-level: want debug, info, warn or error")
		return exitUsage
	case fs.NArg() != 0:
		fmt.Fprintln(stderr, "verifier: unexpected arguments")
		return exitUsage
	case fs.Lookup("version").Value.String() != "false":
		fmt.Fprintln(stderr, "verifier: --version takes no other arguments")
		return exitUsage
	case *earKey == "":
		fmt.Fprintln(stderr, "verifier: --ear-key is required")
		return exitUsage
	case *policyFile == "" && *policyDir == "":
		fmt.Fprintln(stderr, "verifier: --policy or --policy-dir is required")
		return exitUsage
	case *reload <= 0 || *maxBody <= 0 || *maxInflight <= 0 || *cacheSize <= 0 || *readHeader <= 0 || *readTimeout <= 0 || *writeTimeout <= 0 || *gcPercent <= 0:
		fmt.Fprintln(stderr, "verifier: durations and sizes must be positive")
		return exitUsage
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	gcflag.Apply(fs, *gcPercent)

	signer, prevKeys, err := loadKeys(*earKey, previous)
	if err != nil {
		log.Error("unusable ear key", "err", err)
		return exitUsage
	}
	svc, err := NewService(Config{
		Sources: sources{PolicyFile: *policyFile, PolicyDir: *policyDir, CollateralDir: *collDir},
		Signer:  signer, PreviousKeys: prevKeys, Version: buildinfo.Version(),
		Now: time.Now, MaxBody: *maxBody, MaxInflight: *maxInflight, CacheSize: *cacheSize, Log: log,
	})
	if err != nil {
		log.Error("cannot load the configuration", "err", err)
		return exitUsage
	}
	svc.logStart()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Error("cannot listen", "addr", *listen, "err", err)
		return exitServer
	}
	srv := &http.Server{
		Handler:           svc.Handler(),
		ReadHeaderTimeout: *readHeader,
		ReadTimeout:       *readTimeout,
		WriteTimeout:      *writeTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go svc.Watch(watchCtx, *reload)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		log.Error("server failed", "err", err)
		return exitServer
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), *shutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Error("shutdown incomplete", "err", err)
		return exitServer
	}
	log.Info("stopped")
	return exitOK
}

// fileList is a repeatable flag of file names.
type fileList []string

func (l *fileList) String() string { return fmt.Sprint([]string(*l)) }

func (l *fileList) Set(v string) error {
	if v == "" {
		return errors.New("empty file name")
	}
	*l = append(*l, v)
	return nil
}

func readPublicKey(name string) (crypto.PublicKey, error) {
	raw, err := bounded.ReadFile(name, maxKeyFileBytes)
	if err != nil {
		return nil, err
	}
	return parsePublicKey(raw)
}

// loadKeys reads the EAR signing key and the previous keys still
// published. Errors name the file, never key bytes.
func loadKeys(current string, previous []string) (crypto.Signer, []crypto.PublicKey, error) {
	raw, err := bounded.ReadFile(current, maxKeyFileBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("--ear-key: %w", err)
	}
	signer, err := earresult.ParseSigningKey(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("--ear-key %s: %w", current, err)
	}
	var prev []crypto.PublicKey
	for _, f := range previous {
		pub, err := readPublicKey(f)
		if err != nil {
			return nil, nil, fmt.Errorf("--ear-previous-key %s: %w", f, err)
		}
		prev = append(prev, pub)
	}
	return signer, prev, nil
}
