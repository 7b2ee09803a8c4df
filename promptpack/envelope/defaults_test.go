package envelope

// openDefault is Limits{}.Open, the default limits the tests use.
func openDefault(file []byte, m *Manifest, key *PrivateKey, want Context, dst []byte) (n int, err error) {
	return Limits{}.Open(file, m, key, want, dst)
}
