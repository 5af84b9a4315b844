#!/usr/bin/env bash
# Install Debian's Prometheus (with promtool), Alertmanager and node-exporter when a binary is
# missing; the tests start their own servers on free ports. Idempotent: with all four present it
# does nothing. It never leaves a system daemon running: a policy-rc.d refuses service starts
# during the install, and any prometheus/alertmanager process that appeared during it is
# stopped by its pid (node-exporter's too). Without root (or apt-get) it only says what is
# missing; the tests then skip, or fail under CI=true.
set -u

binaries=(prometheus promtool prometheus-alertmanager prometheus-node-exporter)
missing=()
for b in "${binaries[@]}"; do command -v "$b" >/dev/null 2>&1 || missing+=("$b"); done
[ ${#missing[@]} -eq 0 ] && exit 0

packages="prometheus prometheus-alertmanager prometheus-node-exporter"
echo "ensure_prometheus: missing ${missing[*]}; installing $packages" >&2
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure_prometheus: not root or no apt-get; install them by hand" >&2
  exit 0
fi

daemons() {
  pgrep -x 'prometheus|prometheus-alertmanager|alertmanager|prometheus-node' \
    2>/dev/null | sort
}
before=$(daemons)

policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && made_policy=1
fi

export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086 # the package list splits on spaces
install() { apt-get install -y -q --no-install-recommends $packages; }
install >/dev/null || { apt-get update -q >/dev/null && install >/dev/null; }
status=$?

[ "$made_policy" = 1 ] && rm -f "$policy"

for pid in $(comm -13 <(echo "$before") <(daemons)); do
  echo "ensure_prometheus: stopping daemon $pid started by the install" >&2
  kill "$pid" 2>/dev/null || true
done

[ $status -eq 0 ] || echo "ensure_prometheus: apt-get install failed ($status)" >&2
exit 0
