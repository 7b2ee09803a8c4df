//go:build nvml

package nvgpu

import (
	"context"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/clawea/attester/wire/nvspdm"
)

// TestNVMLReport runs on a machine with an NVIDIA GPU and the driver:
//
//	go test -tags nvml -run TestNVML -v ./enclave/nvgpu/
//
// It prints what NVML reports. With confidential computing on, it takes a
// report and checks that it parses and carries the nonce; with it off (or
// in devtools mode, or a non-production environment), it checks that no GPU
// and no evidence is produced.
func TestNVMLReport(t *testing.T) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		t.Skipf("nvml unavailable: %v", ret)
	}
	st, ret := nvml.SystemGetConfComputeState()
	t.Logf("conf compute state: %+v (%v)", st, ret)
	n, ret := nvml.DeviceGetCount()
	t.Logf("devices: %d (%v)", n, ret)
	for i := 0; i < n; i++ {
		d, _ := nvml.DeviceGetHandleByIndex(i)
		name, _ := d.GetName()
		arch, _ := d.GetArchitecture()
		t.Logf("gpu %d: %s, architecture %d", i, name, arch)
	}
	gpus, err := OpenNVML()
	if !ccOn(st) {
		if !errors.Is(err, errCCOff) || gpus != nil {
			t.Fatalf("confidential computing is off but OpenNVML = %v, %v", gpus, err)
		}
		t.Logf("confidential computing off: refused as it must be: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	rd := testRD(t)
	for i, g := range gpus {
		ev, err := g.Quote(context.Background(), rd)
		if err != nil {
			t.Fatalf("gpu %d: %v", i, err)
		}
		rep, err := nvspdm.Parse(ev.Blob)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("gpu %d: report %d bytes, %d measurements, fwid %s, %d certificates",
			i, len(ev.Blob), len(rep.Measurements), hex.EncodeToString(rep.FWID()), len(ev.CertChain))
		t.Logf("gpu %d report (hex): %s", i, hex.EncodeToString(ev.Blob))
	}
}

// TestCCOn: only the enabled feature in the production environment with
// devtools mode off counts as confidential computing.
func TestCCOn(t *testing.T) {
	on := nvml.ConfComputeSystemState{CcFeature: nvml.CC_SYSTEM_FEATURE_ENABLED, Environment: nvml.CC_SYSTEM_ENVIRONMENT_PROD, DevToolsMode: nvml.CC_SYSTEM_DEVTOOLS_MODE_OFF}
	if !ccOn(on) {
		t.Fatal("production cc refused")
	}
	for name, st := range map[string]nvml.ConfComputeSystemState{
		"off":      {CcFeature: nvml.CC_SYSTEM_FEATURE_DISABLED, Environment: nvml.CC_SYSTEM_ENVIRONMENT_PROD},
		"devtools": {CcFeature: nvml.CC_SYSTEM_FEATURE_ENABLED, Environment: nvml.CC_SYSTEM_ENVIRONMENT_PROD, DevToolsMode: nvml.CC_SYSTEM_DEVTOOLS_MODE_ON},
		"sim":      {CcFeature: nvml.CC_SYSTEM_FEATURE_ENABLED, Environment: nvml.CC_SYSTEM_ENVIRONMENT_SIM},
	} {
		if ccOn(st) {
			t.Errorf("%s accepted", name)
		}
	}
}
