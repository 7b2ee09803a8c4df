// Command gen writes the gate's golden audit log (package goldengen) to
// testdata/decisions.golden.jsonl. Run through `go generate ./gate`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/clawea/attester/gate/internal/goldengen"
)

func main() {
	out := flag.String("out", goldengen.Path, "output file")
	flag.Parse()
	r, err := goldengen.Decisions(context.Background())
	if err == nil {
		err = os.WriteFile(*out, r.Audit, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
