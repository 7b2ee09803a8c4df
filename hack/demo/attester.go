package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// How long the demo waits for an attester to listen, and for it to exit
// after SIGTERM before it is killed.
const (
	attesterStartTimeout = 30 * time.Second
	attesterStopTimeout  = 20 * time.Second
	// stderrTailLines is how much of an attester's stderr an error quotes.
	stderrTailLines = 15
)

// attesterProc is an attester binary the demo started, as an operator
// would: its public API on a free loopback port, its control API on a unix
// socket.
type attesterProc struct {
	name     string
	cmd      *exec.Cmd
	stderr   *stderrSink
	exited   chan struct{} // closed once the process has exited
	waitErr  error         // cmd.Wait's result, set before exited is closed
	pub, ctl *client
	listen   listenLine // where it listens, from its log
	stopOnce sync.Once
	stopErr  error
}

// startAttester writes config (the whole attester configuration file,
// secrets included) to dir/config.json, starts the attester binary bin with
// it and env added to the demo's environment, and waits until it listens.
// Its stderr (the JSON log) goes to logw line by line. The config file is
// removed once the attester has read it: it holds the webhook secret, and
// the attester reads its configuration once, at start.
func startAttester(ctx context.Context, bin, name, dir string, config []byte, env []string, logw *log.Logger) (*attesterProc, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, config, 0o600); err != nil {
		return nil, err
	}
	defer os.Remove(cfgPath)
	a := &attesterProc{name: name, stderr: newStderrSink(logw), exited: make(chan struct{})}
	a.cmd = exec.CommandContext(ctx, bin, "--config", cfgPath)
	a.cmd.Env = append(os.Environ(), env...)
	a.cmd.Stderr = a.stderr
	// When ctx ends the attester is asked to stop as an operator would,
	// and killed if it has not exited WaitDelay later.
	a.cmd.Cancel = func() error { return a.cmd.Process.Signal(syscall.SIGTERM) }
	a.cmd.WaitDelay = attesterStopTimeout
	if err := a.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w (make demo builds bin/attester)", name, err)
	}
	go func() {
		a.waitErr = a.cmd.Wait()
		a.stderr.flush()
		close(a.exited)
	}()
	timer := time.NewTimer(attesterStartTimeout)
	defer timer.Stop()
	select {
	case l := <-a.stderr.listening:
		a.listen = l
		a.pub = &client{base: "http://" + l.Addr, hc: &http.Client{Timeout: 30 * time.Second}, proc: a}
		a.ctl = &client{base: "http://attester", hc: unixClient(l.ControlSocket), proc: a}
		return a, nil
	case <-a.exited:
		return nil, a.exitError("exited before listening")
	case <-timer.C:
		err := fmt.Errorf("%s did not listen within %v; its stderr ends:\n%s", name, attesterStartTimeout, a.stderr.tail())
		a.stop()
		return nil, err
	}
}

// String names the process and where it listens, for progress lines.
func (a *attesterProc) String() string {
	return fmt.Sprintf("%s (pid %d): public API on %s, control socket %s", a.cmd.Path, a.cmd.Process.Pid, a.listen.Addr, a.listen.ControlSocket)
}

// stop sends SIGTERM, waits for the attester to exit (killing it after
// attesterStopTimeout) and reports an unclean exit with its stderr tail.
// It may be called more than once.
func (a *attesterProc) stop() error {
	a.stopOnce.Do(func() {
		select {
		case <-a.exited:
		default:
			a.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-a.exited:
			case <-time.After(attesterStopTimeout):
				a.cmd.Process.Kill()
				<-a.exited
			}
		}
		if a.waitErr != nil {
			a.stopErr = a.exitError("did not stop cleanly")
		}
	})
	return a.stopErr
}

// exitError describes the exited attester with the tail of its stderr.
func (a *attesterProc) exitError(what string) error {
	return fmt.Errorf("%s %s (%v); its stderr ends:\n%s", a.name, what, a.cmd.ProcessState, a.stderr.tail())
}

// explain adds to err, from a request to the attester, that the attester
// has exited, with its stderr tail. A request fails a moment before the
// exit is seen, so it waits briefly.
func (a *attesterProc) explain(err error) error {
	if err == nil || a == nil {
		return err
	}
	select {
	case <-a.exited:
		return fmt.Errorf("%w: %w", err, a.exitError("exited early"))
	case <-time.After(time.Second):
		return err
	}
}

// listenLine is the attester's "attester listening" log record.
type listenLine struct {
	Addr          string `json:"addr"`
	ControlSocket string `json:"control_socket"`
}

// stderrSink is an attester's stderr: every complete line goes to the log
// writer, the last stderrTailLines are kept for errors, and the first
// "attester listening" record is sent on listening.
type stderrSink struct {
	mu        sync.Mutex
	log       *log.Logger
	partial   []byte
	lines     [][]byte
	listening chan listenLine
	heard     bool
}

func newStderrSink(logw *log.Logger) *stderrSink {
	return &stderrSink{log: logw, listening: make(chan listenLine, 1)}
}

func (s *stderrSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.line(s.partial[:i+1])
		s.partial = append(s.partial[:0], s.partial[i+1:]...)
	}
	return len(p), nil
}

// flush passes on a last line without a newline.
func (s *stderrSink) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 {
		s.line(append(s.partial, '\n'))
		s.partial = nil
	}
}

func (s *stderrSink) line(l []byte) {
	s.log.Print(string(l))
	s.lines = append(s.lines, bytes.Clone(l))
	if len(s.lines) > stderrTailLines {
		s.lines = s.lines[1:]
	}
	if s.heard {
		return
	}
	var rec struct {
		Msg string `json:"msg"`
		listenLine
	}
	if json.Unmarshal(l, &rec) == nil && rec.Msg == "attester listening" && rec.Addr != "" && rec.ControlSocket != "" {
		s.heard = true
		s.listening <- rec.listenLine
	}
}

// tail returns the last lines of stderr.
func (s *stderrSink) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(bytes.Join(s.lines, nil))
}
