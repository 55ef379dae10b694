#!/usr/bin/env bash
# Prepares this checkout to run and to be tested, on a fresh Debian machine as root with
# only the npm registry and Debian's package mirror reachable: dependencies, the Docker
# engine, the CLI build, and the node base image (bootstrapped offline when no container
# registry answers). Idempotent; npm's `pretest`, `.ci/run` and the demo all call it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: npm ci" >&2
  npm ci --no-audit --no-fund >&2
fi

bash scripts/ensure-docker.sh

# The fleet tests run extra engines in network namespaces (ip, nsenter) behind TLS
# certificates they make (openssl); installed from Debian packages only when missing.
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v nsenter >/dev/null 2>&1 || missing+=(util-linux)
# The egress tests: dnsmasq is the fake internet's name server, iptables the host firewall.
command -v dnsmasq >/dev/null 2>&1 || missing+=(dnsmasq-base)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
# The Slurm lab (tests/helpers/slurm.ts): munged, slurmctld and slurmd, each started by the tests
# with a key, sockets, ports and folders of its own; the machine's own munge and Slurm set-up
# (which the packages install) is never used.
command -v slurmctld >/dev/null 2>&1 || missing+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || missing+=(munge)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
    echo "setup: apt-get install ${missing[*]} (for the fleet, egress and Slurm tests)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
      { apt-get update >&2 && apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
  else
    echo "setup: the fleet, egress and Slurm tests need ${missing[*]} (Debian: sudo apt-get install ${missing[*]})" >&2
  fi
fi

# Rebuild the CLI only when a source file is newer than the last build.
if [ ! -f dist/main.js ] || [ -n "$(find src package.json tsconfig.json tsconfig.build.json -newer dist/main.js -print -quit)" ]; then
  echo "setup: npm run build" >&2
  npm run build --silent >&2
fi

# The Python base (with pytest): the tests' own pytest projects build on it. Made here, before
# the suite, so no test sees it appear midway (doctor's base-image row). Only `npm test`
# (npm's pretest) pays its offline bootstrap (minutes), not the demo. The two bases bootstrap
# side by side: one's downloads overlap the other's dpkg runs (the CLI installs mmdebstrap for
# one of them at a time).
node dist/main.js images ensure node &
node_base=$!
python_base=''
if [ "${npm_lifecycle_event:-}" = pretest ] || [ "${SANDBOX_HARNESS_SETUP_PYTHON:-}" = 1 ]; then
  node dist/main.js images ensure python &
  python_base=$!
fi
wait "$node_base"
if [ -n "$python_base" ]; then wait "$python_base"; fi

# Stronger isolation (docs/isolation.md): the conformance suite also runs under
# gVisor on this engine and against rootful Podman. runsc is registered in daemon.json by the
# CLI (merged, reload by SIGHUP only when something changed; running containers keep running).
# Podman's API service gets its own socket and runs its containers under runc: its default
# here, crun 1.8, refuses cgroup v1 hybrid hosts. catatonit is Podman's --init.
if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
  extra=()
  command -v runsc >/dev/null 2>&1 || extra+=(runsc)
  command -v podman >/dev/null 2>&1 || extra+=(podman)
  [ -x /usr/libexec/podman/catatonit ] || extra+=(catatonit)
  if [ "${#extra[@]}" -gt 0 ]; then
    echo "setup: apt-get install ${extra[*]} (for the gVisor and Podman conformance runs)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends "${extra[@]}" >&2 ||
      { apt-get update >&2 && apt-get install -y --no-install-recommends "${extra[@]}" >&2; }
  fi
  if [ -z "${DOCKER_HOST:-}" ]; then
    node dist/main.js setup --runtime runsc >&2
  fi
  podman_socket="${SANDBOX_HARNESS_PODMAN_SOCKET:-/run/podman/podman.sock}"
  if ! curl -sf --max-time 3 --unix-socket "$podman_socket" http://podman/_ping >/dev/null 2>&1 &&
    ! node -e 'require("http").get({socketPath:process.argv[1],path:"/_ping",timeout:3000},r=>process.exit(r.statusCode===200?0:1)).on("error",()=>process.exit(1))' "$podman_socket" 2>/dev/null; then
    echo "setup: starting the Podman API service at unix://$podman_socket (log: /var/log/sandbox-harness-podman.log)" >&2
    mkdir -p "$(dirname "$podman_socket")" /etc/sandbox-harness
    # A configuration of its own (the machine's stays as it is): containers' /etc/hosts is not
    # made from the host's (docs/isolation.md, doctor's sandbox-names check).
    printf '[containers]\nbase_hosts_file = "image"\n' >/etc/sandbox-harness/podman-containers.conf
    CONTAINERS_CONF=/etc/sandbox-harness/podman-containers.conf \
      setsid podman --runtime runc system service --time=0 "unix://$podman_socket" \
      >>/var/log/sandbox-harness-podman.log 2>&1 </dev/null &
    for _ in $(seq 1 60); do
      node -e 'require("http").get({socketPath:process.argv[1],path:"/_ping",timeout:1000},r=>process.exit(r.statusCode===200?0:1)).on("error",()=>process.exit(1))' "$podman_socket" 2>/dev/null && break
      sleep 0.5
    done
  fi
  # The userns-remap test engine (tests/helpers/userns.ts: a second dockerd with
  # "userns-remap": "default") maps sandboxes to dockerd's remap user's subordinate ids: the user
  # and one range of 65536 ids each, past every range already handed out.
  id dockremap >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin dockremap
  for ids in /etc/subuid /etc/subgid; do
    if ! grep -q '^dockremap:' "$ids" 2>/dev/null; then
      start=$(awk -F: 'NF >= 3 { end = $2 + $3; if (end > max) max = end } END { print (max > 231072 ? max : 231072) }' "$ids" 2>/dev/null || echo 231072)
      echo "dockremap:$start:65536" >>"$ids"
    fi
  done
else
  echo "setup: not Debian as root; the runsc, Podman and userns-remap conformance runs need runsc registered, a Podman API service and a dockremap user with subordinate ids (docs/isolation.md)" >&2
fi

# The viewer's browser tests drive Debian's Chromium through playwright-core, which
# downloads no browser of its own.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: apt-get install chromium (for the viewer's browser tests)" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
  else
    echo "setup: chromium is missing; tests/e2e/view.test.ts needs it (Debian: apt-get install chromium)" >&2
  fi
fi

# The bundled example's dev dependencies (TypeScript), installed on the host: sandbox
# image builds get no network here, so `examples/evals` needs them in the repo already.
example=examples/shipping-service/repo
if [ ! -d "$example/node_modules/typescript" ] || [ "$example/package-lock.json" -nt "$example/node_modules/.package-lock.json" ]; then
  echo "setup: npm ci in $example" >&2
  (cd "$example" && npm ci --prefer-offline --no-audit --no-fund --ignore-scripts >&2)
fi
