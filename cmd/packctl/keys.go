package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/sealed"
)

// maxKeyFile bounds a key or recipient file.
const maxKeyFile = 64 << 10

func runKeygen(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("keygen", "keygen -o KEY | keygen -y KEY\n\nWrites a new prompt-pack recipient private key to KEY (mode 0600, never\noverwritten) and its public key to stdout. With -y, prints the public key of\nthe existing private key file KEY (never the private key).", stderr)
	out := fs.String("o", "", "private key `file` to create (required without -y)")
	pub := fs.Bool("y", false, "print the public key of the private key file given as the argument")
	asJSON := fs.Bool("json", false, "print the public key as JSON")
	printPub := func(k *envelope.PublicKey, file string) {
		if *asJSON {
			printJSON(stdout, map[string]string{"public_key": k.String(), "key_id_b64u": k.KeyID().String(), "private_key_file": file})
			return
		}
		fmt.Fprintln(stdout, k.String())
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *pub {
		if *out != "" {
			errorf(stderr, "keygen: -y and -o exclude each other")
			fs.Usage()
			return exitUsage
		}
		if !wantArgs(fs, stderr, 1, "KEY") {
			return exitUsage
		}
		k, err := readPrivateKey(fs.Arg(0))
		if err != nil {
			errorf(stderr, "keygen: %v", err)
			if isPublicKeyFile(fs.Arg(0)) {
				errorf(stderr, "keygen: %s is a public key; -y takes the private key file", fs.Arg(0))
			}
			return exitCannot
		}
		printPub(k.Public(), fs.Arg(0))
		return exitOK
	}
	if !requireFlags(fs, stderr, "o") || !wantArgs(fs, stderr, 0, "") {
		return exitUsage
	}
	k, err := envelope.GenerateKey()
	if err != nil {
		return fail(stderr, "keygen", exitCannot, err)
	}
	text, err := k.AppendSecretKeyFile(nil)
	if err != nil {
		return fail(stderr, "keygen", exitCannot, err)
	}
	defer sealed.Wipe(text)
	if err := createFile(*out, text, 0o600); err != nil {
		return fail(stderr, "keygen", exitCannot, err)
	}
	printPub(k.Public(), *out)
	return exitOK
}

// readPrivateKey reads a private key file. Errors never quote the file.
func readPrivateKey(path string) (*envelope.PrivateKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// bounded.Read zeroes what it read when it fails.
	b, err := bounded.Read(f, maxKeyFile, path)
	defer sealed.Wipe(b)
	if errors.Is(err, bounded.ErrTooLarge) {
		return nil, fmt.Errorf("key file %s is too large", path)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read key file %s", path)
	}
	// The key file framing of the envelope spec (section 5.3): the text
	// and at most one LF; CR and other whitespace are refused.
	k, err := envelope.ParsePrivateKeyFile(b)
	if err != nil {
		return nil, fmt.Errorf("key file %s: malformed private key (want the key text and at most one LF)", path)
	}
	return k, nil
}

// isPublicKeyFile reports whether the file at path holds a public key
// (the text form and at most surrounding whitespace).
func isPublicKeyFile(path string) bool {
	b, err := bounded.ReadFile(path, maxKeyFile)
	if err != nil {
		return false
	}
	_, err = envelope.ParsePublicKey(strings.TrimSpace(string(b)))
	return err == nil
}

// parseRecipients parses comma-separated public keys from flags and one
// key per line (blank lines and # comments ignored) from files.
func parseRecipients(flags, files []string) ([]*envelope.PublicKey, error) {
	var texts []string
	for _, f := range flags {
		for _, s := range strings.Split(f, ",") {
			if s = strings.TrimSpace(s); s != "" {
				texts = append(texts, s)
			}
		}
	}
	for _, path := range files {
		b, err := bounded.ReadFile(path, maxKeyFile)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			texts = append(texts, line)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
	}
	if len(texts) == 0 {
		return nil, fmt.Errorf("no recipient")
	}
	out := make([]*envelope.PublicKey, 0, len(texts))
	for _, t := range texts {
		if strings.HasPrefix(t, envelope.PrivateKeyPrefix) {
			return nil, fmt.Errorf("a private key was given as a recipient")
		}
		k, err := envelope.ParsePublicKey(t)
		if err != nil {
			return nil, fmt.Errorf("recipient %q: %w", safetext.Clip(t, 80), err)
		}
		out = append(out, k)
	}
	return out, nil
}
