package tpm

import (
	"bytes"
	"context"
	"testing"

	"github.com/clawea/attester/sealed"
)

func TestSealerAdapter(t *testing.T) {
	tp := openSwtpm(t, Options{PCRs: sealPCRs})
	s := &Sealer{TPM: tp}
	ctx := context.Background()
	key := bytes.Repeat([]byte{0x5a}, 32)
	blob, err := s.Seal(ctx, "identity-key", key)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := s.Unseal(ctx, "identity-key", blob)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Destroy()
	if !bytes.Equal(buf.Bytes(), key) || !buf.Locked() {
		t.Fatalf("unsealed %d bytes, locked=%v", buf.Len(), buf.Locked())
	}
	if _, err := s.Unseal(ctx, "other-label", blob); err == nil {
		t.Fatal("wrong label unsealed")
	}
	// A development blob never opens here, and ours is not a dev blob.
	dev, err := sealed.NewDevSealer(bytes.Repeat([]byte{1}, 32), sealed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Destroy()
	devBlob, _ := dev.Seal(ctx, "identity-key", key)
	if _, err := s.Unseal(ctx, "identity-key", devBlob); err == nil {
		t.Fatal("development blob unsealed by the TPM sealer")
	}
	if _, err := dev.Unseal(ctx, "identity-key", blob); err == nil {
		t.Fatal("TPM blob opened by the development sealer")
	}
}
