#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine, starting one if needed.
#
# - Not root: an engine that answers is used as it is; otherwise a clear error.
# - Root on Debian: install docker.io, runsc (gVisor) and mmdebstrap when
#   missing; register runsc as an engine runtime in /etc/docker/daemon.json
#   (with its own network disabled: gVisor cannot set one up in the root
#   network namespace here, and trialbox gives sandboxes no network anyway;
#   and allowed to open host Unix sockets bind-mounted into a sandbox, the
#   only way out of a model-api-only sandbox is the model proxy's socket);
#   reload a running dockerd whose configuration changed; otherwise start
#   dockerd in the background and wait until it answers.
# - A pid file left by a dockerd (or its containerd) that was killed, for
#   example when the previous session's processes were ended, is removed when
#   its pid is not running, so the next start does not fail with "pid file found".
set -euo pipefail

WAIT_SECONDS=${TRIALBOX_DOCKER_WAIT:-90}
LOG=/var/log/trialbox-dockerd.log

answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
report() { echo "docker engine answers: $(docker version --format '{{.Server.Version}}') (runtimes: $(docker info --format '{{range $k, $v := .Runtimes}}{{$k}} {{end}}' 2>/dev/null))"; }

if [ "$(id -u)" != 0 ]; then
  if answers; then report; exit 0; fi
  echo "error: no Docker engine answers and starting one needs root" >&2
  exit 1
fi

missing=""
command -v dockerd >/dev/null 2>&1 || missing="$missing docker.io"
command -v runsc >/dev/null 2>&1 || missing="$missing runsc"
command -v mmdebstrap >/dev/null 2>&1 || missing="$missing mmdebstrap"
if [ -n "$missing" ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    answers && { report; exit 0; }
    echo "error: no Docker engine answers and this is not a Debian machine: install Docker yourself" >&2
    exit 1
  fi
  echo "installing from Debian:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null
  # shellcheck disable=SC2086
  apt-get install -y -q $missing >/dev/null
fi

mkdir -p /etc/docker
changed=$(python3 - <<'PY'
import json, os, shutil
path = "/etc/docker/daemon.json"
conf = {}
if os.path.exists(path):
    with open(path) as fh:
        text = fh.read().strip()
    conf = json.loads(text) if text else {}
before = json.dumps(conf, sort_keys=True)
runsc = shutil.which("runsc")
if runsc:
    conf.setdefault("runtimes", {})["runsc"] = {"path": runsc, "runtimeArgs": ["--network=none", "--host-uds=open"]}
if json.dumps(conf, sort_keys=True) != before:
    with open(path + ".tmp", "w") as fh:
        json.dump(conf, fh, indent=2)
    os.replace(path + ".tmp", path)
    print("yes")
PY
)

if answers; then
  if [ -n "$changed" ] && pgrep -x dockerd >/dev/null 2>&1; then
    echo "engine configuration changed: reloading dockerd"
    pkill -HUP -x dockerd || true
    sleep 1
  fi
  report
  exit 0
fi

clear_stale_pid() {
  local pidfile=$1 pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    return 0
  fi
  echo "removing stale pid file $pidfile (pid ${pid:-none} is not running)"
  rm -f "$pidfile"
}

clear_stale_pid /var/run/docker.pid
clear_stale_pid /var/run/docker/containerd/containerd.pid
# A dockerd that runs but does not answer yet is waited for, not started twice.
if ! pgrep -x dockerd >/dev/null 2>&1; then
  rm -f /var/run/docker.sock
  echo "starting dockerd (log: $LOG)"
  nohup dockerd >>"$LOG" 2>&1 </dev/null &
  disown || true
fi

for _ in $(seq 1 "$WAIT_SECONDS"); do
  if answers; then report; exit 0; fi
  sleep 1
done
echo "error: dockerd did not answer within ${WAIT_SECONDS}s; last lines of $LOG:" >&2
tail -n 20 "$LOG" >&2 || true
exit 1
