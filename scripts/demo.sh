#!/usr/bin/env bash
# `npm run demo`: sets up what is missing (dependencies, Docker engine, base image, build),
# then runs the bundled example ticket OPS-412 on a temporary copy. Extra arguments go to
# `sandbox-harness demo` (e.g. `npm run demo -- --provider anthropic` for a live run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec node dist/main.js demo "$@"
