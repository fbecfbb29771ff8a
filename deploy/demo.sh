#!/usr/bin/env bash
# The run command: the main job on the embedded default (no broker). Installs the project,
# then runs `adamem demo` with the log and the memory store under ./data.
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
echo "demo.sh: installing AdaMem Stream into $ROOT/.venv (about a minute the first time) ..." >&2
bash deploy/setup.sh >/dev/null
exec .venv/bin/adamem demo "$@"
