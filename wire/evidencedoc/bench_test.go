package evidencedoc_test

import (
	"bytes"
	"testing"

	"github.com/clawea/attester/internal/loadstat"

	"github.com/clawea/attester/wire/evidencedoc"
)

// BenchmarkParse parses a signed execution document the size of a
// simulated SEV-SNP one: a 1,184-byte report, three certificates and a
// certificate table, about 22 KB of compact JWS.
func BenchmarkParse(b *testing.B) {
	d := execDoc(b)
	ev := d.Items[0].Evidence
	ev.Blob = bytes.Repeat([]byte{0xa5}, 1184)
	ev.CertChain = [][]byte{bytes.Repeat([]byte{1}, 1400), bytes.Repeat([]byte{2}, 1600), bytes.Repeat([]byte{3}, 1600)}
	ev.Aux = map[string][]byte{"cert_table": bytes.Repeat([]byte{4}, 4700)}
	d.Items[0].Collateral = nil
	jws := sign(b, d).JWS
	b.ReportAllocs()
	cpu0 := loadstat.SelfCPU(b)
	for b.Loop() {
		if _, err := evidencedoc.Parse(jws, pub()); err != nil {
			b.Fatal(err)
		}
	}
	// Process CPU time per op: on a shared machine, a steadier figure
	// than the wall-clock ns/op.
	b.ReportMetric(float64(loadstat.SelfCPU(b)-cpu0)/float64(b.N)/1e3, "cpu-us/op")
}
