//go:build unix

package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// BenchmarkStartup: Open (the attester's start-up) on an audit directory
// of 1k, 25k and 250k records (files of at most 25,000 records, about a
// run's default cap), verifying every record ("full") and with a signed
// checkpoint from a clean Close ("checkpoint"), in the same run; the files
// are in the page cache for both. It prints a table with the ratio.
// `make bench-startup` runs it.
func BenchmarkStartup(b *testing.B) {
	sizes := []int{1_000, 25_000, 250_000}
	perOp := map[string]float64{}
	for _, n := range sizes {
		dir := startupState(b, n)
		ck := testfile.Read(b, filepath.Join(dir, checkpointName))
		for _, mode := range []string{"full", "checkpoint"} {
			name := fmt.Sprintf("records=%dk/%s", n/1000, mode)
			b.Run(name, func(b *testing.B) {
				opts := Options{MaxRunBytes: 1 << 30, MaxTotalBytes: 1 << 40}
				if mode == "checkpoint" {
					k := ckOpts(1)
					opts.CheckpointKey, opts.SignCheckpoint = k.CheckpointKey, k.SignCheckpoint
				}
				b.ReportAllocs()
				b.StopTimer()
				for range b.N {
					if mode == "checkpoint" {
						writeFile(b, filepath.Join(dir, checkpointName), ck)
					}
					b.StartTimer()
					l, err := Open(dir, opts)
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					if err := l.Close(); err != nil {
						b.Fatal(err)
					}
				}
				perOp[name] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			})
		}
	}
	fmt.Fprintf(os.Stdout, "\nstart-up (Open) by audit size, same run:\n%10s %14s %14s %8s\n", "records", "full", "checkpoint", "ratio")
	for _, n := range sizes {
		full, ck := perOp[fmt.Sprintf("records=%dk/full", n/1000)], perOp[fmt.Sprintf("records=%dk/checkpoint", n/1000)]
		if full == 0 || ck == 0 {
			continue // filtered out by -bench
		}
		fmt.Fprintf(os.Stdout, "%10d %12.1fms %12.1fms %7.3fx\n", n, full/1e6, ck/1e6, ck/full)
	}
}

// startupState writes n records in files of at most 25,000 records (no
// fsync: only Open is measured) and a checkpoint (key 1) by a clean Close.
func startupState(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	for run := 0; n > 0; run++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("run_%d%s", run, fileSuffix)))
		if err != nil {
			b.Fatal(err)
		}
		w, err := NewWriter(f, WriterOptions{Now: newClock().now})
		if err != nil {
			b.Fatal(err)
		}
		for i := range min(n, 25_000) {
			if _, err := w.Append(entry(i)); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		n -= min(n, 25_000)
	}
	opts := ckOpts(1)
	opts.MaxRunBytes, opts.MaxTotalBytes = 1<<30, 1<<40
	l, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	return dir
}
