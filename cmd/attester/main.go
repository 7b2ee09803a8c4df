// Command attester is the clawea attester service. It runs inside the
// confidential VM beside the agent: it opens prompt packs only in sealed
// memory, rebuilds and checks the system prompt, gates tool calls, and signs
// execution attestations backed by fresh hardware evidence.
//
// Usage:
//
//	attester --config FILE [--platform auto|sev-snp|tdx|tpm|simulated] [--listen ADDR]
//	attester --version
//
// Exit codes: 0 clean shutdown, 1 usage or configuration error (an unknown
// key, a value out of range, a malformed listen address or flag: nothing
// has been opened), 2 the platform or identity could not be set up, 3 a
// listener could not be opened (for example another attester holds the
// control socket), the control socket's layout lets a control uid replace
// it (outside development mode), or the server failed. Listeners are
// opened before the identity is unsealed.
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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/clawea/attester/cmd/attester/server"
	"github.com/clawea/attester/cmd/internal/gcflag"
	"github.com/clawea/attester/control"
	"github.com/clawea/attester/control/gateway"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/confdoc"
	"github.com/clawea/attester/sealed"
)

func main() {
	os.Exit(versionOr(os.Args[1:], os.Stdout, func() int { return run(os.Args[1:], os.Stderr) }))
}

func run(args []string, stderr io.Writer) int {
	// The hidden worker mode that opens one prompt pack for the service
	// (internal: it refuses to run unless started by the service).
	if code, ok := control.RunWorker(args); ok {
		return code
	}
	// The flag names are prefixed so they cannot collide with the global
	// flags go-sev-guest and go-tdx-guest register when imported.
	fs := flag.NewFlagSet("attester", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "configuration file (JSON)")
	platform := fs.String("platform", "", "override attester.platform: auto, sev-snp, tdx, tpm or simulated")
	listen := fs.String("listen", "", "override attester.listen")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	gcPercent := gcflag.Define(fs, gateway.GCPercent)
	fs.Bool("version", false, "print the version and exit (the only argument)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 1
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil || fs.NArg() != 0 || *configPath == "" || fs.Lookup("version").Value.String() != "false" || *gcPercent <= 0 {
		fs.Usage()
		return 1
	}
	gcflag.Apply(fs, *gcPercent)
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))

	if err := sealed.HardenProcess(); err != nil {
		log.Error("cannot harden the process (core dumps may expose secrets)", "err", err)
		return 2
	}
	raw, err := readConfig(*configPath)
	if tl, ok := errors.AsType[*bounded.TooLargeError](err); ok {
		log.Error("cannot read config", "err", fmt.Sprintf("the config file is larger than %d bytes", tl.Limit))
		return 1
	}
	if err != nil {
		log.Error("cannot read config", "err", err)
		return 1
	}
	cfg, rest, err := control.ParseConfigWith(raw, control.ConfigOptions{Logger: log, Platform: *platform, Listen: *listen})
	if err != nil {
		log.Error("invalid config", "err", err)
		return 1
	}
	lns, err := openListeners(cfg)
	if err != nil {
		log.Error("cannot listen", "err", err)
		return 3
	}
	defer lns.close()
	if cfg.CheckIsolation(log) != nil {
		return 3
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	svc, closeAll, err := control.Setup(ctx, control.Deps{Config: cfg, GateConfig: rest, Logger: log, Registerer: reg})
	if err != nil {
		log.Error("setup failed", "err", err)
		var ce *confdoc.ConfigError
		if errors.As(err, &ce) {
			return 1
		}
		return 2
	}
	defer closeAll()
	if err := serve(ctx, server.Wrap(svc, reg, log), lns, log); err != nil {
		log.Error("server failed", "err", err)
		return 3
	}
	return 0
}

type listeners struct {
	public, metrics net.Listener
	control         *server.ControlListener
}

func (l *listeners) close() {
	if l.public != nil {
		l.public.Close()
	}
	if l.metrics != nil {
		l.metrics.Close()
	}
	if l.control != nil {
		l.control.Close()
	}
}

// listen opens the control socket first (a second attester on the same
// path stops here, touching nothing), then the TCP listeners.
func openListeners(cfg *control.Config) (*listeners, error) {
	l := &listeners{}
	var err error
	if l.control, err = server.ListenControlSocket(cfg.ControlSocket); err != nil {
		return nil, err
	}
	if l.public, err = net.Listen("tcp", cfg.Listen); err != nil {
		l.close()
		return nil, err
	}
	if l.metrics, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// Timeouts shared by the three servers: headers must arrive within
// ReadHeaderTimeout; bodies have per-route read deadlines (the control
// API's handlers) and the public and metrics servers accept no bodies.
const (
	readHeaderTimeout = 5 * time.Second
	idleTimeout       = 60 * time.Second
	maxHeaderBytes    = 16 << 10
)

func serve(ctx context.Context, srv *server.Server, lns *listeners, log *slog.Logger) error {
	public := &http.Server{Handler: srv.PublicHandler(), ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes}
	metrics := &http.Server{Handler: srv.MetricsHandler(), ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes}
	ctl := &http.Server{Handler: srv.ControlHandler(), ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes, ConnContext: control.ConnContext}
	// Each listener holds at most maxConnections connections; at the limit
	// an idle keep-alive connection makes room, else the new one is closed.
	limit := func(name string, hs *http.Server, l net.Listener) net.Listener {
		cl := srv.ConnLimiter(name)
		hs.ConnState = cl.ConnState
		return cl.Listener(l)
	}
	publicLn, metricsLn, controlLn := limit("public", public, lns.public), limit("metrics", metrics, lns.metrics), limit("control", ctl, lns.control)
	errc := make(chan error, 3)
	go func() { errc <- public.Serve(publicLn) }()
	go func() { errc <- metrics.Serve(metricsLn) }()
	go func() { errc <- ctl.Serve(controlLn) }()
	log.Info("attester listening", "addr", lns.public.Addr().String(), "metrics", lns.metrics.Addr().String(), "control_socket", lns.control.Addr().String())
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down")
	srv.SetReady(false)
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = ctl.Shutdown(sctx)
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("framed control connections still open at shutdown", "err", err)
	}
	_ = metrics.Shutdown(sctx)
	return public.Shutdown(sctx)
}

// readConfig reads the config file, at most control.MaxConfigBytes, so that
// an oversize or endless config path is refused without being read whole.
func readConfig(path string) ([]byte, error) {
	return bounded.ReadFile(path, control.MaxConfigBytes)
}
