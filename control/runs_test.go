package control

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"testing"
)

// TestClosedRunsRemembered checks attester-api section 2 step 3 at its
// bound: the capability of one of the last maxClosedRuns closed runs gets
// 410, an older one gets the 403 of an unknown run, and a wrong capability
// for a remembered run is never told the run existed.
func TestClosedRunsRemembered(t *testing.T) {
	st := newRunStore(1)
	proc := Process{PID: 42, StartTime: 7}
	capOf := func(i int) [32]byte { return sha256.Sum256(fmt.Appendf(nil, "cap-%d", i)) }
	idOf := func(i int) string { return fmt.Sprintf("run-%d", i) }
	const n = maxClosedRuns + 2
	for i := range n {
		r := &Run{id: idOf(i), capHash: capOf(i), proc: proc}
		if err := st.add(r); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		if _, ok := st.remove(r.id); !ok {
			t.Fatalf("run %d was not open", i)
		}
		if !r.closed {
			t.Fatalf("run %d not destroyed on remove", i)
		}
	}
	if len(st.closed) != maxClosedRuns || len(st.closedOrder) != maxClosedRuns {
		t.Fatalf("remembered %d (%d in order), want %d", len(st.closed), len(st.closedOrder), maxClosedRuns)
	}
	status := func(i int, capHash [32]byte) int {
		t.Helper()
		r, err := st.authorize(idOf(i), capHash, proc)
		if err == nil {
			t.Fatalf("run %d: authorized %v after close", i, r)
		}
		e, ok := err.(*Error)
		if !ok {
			t.Fatalf("run %d: %T %v", i, err, err)
		}
		return e.Status()
	}
	for _, tc := range []struct {
		run  int
		want int
	}{
		{0, http.StatusForbidden}, // forgotten: the oldest two
		{1, http.StatusForbidden}, //
		{2, http.StatusGone},      // the oldest remembered
		{n - 1, http.StatusGone},  // the newest
		{n / 2, http.StatusGone},  // one between
		{n, http.StatusForbidden}, // never existed
	} {
		if got := status(tc.run, capOf(tc.run)); got != tc.want {
			t.Errorf("run %d with its capability: %d, want %d", tc.run, got, tc.want)
		}
	}
	if got := status(n-1, capOf(0)); got != http.StatusForbidden {
		t.Errorf("a remembered run with another capability: %d, want 403", got)
	}
}
