// The rebuild worker (this file and rebuild_*.go) opens prompt packs and rebuilds their prompts in a
// short-lived worker process, so that the long-lived attester never holds
// pack plaintext or prompt text outside sealed buffers.
//
// Opening a pack parses its plaintext into Go strings, the recipe
// concatenates strings and the report is computed with encoding/json: all of
// it on a garbage-collected heap that is not zeroed when freed. A rebuilder
// does that work in a child process (the attester's own binary, started
// with the hidden argument workerArg) that exits as soon as it is done, so
// the heap copies die with it. The parent passes the child
//
//   - a unix SOCK_SEQPACKET socket (fd 3), on which the parent sends the
//     HPKE identity key as the descriptor of a sealed buffer (mapped
//     read-only by the child) and the child answers,
//   - on stdin: a length-prefixed JSON header (manifest, expected report
//     hash, trusted template hashes, sizes) and the ciphertext pack; none of
//     it is secret.
//
// The key travels over the socket rather than as an inherited descriptor so
// that it enters the child's descriptor table only when the child receives
// it, after it has made itself non-dumpable: between exec and
// PR_SET_DUMPABLE any process of the same uid could open an inherited
// descriptor through /proc/<pid>/fd.
//
// The child opens the pack, checks the templates, rebuilds the prompt,
// compares the report hash, copies the prompt into a new shareable sealed
// buffer and sends its descriptor back (SCM_RIGHTS) with the non-secret
// metadata as JSON. The parent maps the descriptor (sealed.MapShared) and
// never decodes plaintext. A refusal comes back as a code from a fixed
// table (and the template name for template errors), never as free text, and
// is turned into an error that wraps the same sentinel as an in-process
// rebuild would, so callers map it to the same status.
//
// The worker protocol is internal to one binary: both ends are the same
// build. It is specified in docs/spec/sealed-memory.md section 2.7.

package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/clawea/attester/promptpack"
	"github.com/clawea/attester/promptpack/admission"
	"github.com/clawea/attester/promptpack/envelope"
	"github.com/clawea/attester/promptpack/recipe/openclawsig"
	"github.com/clawea/attester/schema/safetext"
	"github.com/clawea/attester/sealed"
)

// workerArg is the hidden first argument that starts the worker mode of the
// attester binary. The worker refuses to run unless it also finds workerEnv
// set to workerEnvValue and descriptor 3 a SOCK_SEQPACKET socket.
const (
	workerArg      = "__rebuild"
	workerEnv      = "CLAWEA_ATTESTER_WORKER"
	workerEnvValue = "rebuild-v1"
	sockFD         = 3
	// keyMsg is the payload of the message that carries the key.
	keyMsg = "key"
)

// Limits of the protocol.
const (
	// maxHeader leaves room for an admission policy (at most
	// admission.MaxPolicySize) beside the manifest and trusted templates.
	maxHeader = 3 << 20
	maxReply  = 64 << 10
	// defaultTimeout bounds one worker from start to answer.
	defaultTimeout = 30 * time.Second
	// defaultMaxWorkers bounds concurrent workers.
	defaultMaxWorkers = 2
)

var (
	// errRebuildBusy: every worker slot stayed taken until the request's context
	// or the timeout ended.
	errRebuildBusy = errors.New("rebuild: all workers are busy")
	// errRebuildWorker: the worker could not be started, timed out, crashed or
	// broke the protocol. It says nothing about the pack.
	errRebuildWorker = errors.New("rebuild: worker failed")
	// errRebuildInvalidPack: the worker refused the pack for a reason that has no
	// more specific sentinel.
	errRebuildInvalidPack = errors.New("rebuild: the pack, its manifest or its bound context is invalid")
)

// workerRefusals is the fixed table of refusal codes. The worker sends the code of
// the first entry its error matches; the parent returns an error wrapping
// that entry's sentinel. Template errors are sent apart, with the name.
var workerRefusals = codedErrors{
	{"no_recipient", envelope.ErrNoMatchingRecipient},
	{"report_mismatch", promptpack.ErrReportMismatch},
	{"unknown_recipe", promptpack.ErrUnknownRecipe},
	{"unknown_pack_version", promptpack.ErrUnknownVersion},
	{"envelope_too_large", envelope.ErrTooLarge},
	{"pack_too_large", promptpack.ErrTooLarge},
	{"lock_failed", sealed.ErrLockFailed},
	{"mode_mismatch", promptpack.ErrModeMismatch},
	{"pack_id_mismatch", promptpack.ErrPackIDMismatch},
	{"manifest_mismatch", envelope.ErrManifestMismatch},
	{"context_mismatch", envelope.ErrContextMismatch},
	{"authentication", envelope.ErrAuthentication},
	{"malformed_envelope", envelope.ErrMalformed},
	{"malformed_pack", promptpack.ErrMalformed},
	{"invalid_report", promptpack.ErrInvalidReport},
	{"invalid_harness", openclawsig.ErrInvalidHarness},
	{"invalid_params", openclawsig.ErrInvalidParams},
}

var workerTemplateKinds = codedErrors{
	{"missing", openclawsig.ErrTemplateMissing},
	{"unsigned", openclawsig.ErrTemplateUnsigned},
	{"modified", openclawsig.ErrTemplateModified},
	{"untrusted", openclawsig.ErrTemplateUntrusted},
}

// maxTemplateName bounds the template name a refusal carries;
// maxAdmissionInput the input an admission refusal names.
const (
	maxTemplateName   = 255
	maxAdmissionInput = 255
)

// workerHeader is the first part of the worker's stdin.
type workerHeader struct {
	Version        int               `json:"v"`
	Manifest       json.RawMessage   `json:"manifest"`
	ReportHashB64u string            `json:"report_hash_b64u"`
	Trusted        map[string]string `json:"trusted"`
	AllowUnlocked  bool              `json:"allow_unlocked"`
	KeyLen         int               `json:"key_len"`
	PackLen        int               `json:"pack_len"`
	// Admission and Runtime are rebuildRequest.Admission and rebuildRequest.Runtime;
	// both or neither.
	Admission json.RawMessage    `json:"admission,omitempty"`
	Runtime   *admission.Runtime `json:"runtime,omitempty"`
}

// workerReply is the worker's answer; on success a descriptor travels with it.
type workerReply struct {
	OK             bool   `json:"ok"`
	PromptBytes    int    `json:"prompt_bytes,omitempty"`
	PromptHashB64u string `json:"prompt_hash_b64u,omitempty"`
	ReportHashB64u string `json:"report_hash_b64u,omitempty"`
	PackID         string `json:"pack_id,omitempty"`
	Chars          int    `json:"chars,omitempty"`
	// ToolSchemasHashB64u is the report's tool_schemas_hash_b64u: the
	// model gateway compares a request's tools with it.
	ToolSchemasHashB64u string `json:"tool_schemas_hash_b64u,omitempty"`
	Code                string `json:"code,omitempty"`
	Template            string `json:"template,omitempty"`
	TemplateKind        string `json:"template_kind,omitempty"`
	// Rule and Input name an admission refusal (code "admission").
	Rule  string `json:"rule,omitempty"`
	Input string `json:"input,omitempty"`
}

// rebuildConfig configures a rebuilder.
type rebuildConfig struct {
	// Key is the HPKE identity key packs are sealed to. newRebuilder copies its
	// secret into a shareable sealed buffer; Key itself is not kept.
	Key *envelope.PrivateKey
	// Exe is the binary to start; "" means /proc/self/exe, the running
	// binary even if the file on disk was replaced.
	Exe string
	// MaxWorkers bounds concurrent workers; 0 means defaultMaxWorkers.
	MaxWorkers int
	// Timeout bounds a worker from start to answer, including the wait for
	// a slot; 0 means defaultTimeout.
	Timeout time.Duration
	// Memory are the options of every sealed buffer (parent and worker).
	Memory sealed.Options
}

// rebuilder starts workers. It is safe for concurrent use.
type rebuilder struct {
	exe     string
	key     *sealed.Buffer
	sem     chan struct{}
	timeout time.Duration
	mem     sealed.Options
}

// newRebuilder copies the identity key into a shareable sealed buffer.
func newRebuilder(cfg rebuildConfig) (*rebuilder, error) {
	if cfg.Key == nil {
		return nil, errors.New("rebuild: no identity key")
	}
	if cfg.MaxWorkers < 0 || cfg.Timeout < 0 {
		return nil, errors.New("rebuild: negative limit")
	}
	r := &rebuilder{exe: cfg.Exe, timeout: cfg.Timeout, mem: cfg.Memory}
	if r.exe == "" {
		r.exe = "/proc/self/exe"
	}
	if r.timeout == 0 {
		r.timeout = defaultTimeout
	}
	n := cfg.MaxWorkers
	if n == 0 {
		n = defaultMaxWorkers
	}
	r.sem = make(chan struct{}, n)
	text, err := cfg.Key.AppendSecretText(nil)
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	defer sealed.Wipe(text)
	r.key, err = sealed.NewShareable(len(text), cfg.Memory)
	if err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	copy(r.key.Bytes(), text)
	return r, nil
}

// close destroys the sealed copy of the key.
func (r *rebuilder) close() { r.key.Destroy() }

// rebuildRequest is one pack to open. Nothing in it is secret.
type rebuildRequest struct {
	Pack       []byte // prompt_pack.enc
	Manifest   []byte // prompt_pack_manifest.json
	ReportHash [32]byte
	Trusted    map[string]string
	// Admission, when set, is an admission policy in canonical form
	// (admission.Policy.Canonical): the worker applies it with Runtime to
	// the opened pack right after the rebuild (AdmitRun), and a refusal
	// comes back as a *admission.RuleError or admission.ErrUnreadable.
	Admission []byte
	Runtime   admission.Runtime
}

// rebuildResult is an opened and verified pack: the prompt in sealed memory and
// its commitments.
type rebuildResult struct {
	// Prompt is the rebuilt system prompt; the caller must Destroy it.
	Prompt         *sealed.Buffer
	PromptHashB64u string
	ReportHashB64u string
	PackID         string
	// Chars is the prompt length in UTF-16 code units, from the report.
	Chars int
	// ToolSchemasHash is H(JCS(tool_schemas)), the report's
	// tool_schemas_hash_b64u (docs/spec/model-gateway.md section 3.3).
	ToolSchemasHash [32]byte
}

// refusalError turns a refusal into an error wrapping its sentinel.
func refusalError(rep workerReply) error {
	switch rep.Code {
	case "admission":
		// Only a known rule code and a short, printable input name pass.
		if !admission.KnownRule(rep.Rule) || len(rep.Input) > maxAdmissionInput || !printableInput(rep.Input) {
			return fmt.Errorf("%w: malformed admission refusal", errRebuildWorker)
		}
		return fmt.Errorf("rebuild: %w", &admission.RuleError{Rule: rep.Rule, Input: rep.Input})
	case "admission_uncheckable":
		return fmt.Errorf("rebuild: %w", admission.ErrUnreadable)
	}
	if rep.Code == "template" {
		if kind, ok := workerTemplateKinds.byCode(rep.TemplateKind); ok {
			return fmt.Errorf("rebuild: %w", &openclawsig.TemplateError{Name: rep.Template, Err: kind})
		}
		return fmt.Errorf("%w: unknown template refusal %q", errRebuildWorker, rep.TemplateKind)
	}
	if sentinel, ok := workerRefusals.byCode(rep.Code); ok {
		return fmt.Errorf("rebuild: %w", sentinel)
	}
	if rep.Code == "invalid" {
		return errRebuildInvalidPack
	}
	return fmt.Errorf("%w: unknown refusal code %q", errRebuildWorker, rep.Code)
}

// refusalReply is the worker's side of refusalError.
func refusalReply(err error) workerReply {
	// Admission first: ErrUnreadable can wrap a params error.
	if re, ok := errors.AsType[*admission.RuleError](err); ok {
		// The input name comes from the pack (a path hint, a tool name):
		// control characters become "?" so that the parent accepts it.
		in := strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
				return '?'
			}
			return r
		}, safetext.Clip(re.Input, maxAdmissionInput-len(safetext.Ellipsis)))
		return workerReply{Code: "admission", Rule: re.Rule, Input: in}
	}
	if errors.Is(err, admission.ErrUnreadable) {
		return workerReply{Code: "admission_uncheckable"}
	}
	if te, ok := errors.AsType[*openclawsig.TemplateError](err); ok {
		if kind, ok := workerTemplateKinds.codeOf(te.Err); ok {
			name := te.Name
			if len(name) > maxTemplateName {
				name = name[:maxTemplateName]
			}
			return workerReply{Code: "template", Template: name, TemplateKind: kind}
		}
	}
	if code, ok := workerRefusals.codeOf(err); ok {
		return workerReply{Code: code}
	}
	return workerReply{Code: "invalid"}
}

// codedErrors is a table of refusal codes and their sentinels, both ways.
type codedErrors []struct {
	code string
	err  error
}

// byCode returns the sentinel of code.
func (t codedErrors) byCode(code string) (error, bool) {
	for _, e := range t {
		if e.code == code {
			return e.err, true
		}
	}
	return nil, false
}

// codeOf returns the code of the first entry whose sentinel err matches.
func (t codedErrors) codeOf(err error) (string, bool) {
	for _, e := range t {
		if errors.Is(err, e.err) {
			return e.code, true
		}
	}
	return "", false
}

// printableInput reports whether s is UTF-8 without control characters.
func printableInput(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			return false
		}
	}
	return true
}
