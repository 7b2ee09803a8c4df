// Package controltest assembles what a control.Service starts from in a
// test: a parsed configuration, an open platform and a fresh identity.
// Only tests import it (internal/layers enforces that).
package controltest

import (
	"context"
	"log/slog"
	"testing"

	"github.com/clawea/attester/control"
	"github.com/clawea/attester/enclave/detect"
	"github.com/clawea/attester/sealed"
)

// Deps parses the attester configuration raw, opens the platform named
// platform with opts and loads a fresh identity kept in memory (unlocked
// memory allowed), each closed when tb ends, and returns them as the
// control.Deps of a service that logs to log.
func Deps(tb testing.TB, raw []byte, platform string, opts detect.Options, log *slog.Logger) control.Deps {
	tb.Helper()
	cfg, rest, err := control.ParseConfigWith(raw, control.ConfigOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	p, rep, err := detect.Open(context.Background(), platform, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	id, err := control.LoadIdentity(context.Background(), "", nil, sealed.Options{AllowUnlocked: true}, log)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(id.Close)
	return control.Deps{Config: cfg, GateConfig: rest, Identity: id, Platform: p, PlatformReport: rep, Logger: log}
}
