//go:build linux

package sevsnp

import (
	"fmt"
	"strings"

	"github.com/clawea/attester/enclave"
	"github.com/google/go-sev-guest/client"
)

// Open opens the SEV-SNP guest device. With Options.Transport empty it uses
// configfs-tsm for reports when the kernel offers a sev_guest provider, else
// /dev/sev-guest; /dev/sev-guest is also opened, when present, for
// SealingKey. It returns an error wrapping enclave.ErrNotAvailable, with the
// reasons, when no transport works.
func Open(opts Options) (*Device, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	var reasons []string
	var src quoteSource
	transport := ""
	if opts.Transport == "" || opts.Transport == transportConfigFS {
		p := &client.LinuxConfigFsQuoteProvider{}
		if p.IsSupported() {
			src = &providerSource{qp: p, lqp: p, vmpl: opts.VMPL}
			transport = transportConfigFS
		} else {
			reasons = append(reasons, "configfs-tsm: no sev_guest report provider")
		}
	}
	var keyDev client.Device
	if opts.Transport == "" || opts.Transport == transportIoctl || src != nil {
		dev, err := client.OpenDevice()
		if err != nil {
			reasons = append(reasons, "/dev/sev-guest: "+err.Error())
		} else {
			keyDev = dev
			if src == nil {
				var vmpl uint
				if opts.VMPL != nil {
					vmpl = *opts.VMPL
				}
				src = &ioctlSource{dev: dev, vmpl: vmpl}
				transport = transportIoctl
			}
		}
	}
	if src == nil {
		return nil, fmt.Errorf("%w: sev-snp: %s", enclave.ErrNotAvailable, strings.Join(reasons, "; "))
	}
	return newDevice(transport, src, keyDev, opts), nil
}
