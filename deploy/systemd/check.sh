#!/usr/bin/env bash
# Checks deploy/systemd/clawea-attester.service (make unit-check):
#  - systemd-analyze verify in a temporary root that holds the freshly built
#    attester at the unit's ExecStart path and the host's unit files
#    (verify needs sysinit.target and friends), so the check does not depend
#    on what is installed in /usr/local/bin. Any output is a failure:
#    verify exits 0 on warnings such as an unknown key.
#  - systemd-analyze security --offline: the exposure score must stay at or
#    below THRESHOLD (tenths; 1.7 today on systemd 252).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
THRESHOLD=${THRESHOLD:-25}
unit=clawea-attester.service

command -v systemd-analyze >/dev/null || { echo "unit-check: systemd-analyze is missing (apt-get install systemd)" >&2; exit 1; }
units=/lib/systemd/system
[ -f "$units/sysinit.target" ] || units=/usr/lib/systemd/system

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin" "$root/etc/systemd/system" "$root/lib/systemd"
cp -a "$units" "$root/lib/systemd/system"
CGO_ENABLED=0 "$GO" build -trimpath -o "$root/usr/local/bin/attester" ./cmd/attester
install -m 0644 "deploy/systemd/$unit" "$root/etc/systemd/system/$unit"

out=$(systemd-analyze verify --man=no --root="$root" "$root/etc/systemd/system/$unit" 2>&1) || {
	echo "unit-check: systemd-analyze verify failed:" >&2; echo "$out" >&2; exit 1; }
# Syscall names newer than the host's systemd (riscv_hwprobe in @system-service
# on some versions) are reported at debug level only; anything printed is a defect.
if [ -n "$out" ]; then
	echo "unit-check: systemd-analyze verify warned:" >&2; echo "$out" >&2; exit 1
fi
if ! sec=$(systemd-analyze security --offline=yes --root="$root" --threshold="$THRESHOLD" --no-pager "$root/etc/systemd/system/$unit" 2>&1); then
	echo "$sec" >&2
	echo "unit-check: exposure above $THRESHOLD/100" >&2
	exit 1
fi
echo "unit-check: $unit verified; $(echo "$sec" | grep -o 'Overall exposure level.*')"
