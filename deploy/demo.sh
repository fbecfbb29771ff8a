#!/usr/bin/env bash
# The run command: the main job on the embedded default (no broker). Installs the project,
# then runs `adamem demo` with the log and the memory store under ./data.
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
bash deploy/setup.sh >/dev/null
exec .venv/bin/adamem demo "$@"
