#!/usr/bin/env bash
# Capture what a released OpenClaw really sends to the model for one turn in
# a workspace (docs/spec/recipe-openclaw-release.md section 3), without any
# model running: OpenClaw's model provider is capture-server.mjs on
# loopback, which records the first request verbatim and answers with a
# plain text (no tool call, so no tool runs either).
#
#   capture.sh --openclaw-dir DIR --workspace WS --out CAPTURE.json [--model PROVIDER/MODEL] [--config FILE]
#
# --model names the model provider and model the capture server stands in
# for (default capture/capture): OpenClaw writes it into the prompt's model
# identity line, so capture with the provider/model the agent will run with.
#
# --config is the author's own openclaw.json (JSON5, read with the json5
# package the OpenClaw install itself depends on): the capture runs
# with it, so its tool policy, channels, skills and plugins shape the prompt
# as in production. It is changed only where it must be: the --model
# provider points at the capture server and is the primary model, the
# workspace is WS, update checks are off, and the clawea plugin is disabled
# (it would replace the very prompt being captured). Without --config a
# minimal config is used (no plugins, tools.toolSearch off).
# DIR holds node_modules/openclaw (hack/e2e-openclaw/install.sh's
# openclaw-VERSION directory); node >= 24 must be first on PATH. The
# workspace is used in place (OpenClaw may seed missing bootstrap files into
# it); the capture records the bootstrap files as they are after the turn.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oc_dir= ws= out= model=capture/capture config=
while [ $# -gt 0 ]; do
	case $1 in
	--openclaw-dir) oc_dir=$2; shift 2 ;;
	--workspace) ws=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--model) model=$2; shift 2 ;;
	--config) config=$2; shift 2 ;;
	*) echo "capture.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
[ -n "$oc_dir" ] && [ -n "$ws" ] && [ -n "$out" ] || { echo "capture.sh: --openclaw-dir, --workspace and --out are required" >&2; exit 2; }
case $model in
*/*) provider=${model%%/*} model_id=${model#*/} ;;
*) echo "capture.sh: --model wants PROVIDER/MODEL" >&2; exit 2 ;;
esac
[[ $provider =~ ^[A-Za-z0-9_-]+$ && $model_id =~ ^[A-Za-z0-9._:/-]+$ ]] || { echo "capture.sh: --model: unexpected characters" >&2; exit 2; }
oc_dir=$(cd "$oc_dir" && pwd)
ws=$(cd "$ws" && pwd)
openclaw=$oc_dir/node_modules/.bin/openclaw
[ -x "$openclaw" ] || { echo "capture.sh: no openclaw in $oc_dir" >&2; exit 1; }

# The work directory holds the captured request (the whole prompt, as
# secret as a plaintext pack) and, with --config, a copy of the author's
# config (API keys included): keep it in memory (/dev/shm) when the system
# has one, so a killed capture leaves nothing on disk.
tmpbase=/tmp
[ -d /dev/shm ] && [ -w /dev/shm ] && tmpbase=/dev/shm
work=$(mktemp -d "$tmpbase/clawea-capture.XXXXXX")
srv=
cleanup() { [ -n "$srv" ] && kill "$srv" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

node "$here/capture-server.mjs" --out "$work/request.json" --port-file "$work/port" &
srv=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { echo "capture.sh: the capture server did not start" >&2; exit 1; }
port=$(cat "$work/port")

[ -z "$config" ] || [ -f "$config" ] || { echo "capture.sh: --config $config: no such file" >&2; exit 2; }
node - "$work/openclaw.json" "$port" "$ws" "$provider" "$model_id" "$config" "$oc_dir/node_modules/openclaw/package.json" <<'JS'
const fs = require("fs");
const [file, port, ws, provider, model, configFile, ocPackage] = process.argv.slice(2);
const endpoint = { baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: "capture-no-secret", api: "openai-completions", models: [{ id: model, name: model }] };
let c;
if (configFile) {
  // OpenClaw's config is JSON5: parse it with OpenClaw's own json5.
  const JSON5 = require("module").createRequire(ocPackage)("json5");
  c = JSON5.parse(fs.readFileSync(configFile, "utf8"));
  if (c === null || typeof c !== "object" || Array.isArray(c)) throw new Error("capture: --config is not a JSON object");
  c.update = { ...(c.update ?? {}), checkOnStart: false };
  c.models = { ...(c.models ?? {}) };
  c.models.providers = { ...(c.models.providers ?? {}), [provider]: { ...(c.models.providers?.[provider] ?? {}), ...endpoint } };
  c.agents = { ...(c.agents ?? {}) };
  c.agents.defaults = { ...(c.agents.defaults ?? {}), workspace: ws };
  c.agents.defaults.model = { ...(c.agents.defaults.model ?? {}), primary: `${provider}/${model}` };
  if (c.plugins?.entries?.clawea) c.plugins.entries.clawea = { ...c.plugins.entries.clawea, enabled: false };
} else {
  c = {
    update: { checkOnStart: false },
    models: { providers: { [provider]: endpoint } },
    agents: { defaults: { model: { primary: `${provider}/${model}` }, workspace: ws } },
    tools: { toolSearch: false },
  };
}
fs.writeFileSync(file, JSON.stringify(c), { mode: 0o600 });
JS
OPENCLAW_NO_AUTO_UPDATE=1 OPENCLAW_CONFIG_PATH=$work/openclaw.json OPENCLAW_STATE_DIR=$work/state timeout 180 \
	"$openclaw" agent --local --agent main --message "capture" --json >"$work/turn.json" 2>"$work/turn.err" || {
	tail -20 "$work/turn.err" >&2
	echo "capture.sh: the OpenClaw turn failed" >&2
	exit 1
}
[ -s "$work/request.json" ] || { echo "capture.sh: OpenClaw sent no model request" >&2; exit 1; }

node - "$work/request.json" "$oc_dir/node_modules/openclaw/package.json" "$ws" "$out" <<'JS'
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const [reqFile, pkgFile, ws, out] = process.argv.slice(2);
const body = fs.readFileSync(reqFile);
const req = JSON.parse(body.toString("utf8"));
const sys = req.messages?.[0];
if (!sys || sys.role !== "system" || typeof sys.content !== "string") throw new Error("capture: the first message is not one system text");
const tools = (req.tools ?? []).map((t) => {
  if (t.type !== "function" || !t.function || typeof t.function.name !== "string") throw new Error("capture: a tool is not a function");
  return { name: t.function.name, description: t.function.description ?? "", parameters: t.function.parameters ?? {} };
});
// The bootstrap file names OpenClaw reads from the workspace root.
const names = ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md", "HEARTBEAT.md", "BOOTSTRAP.md", "MEMORY.md"];
const files = [];
for (const name of names) {
  const p = path.join(ws, name);
  if (fs.existsSync(p) && fs.statSync(p).isFile()) files.push({ name, content: fs.readFileSync(p, "utf8") });
}
const capture = {
  capture_version: "1",
  openclaw_version: JSON.parse(fs.readFileSync(pkgFile, "utf8")).version,
  request_sha256_b64u: crypto.createHash("sha256").update(body).digest("base64url"),
  system_prompt: sys.content,
  tools,
  bootstrap_files: files,
};
fs.writeFileSync(out, JSON.stringify(capture, null, 1), { mode: 0o600 });
JS
echo "capture.sh: wrote $out" >&2
