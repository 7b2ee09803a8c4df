package promptpack

import (
	"crypto/subtle"
	"errors"
	"fmt"

	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/sealed"
)

// SealPack rebuilds the pack with its own sig hashes (a consistency check:
// trust is the opener's policy), computes the report hash, and seals the
// canonical pack bytes for the recipients with the envelope context
// {PackID, ReportHash}. It returns the envelope file and its manifest; the
// report hash is m.ReportHash.
func SealPack(p *Pack, recipients ...*envelope.PublicKey) (enc []byte, m *envelope.Manifest, err error) {
	if p == nil {
		return nil, nil, fmt.Errorf("%w: nil pack", errInvalidInput)
	}
	self, err := p.SigHashes()
	if err != nil {
		return nil, nil, err
	}
	rb, err := p.Rebuild(self)
	if err != nil {
		return nil, nil, err
	}
	rb.Wipe()
	body, err := p.Encode()
	if err != nil {
		return nil, nil, err
	}
	defer clear(body)
	ctx := envelope.Context{PackID: packID(body), ReportHash: rb.ReportHash}
	return envelope.Seal(body, ctx, recipients...)
}

// OpenOptions relax OpenPack. The zero value is the strictest.
type OpenOptions struct {
	// AllowUnlocked accepts sealed memory that could not be locked into
	// RAM (see sealed.Options).
	AllowUnlocked bool
	// Limits lowers the envelope limits; zero: the defaults. A body
	// limit above the pack's own (16 MiB) is lowered to it.
	Limits envelope.Limits
}

// Opened is a decrypted pack held in sealed memory. Destroy it when done.
type Opened struct {
	buf        *sealed.Buffer
	pack       *Pack
	packID     string
	wantReport [32]byte
}

// OpenPack checks enc against the manifest and the expected report hash,
// decrypts it into a sealed.Buffer, parses the pack from there and checks
// that its pack id is the envelope's. On any failure everything decrypted is
// destroyed and nothing is returned. The report hash is compared with a
// rebuild in Opened.Rebuild.
func OpenPack(enc []byte, m *envelope.Manifest, key *envelope.PrivateKey, wantReportHash [32]byte, opts OpenOptions) (*Opened, error) {
	if m == nil || key == nil {
		return nil, fmt.Errorf("%w: nil manifest or key", errInvalidInput)
	}
	// No pack is larger than maxPackSize: a larger body is refused from
	// the file's size, before anything is decrypted into locked memory.
	if opts.Limits.MaxBodySize == 0 || opts.Limits.MaxBodySize > maxPackSize {
		opts.Limits.MaxBodySize = maxPackSize
	}
	hdr, err := opts.Limits.Verify(enc, m)
	if err != nil {
		return nil, fmt.Errorf("promptpack: open: %w", err)
	}
	ctx := envelope.Context{PackID: hdr.PackID, ReportHash: wantReportHash}
	n := hdr.PlaintextLen()
	if n < 1 {
		return nil, fmt.Errorf("promptpack: open: %w", ErrMalformed)
	}
	buf, err := sealed.New(n, sealed.Options{AllowUnlocked: opts.AllowUnlocked})
	if err != nil {
		return nil, fmt.Errorf("promptpack: open: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			buf.Destroy()
		}
	}()
	got, err := opts.Limits.Open(enc, m, key, ctx, buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("promptpack: open: %w", err)
	}
	body := buf.Bytes()[:got]
	if id := packID(body); subtle.ConstantTimeCompare([]byte(id), []byte(hdr.PackID)) != 1 {
		return nil, fmt.Errorf("%w: envelope names %q", ErrPackIDMismatch, hdr.PackID)
	}
	p, err := Parse(body)
	if err != nil {
		return nil, fmt.Errorf("promptpack: open: %w", err)
	}
	ok = true
	return &Opened{buf: buf, pack: p, packID: hdr.PackID, wantReport: wantReportHash}, nil
}

// Pack returns the parsed pack; it is wiped by Destroy.
func (o *Opened) Pack() *Pack { return o.pack }

// Bytes returns the canonical pack bytes in sealed memory; nil after
// Destroy. The slice must not be used after Destroy.
func (o *Opened) Bytes() []byte {
	if o == nil || o.buf == nil {
		return nil
	}
	return o.buf.Bytes()
}

// Rebuild rebuilds the prompt with the opener's trusted template hashes and
// compares the report hash with the expected one. On any failure the opened
// pack is destroyed.
func (o *Opened) Rebuild(trusted map[string]string) (*Rebuilt, error) {
	if o == nil || o.pack == nil {
		return nil, fmt.Errorf("promptpack: %w", sealed.ErrDestroyed)
	}
	rb, err := o.pack.Rebuild(trusted)
	if err != nil {
		o.Destroy()
		return nil, err
	}
	if !equalHash(rb.ReportHash, o.wantReport) {
		rb.Wipe()
		o.Destroy()
		return nil, ErrReportMismatch
	}
	return rb, nil
}

// Destroy wipes the parsed pack and destroys the sealed buffer. It is
// idempotent.
func (o *Opened) Destroy() {
	if o == nil {
		return
	}
	o.pack.Wipe()
	o.pack = nil
	o.buf.Destroy()
	o.buf = nil
}

// String describes the opened pack without its contents.
func (o *Opened) String() string {
	if o == nil || o.pack == nil {
		return "promptpack.Opened(destroyed)"
	}
	return fmt.Sprintf("promptpack.Opened{pack_id=%s}", o.packID)
}

// isWrongKey reports whether err means the key is not a recipient of the
// envelope (as opposed to tampering).
func isWrongKey(err error) bool { return errors.Is(err, envelope.ErrNoMatchingRecipient) }
