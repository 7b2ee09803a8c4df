// Package audittest holds the audit entries that the tests of the audit
// record format (wire/auditrec) and of the log writer (gate/audit) write.
// Only tests import it (internal/layers enforces that).
package audittest

import (
	"fmt"

	"github.com/clawea/attester/schema/b64u"
	"github.com/clawea/attester/wire/auditrec"
)

// Entry is the i-th entry of a test log: four entries a turn, every third
// one denied, and a reason with characters JSON and JCS escape.
func Entry(i int) auditrec.Entry {
	dec := auditrec.Allow
	if i%3 == 0 {
		dec = auditrec.Deny
	}
	return auditrec.Entry{
		Session:    "agent:main:main",
		Turn:       fmt.Sprintf("turn-%d", i/4),
		Agent:      "main",
		Tool:       "exec",
		ParamsHash: b64u.SHA256([]byte(fmt.Sprint(i))),
		Stage:      "tool_policy",
		Decision:   dec,
		Reason:     fmt.Sprintf("reason %d <&> \u2028 é", i),
	}
}
