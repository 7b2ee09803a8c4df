package audit

import (
	"fmt"
	"io"
	"strings"

	"github.com/clawea/attester/wire/auditrec"
)

// Records reads the snapshot's records, verifying each line and the chain
// as a verifier does (auditrec.Read), and checks that they end at the
// snapshot's root and count; then it closes the snapshot. The records are
// the run's own (at most MaxRunBytes of them), so the attester can hold
// them while it checks a proof bundle against its decisions.
func (s *Snapshot) Records() ([]auditrec.Record, error) {
	defer s.Close()
	var recs []auditrec.Record
	var r io.Reader = strings.NewReader("")
	if s.f != nil {
		r = io.NewSectionReader(s.f, 0, s.Size)
	}
	root, count, err := auditrec.Read(r, func(rec auditrec.Record) error {
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: run log: %w", err)
	}
	if root != s.Root || count != s.Count {
		return nil, fmt.Errorf("audit: run log: %w: the file holds %d records, the log %d", auditrec.ErrChainBreak, count, s.Count)
	}
	return recs, nil
}
