package control

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

func TestStatStartTime(t *testing.T) {
	// Fields 3..21 are "S 1 2 ... 19"; field 22 is the start time.
	tail := " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 123456789 23 24\n"
	for _, tc := range []struct {
		name, stat string
		want       uint64
		err        bool
	}{
		{"plain", "42 (sh)" + tail, 123456789, false},
		{"spaces", "42 (my prog)" + tail, 123456789, false},
		{"parentheses", "42 (a) (b) ) S 9)" + tail, 123456789, false},
		{"spaces and fake fields", "42 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 999 )" + tail, 123456789, false},
		{"no command", "42 sh" + tail, 0, true},
		{"close before open", "42 )sh(" + tail, 0, true},
		{"too few fields", "42 (sh) S 1 2 3\n", 0, true},
		{"not a number", "42 (sh) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -1 23\n", 0, true},
		{"empty", "", 0, true},
	} {
		got, err := statStartTime([]byte(tc.stat))
		if tc.err {
			if !errors.Is(err, errStat) {
				t.Errorf("%s: got %d %v, want an error", tc.name, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: got %d %v, want %d", tc.name, got, err, tc.want)
		}
	}
}

// TestStatStartTimeSelf reads this process's own /proc/self/stat.
func TestStatStartTimeSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux")
	}
	b := testfile.Read(t, "/proc/self/stat")
	v, err := statStartTime(b)
	if err != nil || v == 0 {
		t.Fatalf("start time of this process: %d %v (%q)", v, err, b)
	}
}

// TestReadPeer: over a unix socket the peer is this process: its pid, uid
// and start time.
func TestReadPeer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SO_PEERCRED is Linux")
	}
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	p, ok := readPeer(sc.(*net.UnixConn))
	if !ok || p.PID != os.Getpid() || p.UID != os.Geteuid() {
		t.Fatalf("peer %v %v, want pid %d uid %d", p, ok, os.Getpid(), os.Geteuid())
	}
	b, _ := os.ReadFile("/proc/self/stat")
	want, _ := statStartTime(b)
	if !p.StartTimeKnown || p.StartTime != want {
		t.Fatalf("start time %d %v, want %d", p.StartTime, p.StartTimeKnown, want)
	}
}
