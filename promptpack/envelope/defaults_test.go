package envelope

// verifyDefault and openDefault are Limits{}.Verify and Limits{}.Open, the
// default limits every test uses.
func verifyDefault(file []byte, m *Manifest) (*Header, error) { return Limits{}.Verify(file, m) }

func openDefault(file []byte, m *Manifest, key *PrivateKey, want Context, dst []byte) (n int, err error) {
	return Limits{}.Open(file, m, key, want, dst)
}
