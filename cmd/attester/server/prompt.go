package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/sealed"
	"github.com/clawea/attester/wire/answer"
)

// promptWriteTimeout bounds how long a reader may take to receive the
// prompt (the run is locked meanwhile, so closing it waits).
const promptWriteTimeout = 30 * time.Second

// servePrompt writes the prompt straight from sealed memory to the
// connection. Through the ResponseWriter, net/http would copy the body into
// its heap buffers (the response buffer and the connection's bufio.Writer),
// which are not zeroed when freed; after hijacking the connection the bytes
// go from the sealed buffer to write(2) and only the kernel's socket
// buffers hold them until the peer reads them (docs/spec/sealed-memory.md
// section 2.1). The response is HTTP/1.1 with Content-Length and
// Connection: close. The caller holds the run's lock, so the buffer cannot
// be destroyed while it is written.
func (s *Server) servePrompt(w http.ResponseWriter, prompt *sealed.Buffer, hash string, statement, signature []byte) error {
	b := prompt.Bytes()
	if b == nil {
		return httpErr(http.StatusGone, "run closed", nil)
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return httpErr(http.StatusInternalServerError, "cannot serve the prompt", err)
	}
	defer s.releaseConn(conn)
	// The connection is ours now: nothing may be written through w, so
	// the status is recorded for the metrics and logs directly.
	if sw, ok := w.(*statusWriter); ok {
		sw.code = http.StatusOK
	}
	if brw.Writer.Buffered() != 0 {
		return httpErr(http.StatusInternalServerError, "cannot serve the prompt: response already started", nil)
	}
	_ = conn.SetWriteDeadline(time.Now().Add(promptWriteTimeout))
	head := "HTTP/1.1 200 OK\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n" +
		"Cache-Control: no-store\r\n" +
		"X-Content-Type-Options: nosniff\r\n" +
		"X-Clawea-System-Prompt-Hash: " + hash + "\r\n" +
		answer.HeaderStatement + ": " + b64u.Encode(statement) + "\r\n" +
		answer.HeaderSignature + ": " + b64u.Encode(signature) + "\r\n" +
		"Content-Length: " + strconv.Itoa(len(b)) + "\r\n" +
		"Connection: close\r\n\r\n"
	if _, err := conn.Write([]byte(head)); err != nil {
		return err
	}
	_, err = conn.Write(b)
	return err
}
