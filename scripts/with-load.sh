#!/usr/bin/env bash
# Run a command (default: the whole suite) while a bounded load runs beside it on the same engine:
# TRIALBOX_LOAD_BUSY containers (default 1) each spinning TRIALBOX_LOAD_CPUS CPUs (default 0.75) and
# writing to its /tmp, plus one loop on the host creating and removing a container (the engine's API
# stays busy). Verdicts must not depend on it; `make test-load` runs the suite this way.
# The default was two busy containers; on a 2-core host that left the suite a quarter of the machine and
# a whole run did not finish in three hours. One busy container plus the churn loop still keeps the engine
# and the CPUs busy throughout; set TRIALBOX_LOAD_BUSY=2 for the heavier load.
# The load containers carry no trialbox label: trialbox's gc never takes them for its own.
set -euo pipefail
busy=${TRIALBOX_LOAD_BUSY:-1}
cpus=${TRIALBOX_LOAD_CPUS:-0.75}
image=$(docker images --filter 'reference=trialbox/*' --format '{{.ID}}' | head -n 1)
if [ -z "$image" ]; then
  echo "with-load: no trialbox image on this engine; run \`make setup\` first" >&2
  exit 2
fi
names=()
churn=""
cleanup() {
  [ -n "$churn" ] && kill "$churn" 2>/dev/null || true
  [ "${#names[@]}" -gt 0 ] && docker rm -f "${names[@]}" >/dev/null 2>&1 || true
}
trap cleanup EXIT INT TERM
for i in $(seq 1 "$busy"); do
  name="trialbox-load-$$-$i"
  docker run -d --rm --name "$name" --label org.trialbox-load=1 --network none --cpus "$cpus" --memory 256m \
    --pids-limit 64 --tmpfs /tmp:size=64m "$image" \
    sh -c 'while :; do dd if=/dev/zero of=/tmp/x bs=1M count=32 2>/dev/null; rm -f /tmp/x; i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; done' >/dev/null
  names+=("$name")
done
( while :; do docker run --rm --network none --label org.trialbox-load=1 "$image" true >/dev/null 2>&1 || sleep 1; done ) &
churn=$!
echo "with-load: $busy busy container(s) at $cpus CPU each and a container churn loop beside: $*" >&2
if [ "$#" -eq 0 ]; then set -- .venv/bin/python -m pytest tests; fi
"$@"
