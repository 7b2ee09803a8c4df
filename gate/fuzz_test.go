package gate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/clawea/attester/schema/confdoc"
)

// encodeConfig writes c back as a config document, secrets included (test
// only). ParseConfig(encodeConfig(c)) must give c back.
func encodeConfig(c *Config) []byte {
	ver := func(v *verifierConfig) map[string]any {
		m := map[string]any{}
		if v.Enabled != nil {
			m["enabled"] = *v.Enabled
		}
		if v.FailMode != "" {
			m["failMode"] = string(v.FailMode)
		}
		if v.Scope != nil {
			m["scope"] = v.Scope.doc()
		}
		if w := v.Webhook; w != nil {
			wm := map[string]any{"url": w.URL, "timeout": int64(w.Timeout.Seconds())}
			if w.Secret.isSet() {
				wm["secret"] = w.Secret.value()
			}
			if w.Headers != nil {
				h := map[string]string{}
				for k, s := range w.Headers {
					h[k] = s.value()
				}
				wm["headers"] = h
			}
			m["webhook"] = wm
		}
		if t := v.Telegram; t != nil {
			tm := map[string]any{"enabled": t.Enabled, "timeout": int64(t.Timeout.Seconds())}
			if t.BotToken.isSet() {
				tm["botToken"] = t.BotToken.value()
			}
			if t.ChatID != "" {
				tm["chatId"] = t.ChatID
			}
			if t.AllowedUserIDs != nil {
				tm["allowedUserIds"] = t.AllowedUserIDs
			}
			m["telegram"] = tm
		}
		return m
	}
	tools := func(tp toolPolicy, v *verifierConfig) map[string]any {
		m := map[string]any{}
		if tp.Profile != "" {
			m["profile"] = tp.Profile
		}
		if tp.Allow != nil {
			m["allow"] = tp.Allow
		}
		if tp.Deny != nil {
			m["deny"] = tp.Deny
		}
		if v != nil {
			m["verifier"] = ver(v)
		}
		return m
	}
	agents := []any{}
	for _, a := range c.Agents {
		am := map[string]any{"id": a.ID, "tools": tools(a.Tools, a.Verifier)}
		sig := map[string]any{}
		if a.Sig.EnforceVerification != nil {
			sig["enforceVerification"] = *a.Sig.EnforceVerification
		}
		if a.Sig.GatedTools != nil {
			sig["gatedTools"] = a.Sig.GatedTools
		}
		am["sig"] = sig
		agents = append(agents, am)
	}
	doc := map[string]any{
		"agents": map[string]any{
			"defaults": map[string]any{"sig": map[string]any{"enforceVerification": c.EnforceVerification, "gatedTools": c.GatedTools}},
			"list":     agents,
		},
		"tools": tools(c.Tools, &c.Verifier),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(doc)
	return buf.Bytes()
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(secretDoc))
	f.Add([]byte(enforced))
	f.Add([]byte(`{"tools":{"profile":"coding","allow":["group:fs","web_*"],"deny":["bash"],"verifier":{"enabled":true,"scope":{"exclude":["read"]},"failMode":"allow","webhook":{"url":"https://v.example/x?y=1","timeout":3,"headers":{"x-a":"b"}}}},"agents":{"list":[{"id":"a","tools":{"verifier":{"failMode":"deny","telegram":{"enabled":false}}}}]}}`))
	f.Add([]byte(`{"tools":{"verifier":{"scope":{"include":["exec"],"exclude":["read"]}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, opts := range []ParseOptions{{}, {Development: true, AllowForeignKeys: true}} {
			c, err := ParseConfig(data, opts)
			if err != nil {
				if _, ok := errors.AsType[*confdoc.ConfigError](err); c != nil || !ok || !errors.Is(err, errInvalidConfig) {
					t.Fatalf("bad error shape: %v", err)
				}
				continue
			}
			h := c.policyHash()
			if len(h) != 43 {
				t.Fatalf("policy hash %q", h)
			}
			// Round trip: the re-encoded config parses to the same config
			// and the same policy hash, and re-encodes identically.
			enc := encodeConfig(c)
			c2, err := ParseConfig(enc, ParseOptions{Development: opts.Development})
			if err != nil {
				t.Fatalf("re-encoded config rejected: %v\n%s", err, enc)
			}
			if c2.policyHash() != h {
				t.Fatalf("policy hash changed on round trip\n%s\n%s", c.policyDocument(), c2.policyDocument())
			}
			if !bytes.Equal(encodeConfig(c2), enc) {
				t.Fatalf("re-encoding not stable")
			}
			// The gate can be built from every accepted config.
			if _, err := New(Options{Config: c, Audit: discardAudit(t), HTTPClient: nopClient}); err != nil {
				t.Fatalf("New: %v", err)
			}
			// No configured secret appears in String or the policy document.
			for _, s := range configSecrets(c) {
				if len(s) >= 8 && (strings.Contains(c.String(), s) || bytes.Contains(c.policyDocument(), []byte(s))) {
					t.Fatalf("secret leaked")
				}
			}
			_ = fmt.Sprint(c)
		}
	})
}

func configSecrets(c *Config) []string {
	var out []string
	add := func(v *verifierConfig) {
		if v == nil {
			return
		}
		if w := v.Webhook; w != nil {
			out = append(out, w.Secret.value())
			for _, h := range w.Headers {
				out = append(out, h.value())
			}
		}
		if tg := v.Telegram; tg != nil {
			out = append(out, tg.BotToken.value())
		}
	}
	add(&c.Verifier)
	for _, a := range c.Agents {
		add(a.Verifier)
	}
	return out
}

func TestEncodeConfigRoundTrip(t *testing.T) {
	for _, doc := range []string{`{}`, secretDoc, enforced} {
		c := mustParse(t, doc)
		c2 := mustParse(t, string(encodeConfig(c)))
		if c.policyHash() != c2.policyHash() {
			t.Fatalf("round trip changed %s", doc)
		}
		if !reflect.DeepEqual(c.Verifier.Webhook, c2.Verifier.Webhook) {
			t.Fatalf("webhook changed")
		}
	}
}
