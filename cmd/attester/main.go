// Command attester is the clawea attester service. It runs inside the
// confidential VM beside the agent: it opens prompt packs only in sealed
// memory, rebuilds and checks the system prompt, gates tool calls, and signs
// execution attestations backed by fresh hardware evidence.
//
// Usage:
//
//	attester --config FILE [--platform auto|sev-snp|tdx|tpm|simulated] [--listen ADDR]
//
// Exit codes: 0 clean shutdown, 1 usage or configuration error, 2 the
// platform or identity could not be set up, 3 the server failed.
package main

import (
	"context"
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

	"github.com/clawea/attester/cmd/attester/server"
	"github.com/clawea/attester/sealed"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	// The flag names are prefixed so they cannot collide with the global
	// flags go-sev-guest and go-tdx-guest register when imported.
	fs := flag.NewFlagSet("attester", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (JSON)")
	platform := fs.String("platform", "", "override attester.platform: auto, sev-snp, tdx, tpm or simulated")
	listen := fs.String("listen", "", "override attester.listen")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 1
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil || fs.NArg() != 0 || *configPath == "" {
		fs.Usage()
		return 1
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	if err := sealed.HardenProcess(); err != nil {
		log.Error("cannot harden the process (core dumps may expose secrets)", "err", err)
		return 2
	}
	raw, err := os.ReadFile(*configPath)
	if err != nil {
		log.Error("cannot read config", "err", err)
		return 1
	}
	cfg, rest, err := server.ParseConfig(raw)
	if err != nil {
		log.Error("invalid config", "err", err)
		return 1
	}
	if *platform != "" {
		cfg.Platform = *platform
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, closeAll, err := server.Setup(ctx, cfg, rest, log)
	if err != nil {
		log.Error("setup failed", "err", err)
		var ce *server.ConfigError
		if errors.As(err, &ce) {
			return 1
		}
		return 2
	}
	defer closeAll()
	if err := serve(ctx, srv, cfg, log); err != nil {
		log.Error("server failed", "err", err)
		return 3
	}
	return 0
}

func serve(ctx context.Context, srv *server.Server, cfg *server.Config, log *slog.Logger) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	agentLn, err := server.ListenAgentSocket(cfg.AgentSocket)
	if err != nil {
		ln.Close()
		return err
	}
	api := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
	agent := &http.Server{Handler: srv.AgentHandler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- api.Serve(ln) }()
	go func() { errc <- agent.Serve(agentLn) }()
	log.Info("attester listening", "addr", ln.Addr().String(), "agent_socket", cfg.AgentSocket)
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down")
	srv.SetReady(false)
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = agent.Shutdown(sctx)
	return api.Shutdown(sctx)
}
