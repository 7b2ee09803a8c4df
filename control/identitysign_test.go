package control

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawea/attester/internal/testfile"
)

// TestIdentitySignerMatchesItsSeed: the identity's signer, created and
// then unsealed again, signs with the key of the sealed seed (the same
// signature crypto/ed25519 makes) under the identity's public key and DID.
func TestIdentitySignerMatchesItsSeed(t *testing.T) {
	s := newIdentityStore(t)
	msg := []byte("clawea identity signer test")
	for _, phase := range []string{"created", "unsealed"} {
		id, err := s.load()
		if err != nil {
			t.Fatal(err)
		}
		blob := testfile.Read(t, filepath.Join(s.dir, identityFile))
		secret, err := s.sealer.Unseal(context.Background(), identityLabel, blob)
		if err != nil {
			t.Fatal(err)
		}
		want := ed25519.NewKeyFromSeed(secret.Bytes()[:ed25519.SeedSize])
		secret.Destroy()
		if !id.Public.Equal(want.Public()) || !id.Signer.Public().(ed25519.PublicKey).Equal(want.Public()) {
			t.Fatalf("%s: public key is not the sealed seed's", phase)
		}
		sig, err := id.Signer.Sign(nil, msg, crypto.Hash(0))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(sig, ed25519.Sign(want, msg)) {
			t.Fatalf("%s: signature differs from crypto/ed25519's", phase)
		}
		id.Close()
		if _, err := id.Signer.Sign(nil, msg, crypto.Hash(0)); err == nil {
			t.Fatalf("%s: signed after Close", phase)
		}
	}
}

// TestIdentityKeyNeverReachesCryptoEd25519 guards
// docs/spec/sealed-memory.md section 2.1.1: no non-test file of control
// signs or derives keys with crypto/ed25519 (which keeps the expanded key
// on the heap unzeroed) or holds an ed25519.PrivateKey; the identity key is
// used only through its sealed signer. TestIdentitySeedNotInAttesterMemory
// (cmd/attester, as root) checks the running binary.
func TestIdentityKeyNeverReachesCryptoEd25519(t *testing.T) {
	forbidden := map[string]bool{"Sign": true, "NewKeyFromSeed": true, "GenerateKey": true, "PrivateKey": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		local := ""
		for _, im := range f.Imports {
			if im.Path.Value == `"crypto/ed25519"` {
				local = "ed25519"
				if im.Name != nil {
					local = im.Name.Name
				}
			}
		}
		checked++
		if local == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == local && forbidden[sel.Sel.Name] {
					t.Errorf("%s: uses ed25519.%s: sign with Identity.Signer (sealed.Ed25519Signer)", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("checked %d files; control has more", checked)
	}
}
