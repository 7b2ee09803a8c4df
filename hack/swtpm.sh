#!/usr/bin/env bash
# Runs a software TPM 2.0 (swtpm) for development, in the foreground, the way
# the enclave/tpm tests do: manufactured with RSA and ECC EKs and EK
# certificates from a throwaway local CA kept in the state directory, SHA-256
# PCR bank, started (TPM2_Startup(CLEAR)) and serving raw TPM commands on a
# loopback TCP port (its control channel on PORT+1).
#
#   hack/swtpm.sh [STATE_DIR] [PORT]     defaults: ./.swtpm 2321
#
# Then open it with tpm.Open(ctx, tpm.Options{Address: "127.0.0.1:PORT"}),
# or use tpm2-tools with TPM2TOOLS_TCTI=swtpm:host=127.0.0.1,port=PORT.
# swtpm serves one connection at a time. Its evidence is marked simulated.
# Debian/Ubuntu packages: swtpm swtpm-tools (and tpm2-tools for
# tpm2_checkquote).
set -euo pipefail

dir=${1:-.swtpm}
port=${2:-2321}

command -v swtpm >/dev/null || { echo "swtpm.sh: swtpm not installed (apt-get install swtpm swtpm-tools)" >&2; exit 1; }
command -v swtpm_setup >/dev/null || { echo "swtpm.sh: swtpm_setup not installed (apt-get install swtpm-tools)" >&2; exit 1; }

mkdir -p "$dir/state" "$dir/ca"
dir=$(cd "$dir" && pwd)

if [ ! -e "$dir/state/tpm2-00.permall" ]; then
	cat >"$dir/swtpm_setup.conf" <<EOF
create_certs_tool = swtpm_localca
create_certs_tool_config = $dir/swtpm-localca.conf
create_certs_tool_options = $dir/swtpm-localca.options
active_pcr_banks = sha256
EOF
	cat >"$dir/swtpm-localca.conf" <<EOF
statedir = $dir/ca
signingkey = $dir/ca/signkey.pem
issuercert = $dir/ca/issuercert.pem
certserial = $dir/ca/certserial
EOF
	printf -- '--platform-manufacturer clawea-dev\n--platform-version 1.0\n--platform-model swtpm\n' >"$dir/swtpm-localca.options"
	swtpm_setup --tpm2 --create-ek-cert --tpmstate "$dir/state" \
		--config "$dir/swtpm_setup.conf" --pcr-banks sha256 \
		--logfile "$dir/setup.log"
fi

echo "swtpm.sh: serving TPM 2.0 on 127.0.0.1:$port (state $dir); Ctrl-C stops it" >&2
exec swtpm socket --tpm2 \
	--server "type=tcp,port=$port,bindaddr=127.0.0.1" \
	--ctrl "type=tcp,port=$((port + 1)),bindaddr=127.0.0.1" \
	--flags not-need-init,startup-clear \
	--tpmstate "dir=$dir/state" \
	--log "file=$dir/swtpm.log"
