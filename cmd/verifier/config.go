package main

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/clawea/attester/schema/bounded"
	"github.com/clawea/attester/verify"
	"github.com/clawea/attester/verify/platform"
)

// Limits on what a configuration may hold.
const (
	maxPolicies        = 256
	maxCollateralFiles = 4096
)

// sources are where the policies and the collateral come from. All are
// re-read when any of their files changes.
type sources struct {
	// PolicyFile is loaded as the policy named "default".
	PolicyFile string
	// PolicyDir holds NAME.json policy files (docs/spec/verifier-api.md,
	// section 4); names starting with "." are ignored (Kubernetes ConfigMap
	// mounts keep their bookkeeping there).
	PolicyDir string
	// CollateralDir is read with platform.LoadCollateralDir.
	CollateralDir string
}

// snapshot is one consistent configuration. It is immutable once built.
type snapshot struct {
	policies    map[string]*verify.Policy
	collateral  *platform.Collateral
	fingerprint [32]byte
	loadedAt    time.Time
}

// ErrConfig is wrapped by every configuration loading error.
var ErrConfig = errors.New("verifier: configuration")

// fingerprint hashes the name, size and modification time of every file
// the sources consist of, following symbolic links (a ConfigMap update
// swaps a link). A changed fingerprint triggers a reload.
func (s sources) fingerprint() ([32]byte, error) {
	h := sha256.New()
	add := func(parts ...string) {
		for _, p := range parts {
			var l [8]byte
			binary.BigEndian.PutUint64(l[:], uint64(len(p)))
			h.Write(l[:])
			h.Write([]byte(p))
		}
	}
	stat := func(path string) error {
		fi, err := os.Stat(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				add(path, "absent")
				return nil
			}
			return err
		}
		add(path, fmt.Sprint(fi.Size(), fi.ModTime().UnixNano(), fi.Mode()))
		return nil
	}
	if s.PolicyFile != "" {
		if err := stat(s.PolicyFile); err != nil {
			return [32]byte{}, err
		}
	}
	if s.PolicyDir != "" {
		names, err := policyFiles(s.PolicyDir)
		if err != nil {
			return [32]byte{}, err
		}
		for _, n := range names {
			if err := stat(filepath.Join(s.PolicyDir, n)); err != nil {
				return [32]byte{}, err
			}
		}
	}
	if s.CollateralDir != "" {
		n := 0
		err := filepath.WalkDir(s.CollateralDir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if n++; n > maxCollateralFiles {
				return fmt.Errorf("more than %d entries", maxCollateralFiles)
			}
			if d.IsDir() && path != s.CollateralDir && strings.HasPrefix(d.Name(), "..") {
				return filepath.SkipDir // a ConfigMap's timestamped copy: its files are reached through the links
			}
			if d.IsDir() {
				return nil
			}
			return stat(path)
		})
		if err != nil {
			return [32]byte{}, fmt.Errorf("collateral: %w", err)
		}
	}
	var out [32]byte
	h.Sum(out[:0])
	return out, nil
}

// policyFiles lists the NAME.json files of dir, sorted.
func policyFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".json") {
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// load reads every source. Any error leaves nothing loaded.
func (s sources) load(now time.Time) (*snapshot, error) {
	fp, err := s.fingerprint()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	snap := &snapshot{policies: map[string]*verify.Policy{}, fingerprint: fp, loadedAt: now}
	if s.PolicyFile != "" {
		p, err := readPolicy(s.PolicyFile)
		if err != nil {
			return nil, err
		}
		snap.policies[DefaultPolicy] = p
	}
	if s.PolicyDir != "" {
		names, err := policyFiles(s.PolicyDir)
		if err != nil {
			return nil, fmt.Errorf("%w: policy directory: %w", ErrConfig, err)
		}
		if len(names) > maxPolicies {
			return nil, fmt.Errorf("%w: policy directory: %d policies, limit %d", ErrConfig, len(names), maxPolicies)
		}
		for _, n := range names {
			name := strings.TrimSuffix(n, ".json")
			if !policyName.MatchString(name) {
				return nil, fmt.Errorf("%w: policy file %q: the name is not a policy name", ErrConfig, n)
			}
			if _, dup := snap.policies[name]; dup {
				return nil, fmt.Errorf("%w: policy %q is defined twice", ErrConfig, name)
			}
			p, err := readPolicy(filepath.Join(s.PolicyDir, n))
			if err != nil {
				return nil, err
			}
			snap.policies[name] = p
		}
	}
	if len(snap.policies) == 0 {
		return nil, fmt.Errorf("%w: no policy", ErrConfig)
	}
	if s.CollateralDir != "" {
		c, err := platform.LoadCollateralDir(s.CollateralDir)
		if err != nil {
			return nil, fmt.Errorf("%w: collateral: %w", ErrConfig, err)
		}
		snap.collateral = c
	}
	return snap, nil
}

func readPolicy(path string) (*verify.Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: policy: %w", ErrConfig, err)
	}
	defer f.Close()
	raw, err := bounded.Read(f, verify.MaxPolicyBytes, filepath.Base(path))
	if errors.Is(err, bounded.ErrTooLarge) {
		// As ParsePolicy refuses an oversized policy given in memory.
		return nil, fmt.Errorf("%w: policy %s: %w: %w", ErrConfig, filepath.Base(path), verify.ErrPolicyFile, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: policy %s: %w", ErrConfig, filepath.Base(path), err)
	}
	p, err := verify.ParsePolicy(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: policy %s: %w", ErrConfig, filepath.Base(path), err)
	}
	return p, nil
}
