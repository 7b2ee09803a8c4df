package loadstat

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	if got := Percentile(nil, 500); got != 0 {
		t.Fatalf("empty: %v", got)
	}
	d := make([]time.Duration, 1000)
	for i := range d {
		d[i] = time.Duration(i)
	}
	for _, tt := range []struct {
		permille int
		want     time.Duration
	}{{0, 0}, {500, 500}, {990, 990}, {999, 999}, {1000, 999}} {
		if got := Percentile(d, tt.permille); got != tt.want {
			t.Errorf("Percentile(0..999, %d) = %v, want %v", tt.permille, got, tt.want)
		}
	}
	if got := Percentile(d[:3], 990); got != 2 {
		t.Errorf("p99 of 3 values = %v, want the last", got)
	}
}

func TestSelfCPU(t *testing.T) {
	a := SelfCPU(t)
	for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end); {
	}
	if b := SelfCPU(t); b <= a {
		t.Fatalf("CPU time did not grow over a busy loop: %v then %v", a, b)
	}
}
