#!/usr/bin/env bash
# Installs the clawea layout on a confidential VM (deploy/systemd/README.md):
# the attester as "clawea", OpenClaw as "openclaw" (in the group
# "clawea-control", through which it reaches the control socket), and the
# model's tools as "clawtools" behind a private sshd on loopback.
#
#   deploy/systemd/install.sh [--root DIR] [--bin DIR] [--port N]
#
# Run it as root from the checkout after `make build`. In order:
#   1. accounts: the groups and system users, before anything is chowned to them;
#   2. directories, each with its owner and mode;
#   3. files: binaries, units, the sysctl drop-in, the OpenClaw plugin, the
#      example configurations (only where none is installed yet: your edits
#      stay), the sandbox's ssh keys (generated once) and known_hosts.
# It is idempotent: a second run changes nothing but owners and modes that
# drifted, and files that are ours (units, plugin, binaries).
#
# --root DIR installs the files below DIR (for images and tests); the accounts
# are always created on the running system, because the owners written below
# DIR are its numeric ids. Nothing is started: the last lines say what to run.
#
# The account names can be changed for sites with naming rules (and for tests):
# CLAWEA_USER, CLAWEA_CONTROL_GROUP, OPENCLAW_USER, CLAWTOOLS_USER. The
# installed units and configurations are rewritten to match.
set -euo pipefail
cd "$(dirname "$0")/../.."

root=""
bin=bin
port=2222
while [ $# -gt 0 ]; do
	case $1 in
	--root) root=${2:?--root needs a directory}; shift 2 ;;
	--root=*) root=${1#--root=}; shift ;;
	--bin) bin=${2:?--bin needs a directory}; shift 2 ;;
	--bin=*) bin=${1#--bin=}; shift ;;
	--port) port=${2:?--port needs a number}; shift 2 ;;
	--port=*) port=${1#--port=}; shift ;;
	-h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "install: unknown argument $1" >&2; exit 1 ;;
	esac
done
[[ $port =~ ^[0-9]+$ ]] && [ "$port" -ge 1024 ] && [ "$port" -le 65535 ] ||
	{ echo "install: --port $port: want 1024..65535 (the sshd runs unprivileged)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "install: run as root" >&2; exit 1; }
if [ -n "$root" ]; then
	[ -d "$root" ] || { echo "install: --root $root is not a directory" >&2; exit 1; }
	root=$(cd "$root" && pwd)
fi

att=${CLAWEA_USER:-clawea}
ctl=${CLAWEA_CONTROL_GROUP:-clawea-control}
oc=${OPENCLAW_USER:-openclaw}
tools=${CLAWTOOLS_USER:-clawtools}
for n in "$att" "$ctl" "$oc" "$tools"; do
	[[ $n =~ ^[a-z_][a-z0-9_-]{0,30}$ ]] || { echo "install: bad account name $n" >&2; exit 1; }
done
nologin=/usr/sbin/nologin
[ -x $nologin ] || nologin=/sbin/nologin

log() { echo "install: $*"; }

# --- 1. accounts ------------------------------------------------------------
group() { getent group "$1" >/dev/null || { groupadd --system "$1"; log "group $1"; }; }
# user NAME HOME SHELL [SUPPLEMENTARY]: a system user with its own group.
user() {
	if ! getent passwd "$1" >/dev/null; then
		useradd --system --user-group --no-create-home --home-dir "$2" --shell "$3" "$1"
		log "user $1"
	fi
	if [ -n "${4:-}" ] && ! id -nG "$1" | tr ' ' '\n' | grep -qx "$4"; then
		usermod -a -G "$4" "$1"
	fi
}
group "$ctl"
user "$att" /var/lib/clawea "$nologin"
user "$oc" /var/lib/openclaw "$nologin" "$ctl"
# The sandbox account needs a shell (sshd runs the tools' commands with it) and
# a password field that is not locked ("!"), which sshd refuses even for keys
# without PAM; "*" allows no password.
user "$tools" /var/lib/clawtools /bin/sh
usermod -p '*' "$tools"
# The orchestrator and the attester only: the tools account is in neither group.
for g in "$ctl" "$oc" "$att"; do
	if id -nG "$tools" | tr ' ' '\n' | grep -qx "$g"; then
		echo "install: $tools is in group $g: the model's tools would reach the orchestrator" >&2
		exit 1
	fi
done
oc_uid=$(id -u "$oc")

# --- 2. directories -----------------------------------------------------------
# dir MODE OWNER:GROUP PATH
dir() { install -d -m "$1" -o "${2%:*}" -g "${2#*:}" "$root$3"; chmod "$1" "$root$3"; chown "$2" "$root$3"; }
dir 0755 root:root /usr/local/bin
dir 0755 root:root /usr/local/lib/clawea
dir 0755 root:root /etc/systemd/system
dir 0755 root:root /etc/sysctl.d
dir 0750 "root:$att" /etc/clawea
dir 0700 root:root /etc/clawea/secrets
dir 0700 "$att:$att" /var/lib/clawea
dir 0750 "root:$oc" /etc/openclaw
dir 0750 "root:$oc" /etc/openclaw/sandbox-ssh
dir 0750 "root:$oc" /etc/openclaw/pack
dir 0700 "$oc:$oc" /var/lib/openclaw
dir 0750 "root:$tools" /etc/clawea-tools
dir 0700 "$tools:$tools" /var/lib/clawtools
dir 0755 root:root /etc/clawea-verifier
dir 0755 root:root /etc/clawea-verifier/policies

# --- 3. files -----------------------------------------------------------------
# file MODE OWNER:GROUP DEST: stdin to DEST, replaced atomically.
file() {
	local tmp
	tmp=$(mktemp "$root$3.XXXXXX")
	cat >"$tmp"
	chown "$2" "$tmp" && chmod "$1" "$tmp" && mv -f "$tmp" "$root$3"
}
# once MODE OWNER:GROUP DEST: like file, but keeps an installed DEST (only its
# owner and mode are set again).
once() {
	if [ -e "$root$3" ]; then
		cat >/dev/null
		chown "$2" "$root$3" && chmod "$1" "$root$3"
	else
		file "$@"
		log "$3 (example: edit it)"
	fi
}
# names: the account names and the sandbox port in our files.
names() {
	sed -e "s/^User=clawea\$/User=$att/" -e "s/^Group=clawea-control\$/Group=$ctl/" \
		-e "s/^SupplementaryGroups=clawea /SupplementaryGroups=$att /" \
		-e "s/^User=openclaw\$/User=$oc/" -e "s/^Group=openclaw\$/Group=$oc/" \
		-e "s/^SupplementaryGroups=clawea-control\$/SupplementaryGroups=$ctl/" \
		-e "s/^User=clawtools\$/User=$tools/" -e "s/^Group=clawtools\$/Group=$tools/" \
		-e "s/^AllowUsers clawtools\$/AllowUsers $tools/" -e "s/^Port 2222\$/Port $port/" \
		-e "s/\"clawtools@127\\.0\\.0\\.1:2222\"/\"$tools@127.0.0.1:$port\"/"
}

for c in attester verifier packctl; do
	if [ -x "$bin/$c" ]; then
		file 0755 root:root "/usr/local/bin/$c" <"$bin/$c"
	else
		log "skipped /usr/local/bin/$c: no $bin/$c (make build)"
	fi
done
for u in clawea-attester.service clawea-verifier.service openclaw.service clawea-tools-sshd.service; do
	names <"deploy/systemd/$u" | file 0644 root:root "/etc/systemd/system/$u"
done
file 0644 root:root /etc/sysctl.d/60-clawea-ptrace.conf <deploy/systemd/60-clawea-ptrace.conf

# The OpenClaw plugin: public code, root-owned so neither service can change it.
plugin=/usr/local/lib/clawea/openclaw-plugin
rm -rf "$root$plugin.new"
mkdir -p "$root$plugin.new"
cp -R clients/openclaw/index.js clients/openclaw/openclaw.plugin.json clients/openclaw/package.json \
	clients/openclaw/src "$root$plugin.new/"
chown -R root:root "$root$plugin.new"
chmod -R u=rwX,go=rX "$root$plugin.new"
rm -rf "$root$plugin"
mv "$root$plugin.new" "$root$plugin"

# The attester's configuration: readable by the attester's group only. The
# example's controlUids becomes the orchestrator's uid.
sed -E "s/\"controlUids\": \[[0-9, ]*\]/\"controlUids\": [$oc_uid]/" deploy/systemd/attester.json |
	once 0640 "root:$att" /etc/clawea/attester.json
# OpenClaw's configuration and gateway token: readable by OpenClaw only.
names <deploy/openclaw/openclaw.json5 | once 0640 "root:$oc" /etc/openclaw/openclaw.json5
if [ ! -e "$root/etc/openclaw/gateway.env" ]; then
	echo "OPENCLAW_GATEWAY_TOKEN=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')" |
		file 0600 root:root /etc/openclaw/gateway.env
	log "/etc/openclaw/gateway.env (a fresh gateway token)"
fi
chown root:root "$root/etc/openclaw/gateway.env" && chmod 0600 "$root/etc/openclaw/gateway.env"

# The private sshd: its configuration and OpenClaw's public key are root-owned
# (the tools cannot add keys); the host key belongs to the account sshd runs as.
names <deploy/systemd/clawea-tools-sshd_config | file 0640 "root:$tools" /etc/clawea-tools/sshd_config
hostkey=/etc/clawea-tools/ssh_host_ed25519_key
if [ ! -e "$root$hostkey" ]; then
	ssh-keygen -q -t ed25519 -N '' -C clawea-tools-sshd -f "$root$hostkey"
	log "$hostkey (generated)"
fi
chown "$tools:$tools" "$root$hostkey" && chmod 0600 "$root$hostkey"
chown root:root "$root$hostkey.pub" && chmod 0644 "$root$hostkey.pub"
key=/etc/openclaw/sandbox-ssh/id_ed25519
if [ ! -e "$root$key" ]; then
	ssh-keygen -q -t ed25519 -N '' -C openclaw-sandbox -f "$root$key"
	log "$key (generated)"
fi
chown "$oc:$oc" "$root$key" && chmod 0600 "$root$key"
chown root:root "$root$key.pub" && chmod 0644 "$root$key.pub"
file 0640 "root:$tools" /etc/clawea-tools/authorized_keys <"$root$key.pub"
echo "[127.0.0.1]:$port $(cut -d' ' -f1,2 "$root$hostkey.pub")" |
	file 0640 "root:$oc" /etc/openclaw/sandbox-ssh/known_hosts

if [ -n "$root" ]; then
	log "installed below $root"
	exit 0
fi
cat <<EOM
install: done. Next:
  - edit /etc/clawea/attester.json (owners, trustedTemplates, model) and put the
    secrets it names in /etc/clawea/secrets (root:root 0600);
  - edit /etc/openclaw/openclaw.json5 (the sealed pack, reportHashB64u) and run
    packctl openclaw check --harness-user $oc /etc/openclaw/openclaw.json5
  - npm install -g openclaw@2026.9.6 (Node 24), so /usr/local/bin/openclaw exists;
  - sysctl --system
  - systemctl daemon-reload
  - systemctl enable --now clawea-attester clawea-tools-sshd openclaw
EOM
