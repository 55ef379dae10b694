#!/usr/bin/env bash
# Makes sure a Docker engine answers, and says exactly what to do when it cannot.
#
# - An engine already answers GET /_ping (DOCKER_HOST honoured): print nothing, exit 0.
# - Debian as root: install what is missing (docker.io, mmdebstrap; apt-get update only when
#   apt does not know them yet), start dockerd in the background with its log in
#   /var/log/sandbox-harness-dockerd.log, wait up to 60 s for /_ping.
# - Anywhere else: print what to do, exit 1.
#
# Idempotent: safe to run before every test run (npm's pretest runs it via scripts/setup.sh).
set -euo pipefail

LOG=/var/log/sandbox-harness-dockerd.log
WAIT_SECONDS="${ENSURE_DOCKER_WAIT_SECONDS:-60}"
DEFAULT_SOCKET=unix:///var/run/docker.sock
ENDPOINT="${DOCKER_HOST:-$DEFAULT_SOCKET}"

say() { echo "ensure-docker: $*" >&2; }

# node is always there (this is a Node project); curl may not be on a minimal system.
ping_daemon() {
  DOCKER_ENDPOINT="$ENDPOINT" node -e '
    const http = require("node:http");
    const endpoint = process.env.DOCKER_ENDPOINT;
    let options;
    if (endpoint.startsWith("unix://")) options = { socketPath: endpoint.slice("unix://".length) };
    else if (endpoint.startsWith("tcp://")) {
      const url = new URL(endpoint.replace(/^tcp:/, "http:"));
      options = { host: url.hostname, port: url.port || 2375 };
    } else process.exit(2);
    const req = http.get({ ...options, path: "/_ping", timeout: 2000 }, (res) => {
      res.resume();
      process.exit(res.statusCode === 200 ? 0 : 1);
    });
    req.on("error", () => process.exit(1));
    req.on("timeout", () => { req.destroy(); process.exit(1); });
  ' 2>/dev/null
}

dockerd_running() {
  local pid
  [ -f /var/run/docker.pid ] || return 1
  pid="$(cat /var/run/docker.pid 2>/dev/null || true)"
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = dockerd ]
}

wait_for_ping() {
  local deadline=$((SECONDS + WAIT_SECONDS))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if ping_daemon; then return 0; fi
    sleep 0.5
  done
  return 1
}

if ping_daemon; then
  exit 0
fi

if [ -n "${DOCKER_HOST:-}" ] && [ "$DOCKER_HOST" != "$DEFAULT_SOCKET" ]; then
  if [ -n "${DOCKER_TLS_VERIFY:-}" ]; then
    # A TLS endpoint cannot be pinged without its client certificates; doctor checks it properly.
    say "DOCKER_HOST=$DOCKER_HOST uses TLS; not checked here. Run: sandbox-harness doctor"
    exit 0
  fi
  say "no Docker engine answers at DOCKER_HOST=$DOCKER_HOST."
  say "  Start that engine, or unset DOCKER_HOST to use the local socket ($DEFAULT_SOCKET)."
  exit 1
fi

if [ "$(id -u)" -ne 0 ] || [ ! -f /etc/debian_version ]; then
  say "no Docker engine answers at $ENDPOINT."
  say "  Install Docker Engine (https://docs.docker.com/engine/install/) and start it"
  say "  (e.g. sudo systemctl start docker), or point DOCKER_HOST at a running engine."
  if [ -S /var/run/docker.sock ] && [ "$(id -u)" -ne 0 ]; then
    say "  The socket exists: your user may lack access. Run: sudo usermod -aG docker \"\$USER\" (then log in again)."
  fi
  say "  On Debian as root, this script installs docker.io and starts dockerd by itself."
  exit 1
fi

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
if [ "${#missing[@]}" -gt 0 ]; then
  for pkg in "${missing[@]}"; do
    if ! apt-cache show "$pkg" >/dev/null 2>&1; then
      say "apt-get update (apt does not know $pkg yet)"
      apt-get update -q >&2
      break
    fi
  done
  say "apt-get install -y ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
  # With systemd, the package may have started the service already.
  if ping_daemon; then
    say "Docker engine answers at $ENDPOINT"
    exit 0
  fi
fi

if dockerd_running; then
  say "dockerd is running but does not answer yet; waiting up to ${WAIT_SECONDS} s"
else
  say "starting dockerd in the background (log: $LOG)"
  # setsid: dockerd must outlive this script and the npm process that ran it.
  setsid dockerd >>"$LOG" 2>&1 </dev/null &
fi

if wait_for_ping; then
  say "Docker engine answers at $ENDPOINT"
  exit 0
fi

say "dockerd did not answer within ${WAIT_SECONDS} s. Last lines of $LOG:"
tail -n 30 "$LOG" >&2 2>/dev/null || true
exit 1
