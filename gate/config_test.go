package gate

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawea/attester/internal/testjson"
	"github.com/clawea/attester/schema/confdoc"
)

func TestParseDefaults(t *testing.T) {
	c := mustParse(t, `{}`)
	if c.EnforceVerification {
		t.Error("enforceVerification defaults to true")
	}
	if !slices.Equal(c.GatedTools, []string{"exec", "write", "edit", "apply_patch", "message", "gateway", "sessions_spawn", "sessions_send"}) {
		t.Errorf("gatedTools default = %v", c.GatedTools)
	}
	if ev := mergeVerifier(c.Verifier, nil); ev.Enabled || ev.FailMode != failDeny {
		t.Errorf("verifier default = %+v", ev)
	}
	c = mustParse(t, `{"tools":{"verifier":{"enabled":true,"webhook":{"url":"https://v.example/verify"},
		"telegram":{"enabled":true,"botToken":"123:abc","chatId":42,"allowedUserIds":[7,"8"]}}}}`)
	if c.Verifier.Webhook.Timeout != 30*time.Second || c.Verifier.Telegram.Timeout != 120*time.Second {
		t.Errorf("timeouts = %v %v", c.Verifier.Webhook.Timeout, c.Verifier.Telegram.Timeout)
	}
	if c.Verifier.Telegram.ChatID != "42" || !slices.Equal(c.Verifier.Telegram.AllowedUserIDs, []int64{7, 8}) {
		t.Errorf("telegram = %+v", c.Verifier.Telegram)
	}
}

func TestParseFull(t *testing.T) {
	c := mustParse(t, `{
	  "agents": {
	    "defaults": {"sig": {"enforceVerification": true, "gatedTools": ["EXEC", " bash ", "Write", "group:messaging"]}},
	    "list": [
	      {"id": "worker", "tools": {"profile": "coding", "deny": ["process"], "verifier": {"failMode": "allow"}},
	       "sig": {"gatedTools": ["apply-patch"]}}
	    ]
	  },
	  "tools": {
	    "profile": "full", "allow": ["group:fs", "exec", "web_*"], "deny": ["browser"],
	    "verifier": {"enabled": true, "scope": {"include": ["exec", "write"]}, "failMode": "deny",
	      "webhook": {"url": "https://v.example/verify", "timeout": 5, "headers": {"authorization": "Bearer t0k3n"}, "secret": "s3cr3t"}}
	  }
	}`)
	if !c.EnforceVerification || !slices.Equal(c.GatedTools, []string{"exec", "write", "group:messaging"}) {
		t.Errorf("sig = %v %v", c.EnforceVerification, c.GatedTools)
	}
	a := c.Agents[0]
	if a.ID != "worker" || a.Tools.Profile != "coding" || !slices.Equal(a.Sig.GatedTools, []string{"apply_patch"}) {
		t.Errorf("agent = %+v", a)
	}
	if _, ok := c.Verifier.Webhook.Headers["Authorization"]; !ok {
		t.Errorf("header names not canonical: %v", c.Verifier.Webhook.Headers)
	}
	if c.Verifier.Webhook.Timeout != 5*time.Second {
		t.Errorf("timeout %v", c.Verifier.Webhook.Timeout)
	}
}

func TestParseErrorsNameTheKey(t *testing.T) {
	const wh = `"webhook":{"url":"https://v.example/x"}`
	cases := []struct {
		doc  string
		key  string
		want error
	}{
		{`[]`, "", errWrongType},
		{`{"a":1,"a":2}`, "a", errWrongType}, // the repeated key
		{`{"tools":{"verifier":{"scope":{"include":["exec"],"exclude":["read"]}}}}`, "tools.verifier.scope", errConflict},
		{`{"tools":{"verifier":{"enabeld":true}}}`, "tools.verifier.enabeld", errUnknownKey},
		{`{"models":{}}`, "models", errUnknownKey},
		{`{"agents":{"defaults":{"sig":{"enforceVerification":"yes"}}}}`, "agents.defaults.sig.enforceVerification", errWrongType},
		{`{"agents":{"defaults":{"sig":{"gatedTools":["exec",""]}}}}`, "agents.defaults.sig.gatedTools[1]", errBadValue},
		{`{"agents":{"defaults":{"sig":{"gatedTools":["verify"]}}}}`, "agents.defaults.sig.gatedTools", errBadValue},
		{`{"agents":{"defaults":{"sig":{"gatedTools":["exec;rm"]}}}}`, "agents.defaults.sig.gatedTools[0]", errBadValue},
		{`{"tools":{"allow":["group:nope"]}}`, "tools.allow[0]", errBadValue},
		{`{"tools":{"profile":"admin"}}`, "tools.profile", errBadValue},
		{`{"tools":{"byProvider":{}}}`, "tools.byProvider", errUnknownKey},
		{`{"tools":{"verifier":{"failMode":"open"}}}`, "tools.verifier.failMode", errBadValue},
		{`{"tools":{"verifier":{"enabled":true}}}`, "tools.verifier", errBadValue},
		{`{"tools":{"verifier":{"webhook":{}}}}`, "tools.verifier.webhook.url", errBadValue},
		{`{"tools":{"verifier":{"webhook":{"url":"http://v.example/x"}}}}`, "tools.verifier.webhook.url", errInsecureURL},
		{`{"tools":{"verifier":{"webhook":{"url":"ftp://v.example/x"}}}}`, "tools.verifier.webhook.url", errBadValue},
		{`{"tools":{"verifier":{"webhook":{"url":"https://u:p@v.example/x"}}}}`, "tools.verifier.webhook.url", errBadValue},
		{`{"tools":{"verifier":{"webhook":{"url":"/relative"}}}}`, "tools.verifier.webhook.url", errBadValue},
		{`{"tools":{"verifier":{"webhook":{"url":"https://v.example/x","timeout":0}}}}`, "tools.verifier.webhook.timeout", errBadValue},
		{`{"tools":{"verifier":{"webhook":{"url":"https://v.example/x","timeout":1.5}}}}`, "tools.verifier.webhook.timeout", errWrongType},
		{`{"tools":{"verifier":{"webhook":{"url":"https://v.example/x","timeout":301}}}}`, "tools.verifier.webhook.timeout", errBadValue},
		{`{"tools":{"verifier":{"webhook":{"url":"https://v.example/x","secret":"${VERIFIER_HMAC_SECRET}"}}}}`, "tools.verifier.webhook.secret", errBadValue},
		{`{"tools":{"verifier":{"webhook":{"url":"https://v.example/x","secret":""}}}}`, "tools.verifier.webhook.secret", errBadValue},
		{`{"tools":{"verifier":{"webhook":{"url":"https://v.example/x","headers":{"Content-Type":"x"}}}}}`, `tools.verifier.webhook.headers["Content-Type"]`, errBadValue},
		{`{"tools":{"verifier":{"webhook":{"url":"https://v.example/x","headers":{"X-OpenClaw-Signature":"x"}}}}}`, `tools.verifier.webhook.headers["X-OpenClaw-Signature"]`, errBadValue},
		{`{"tools":{"verifier":{"webhook":{"url":"https://v.example/x","headers":{"A":"x","a":"y"}}}}}`, `tools.verifier.webhook.headers.a`, errConflict},
		{`{"tools":{"verifier":{"webhook":{"url":"https://v.example/x","headers":{"Bad Name":"x"}}}}}`, `tools.verifier.webhook.headers["Bad Name"]`, errBadValue},
		{`{"tools":{"verifier":{"webhook":{"url":"https://v.example/x","headers":{"X-A":"a\r\nX-B: b"}}}}}`, `tools.verifier.webhook.headers["X-A"]`, errBadValue},
		{`{"tools":{"verifier":{"telegram":{"enabled":true,"chatId":"1","allowedUserIds":[1]}}}}`, "tools.verifier.telegram.botToken", errBadValue},
		{`{"tools":{"verifier":{"telegram":{"enabled":true,"botToken":"1:a","allowedUserIds":[1]}}}}`, "tools.verifier.telegram.chatId", errBadValue},
		{`{"tools":{"verifier":{"telegram":{"enabled":true,"botToken":"1:a","chatId":"1"}}}}`, "tools.verifier.telegram.allowedUserIds", errBadValue},
		{`{"tools":{"verifier":{"telegram":{"botToken":"not a token"}}}}`, "tools.verifier.telegram.botToken", errBadValue},
		{`{"tools":{"verifier":{"telegram":{"allowedUserIds":[-1]}}}}`, "tools.verifier.telegram.allowedUserIds[0]", errBadValue},
		{`{"tools":{"verifier":{"telegram":{"allowedUserIds":["12a"]}}}}`, "tools.verifier.telegram.allowedUserIds[0]", errBadValue},
		{`{"tools":{"verifier":{"telegram":{"chatId":"../x"}}}}`, "tools.verifier.telegram.chatId", errBadValue},
		{`{"agents":{"list":[{"tools":{}}]}}`, "agents.list[0].id", errBadValue},
		{`{"agents":{"list":[{"id":"a b"}]}}`, "agents.list[0].id", errBadValue},
		{`{"agents":{"list":[{"id":"a"},{"id":"a"}]}}`, "agents.list[1].id", errConflict},
		// Agent ids are taken as they are: never trimmed or case-folded.
		{`{"agents":{"list":[{"id":"A"}]}}`, "agents.list[0].id", errBadValue},
		{`{"agents":{"list":[{"id":" main "}]}}`, "agents.list[0].id", errBadValue},
		{`{"agents":{"list":[{"id":"\u212aelvin"}]}}`, "agents.list[0].id", errBadValue},
		{`{"agents":{"list":[{"id":"a","sig":{"x":1}}]}}`, "agents.list[0].sig.x", errUnknownKey},
		{`{"agents":{"list":[{"id":"a","tools":{"verifier":{"scope":{"include":[],"exclude":[]}}}}]}}`, "agents.list[0].tools.verifier.scope", errConflict},
		{`{"agents":{"list":[{"id":"a","tools":{"verifier":{"enabled":true}}}]}}`, "agents.list[0].tools.verifier", errBadValue},
		{`{"tools":{"verifier":{` + wh + `,"telegram":{"enabled":"no"}}}}`, "tools.verifier.telegram.enabled", errWrongType},
	}
	for _, tc := range cases {
		t.Run(tc.key+"/"+tc.doc[:min(len(tc.doc), 40)], func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.doc), ParseOptions{})
			if c != nil {
				t.Fatal("config returned with an error")
			}
			if !errors.Is(err, errInvalidConfig) || !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			ce, ok := errors.AsType[*confdoc.ConfigError](err)
			if !ok || ce.Key != tc.key {
				t.Fatalf("key = %q, want %q (%v)", ce.Key, tc.key, err)
			}
			if tc.key != "" && !strings.HasPrefix(err.Error(), "gate config: "+tc.key+": ") {
				t.Fatalf("message %q does not name the key", err)
			}
		})
	}
	// The mutually-exclusive message is exactly the documented one.
	_, err := ParseConfig([]byte(`{"tools":{"verifier":{"scope":{"include":["exec"],"exclude":["read"]}}}}`), ParseOptions{})
	if err.Error() != "gate config: tools.verifier.scope: include and exclude are mutually exclusive" {
		t.Fatalf("message = %q", err)
	}
	if _, err := ParseConfig(bytes.Repeat([]byte(" "), maxConfigBytes+1), ParseOptions{}); !errors.Is(err, errConfigTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
}

func TestDevelopmentHTTP(t *testing.T) {
	var logs bytes.Buffer
	doc := `{"tools":{"verifier":{"webhook":{"url":"http://127.0.0.1:9/v"}}}}`
	c, err := ParseConfig([]byte(doc), ParseOptions{Development: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil || !c.Development {
		t.Fatalf("development http: %v", err)
	}
	if !strings.Contains(logs.String(), "development mode") {
		t.Fatalf("no warning logged: %q", logs.String())
	}
	prod := mustParse(t, `{"tools":{"verifier":{"webhook":{"url":"https://127.0.0.1:9/v"}}}}`)
	dev := mustParse(t, `{"tools":{"verifier":{"webhook":{"url":"https://127.0.0.1:9/v"}}}}`, ParseOptions{Development: true})
	if prod.policyHash() == dev.policyHash() {
		t.Fatal("development mode is not committed in the policy hash")
	}
}

func TestForeignKeys(t *testing.T) {
	doc := `{"channels":{},"agents":{"defaults":{"model":"x","sig":{"enforceVerification":true}},
		"list":[{"id":"a","workspace":"/w","tools":{"elevated":{},"deny":["exec"]}}]},"tools":{"web":{}}}`
	if _, err := ParseConfig([]byte(doc), ParseOptions{}); !errors.Is(err, errUnknownKey) {
		t.Fatalf("strict mode accepted foreign keys: %v", err)
	}
	c, err := ParseConfig([]byte(doc), ParseOptions{AllowForeignKeys: true})
	if err != nil || !c.EnforceVerification || !slices.Equal(c.Agents[0].Tools.Deny, []string{"exec"}) {
		t.Fatalf("foreign keys: %v %+v", err, c)
	}
	// Owned objects stay strict, and unimplemented policy keys are refused.
	for _, d := range []string{
		`{"agents":{"defaults":{"sig":{"enforceVerificaton":true}}}}`,
		`{"tools":{"verifier":{"webhook":{"url":"https://a.example","sekret":"x"}}}}`,
		`{"tools":{"alsoAllow":["exec"]}}`,
		`{"agents":{"list":[{"id":"a","tools":{"byProvider":{}}}]}}`,
	} {
		if _, err := ParseConfig([]byte(d), ParseOptions{AllowForeignKeys: true}); !errors.Is(err, errUnknownKey) {
			t.Errorf("%s: %v", d, err)
		}
	}
}

func TestFailModeMostRestrictiveWins(t *testing.T) {
	str := func(m failMode) string {
		if m == "" {
			return ""
		}
		return `"failMode":"` + string(m) + `",`
	}
	for _, tc := range []struct {
		global, agent, want failMode
	}{
		{"", "", failDeny},
		{"", failAllow, failDeny},
		{failDeny, failAllow, failDeny},
		{failAllow, failDeny, failDeny},
		{failAllow, "", failAllow},
		{failAllow, failAllow, failAllow},
		{failDeny, "", failDeny},
	} {
		doc := fmt.Sprintf(`{"tools":{"verifier":{%s"enabled":true,"webhook":{"url":"https://v.example"}}},
			"agents":{"list":[{"id":"a","tools":{"verifier":{%s"enabled":true}}}]}}`, str(tc.global), str(tc.agent))
		c := mustParse(t, doc)
		if got := mergeVerifier(c.Verifier, c.Agents[0].Verifier).FailMode; got != tc.want {
			t.Errorf("global %q agent %q: got %q want %q", tc.global, tc.agent, got, tc.want)
		}
	}
}

const secretDoc = `{"tools":{"verifier":{"enabled":true,"failMode":"deny",
	"webhook":{"url":"https://v.example/verify","headers":{"Authorization":"Bearer HEADERSECRET-7f3a"},"secret":"HMACSECRET-91cd"},
	"telegram":{"enabled":true,"botToken":"123456:BOTTOKENSECRET-x1","chatId":"-100","allowedUserIds":[5]}}}}`

var secretValues = []string{"HEADERSECRET-7f3a", "HMACSECRET-91cd", "BOTTOKENSECRET-x1"}

func assertNoSecret(t *testing.T, where, s string) {
	t.Helper()
	for _, v := range secretValues {
		if strings.Contains(s, v) {
			t.Fatalf("%s contains the secret %q: %s", where, v, s)
		}
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	c := mustParse(t, secretDoc)
	js := testjson.Marshal(t, c)
	var logs bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&logs, nil))
	l.Info("config", "cfg", c, "webhook", c.Verifier.Webhook, "telegram", *c.Verifier.Telegram, "secret", c.Verifier.Webhook.Secret)
	for where, s := range map[string]string{
		"String":      c.String(),
		"%v":          fmt.Sprintf("%v", *c),
		"%+v":         fmt.Sprintf("%+v", *c),
		"%#v":         fmt.Sprintf("%#v", *c),
		"webhook %+v": fmt.Sprintf("%+v %#v", *c.Verifier.Webhook, c.Verifier.Webhook.Headers),
		"telegram %v": fmt.Sprintf("%+v %s %q %x", *c.Verifier.Telegram, c.Verifier.Telegram.BotToken, c.Verifier.Telegram.BotToken, c.Verifier.Telegram.BotToken),
		"json":        string(js),
		"slog":        logs.String(),
		"policy":      string(c.policyDocument()),
	} {
		assertNoSecret(t, where, s)
	}
	// Errors raised after a secret was read do not carry it either.
	bad := strings.Replace(secretDoc, `"chatId":"-100"`, `"chatId":"a/b"`, 1)
	_, err := ParseConfig([]byte(bad), ParseOptions{})
	if err == nil {
		t.Fatal("bad chat id accepted")
	}
	assertNoSecret(t, "error", err.Error())
	bad = strings.Replace(secretDoc, `"Bearer HEADERSECRET-7f3a"`, `"Bearer HEADERSECRET-7f3a\u0000"`, 1)
	_, err = ParseConfig([]byte(bad), ParseOptions{})
	if err == nil {
		t.Fatal("NUL in header accepted")
	}
	assertNoSecret(t, "error", err.Error())
}

func TestPolicyHash(t *testing.T) {
	c := mustParse(t, secretDoc)
	h := c.policyHash()
	if len(h) != 43 || h != mustParse(t, secretDoc).policyHash() {
		t.Fatalf("hash %q not stable", h)
	}
	// Secrets are committed: a different secret is a different policy.
	for _, v := range secretValues {
		other := mustParse(t, strings.Replace(secretDoc, v, v+"X", 1))
		if other.policyHash() == h {
			t.Errorf("changing %s does not change the hash", v)
		}
	}
	// Key order and spelling variants of the same policy hash the same.
	a := mustParse(t, `{"tools":{"deny":["Exec","bash"],"profile":"coding"}}`)
	b := mustParse(t, `{"tools":{"profile":"coding","deny":["exec"]}}`)
	if a.policyHash() != b.policyHash() {
		t.Error("equivalent configs hash differently")
	}
	if a.policyHash() == mustParse(t, `{"tools":{"profile":"coding"}}`).policyHash() {
		t.Error("deny list not committed")
	}
	// The document shape is pinned (docs/spec/gate-v1.md).
	want := `{"agents":[],"defaults":{"enforceVerification":false,"gatedTools":["exec","write","edit","apply_patch","message","gateway","sessions_spawn","sessions_send"]},"development":false,"policy_version":"clawea.gate.policy.v1","tools":{"allow":[],"deny":[],"profile":"full"},"verifier":{"enabled":false,"failMode":"deny","scope":null,"telegram":null,"webhook":null}}`
	if got := string(mustParse(t, `{}`).policyDocument()); got != want {
		t.Fatalf("policy document\n got %s\nwant %s", got, want)
	}
	// Vectors of docs/spec/gate-v1.md.
	if got := mustParse(t, `{}`).policyHash(); got != "5wRJ5nC-5_EfTZsunr3nuNIUqELHXbSpH8zOooosEJM" {
		t.Fatalf("policy hash of {} = %s", got)
	}
	if got := newSecret("s3cr3t").commitment(); got != "DIGN2D9jchSOAP--u6eBGD7Sp-Qqu0_TytzKMKtXjIg" {
		t.Fatalf("commitment = %s", got)
	}
	if !strings.Contains(string(c.policyDocument()), `"secret":{"sha256_b64u":"`+newSecret("HMACSECRET-91cd").commitment()+`"}`) {
		t.Fatalf("secret commitment missing: %s", c.policyDocument())
	}
}
