// Package sealed holds the attester's secrets in ephemeral sealed memory and
// seals keys to the platform.
//
// A Buffer is memory outside the Go heap that is locked into RAM, excluded
// from core dumps and zeroed on release. On Linux it is backed by
// memfd_secret(2) where the kernel offers it (the pages are also removed from
// the kernel's direct map), otherwise by an anonymous mapping that is locked
// with mlock(2) and marked MADV_DONTDUMP (and MADV_WIPEONFORK where the kernel
// supports it). If the memory cannot be locked, New fails with ErrLockFailed;
// it falls back to unlocked memory only when Options.AllowUnlocked is set.
// Other operating systems compile but return ErrNotSupported.
//
// A shareable Buffer (NewShareable) keeps the descriptor of its backing so
// that another process can map the same memory (MapShared, MapReadOnly):
// the attester hands the identity key to its rebuild worker and gets the
// rebuilt prompt back this way, never through ordinary memory.
//
// Buffers have no finalizer: every Buffer must be released with Destroy,
// normally with defer right after New. A Buffer that is never destroyed
// stays locked and mapped until the process exits.
//
// Sealer seals small secrets (private keys, data-encryption keys) to the
// platform: NewKeySealer's sealer uses a platform-derived key (a Keyer, such
// as enclave.SealingKeyer) and devSealer a development key that is marked as
// such in every blob. The blob format and the rules above are specified
// normatively in docs/spec/sealed-memory.md.
//
// Limits of what this package can promise: Go's crypto/aes, crypto/cipher and
// crypto/hmac keep expanded key material on the Go heap for the duration of an
// operation and do not zero it; values a caller copies out of a Buffer are the
// caller's responsibility (use Wipe).
package sealed
