#!/usr/bin/env bash
# Create the project's virtualenv (.venv) and install the project into it.
#   deploy/setup.sh                      runtime dependencies (what `adamem` needs)
#   deploy/setup.sh --dev                plus the test and lint tools (and every extra)
#   deploy/setup.sh --extras mcp,langchain   plus those extras (mcp, langchain, bench)
# ADAMEM_PYTHON picks the interpreter (default: python3, which must be 3.11 or 3.12).
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
PY=${ADAMEM_PYTHON:-python3}
extras=()
while [ $# -gt 0 ]; do
    case "$1" in
        --dev) extras+=(dev); shift ;;
        --extras) [ $# -ge 2 ] || { echo "setup.sh: --extras needs a list, e.g. --extras mcp,langchain" >&2; exit 2; }
                  IFS=, read -r -a more <<<"$2"; extras+=("${more[@]}"); shift 2 ;;
        *) echo "setup.sh: unknown option $1 (use --dev or --extras mcp,langchain,bench)" >&2; exit 2 ;;
    esac
done
cd "$ROOT"
"$PY" - <<'PYCHECK' || { echo "setup.sh: $PY must be Python 3.11 or 3.12" >&2; exit 1; }
import sys
sys.exit(0 if (3, 11) <= sys.version_info[:2] < (3, 13) else 1)
PYCHECK
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
extra=""
if [ ${#extras[@]} -gt 0 ]; then
    extra="[$(IFS=,; echo "${extras[*]}")]"
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
# The build backend's notes (setuptools prints an "Editable installation" note on every editable
# install, even with --quiet) go to .venv/install.log; it is shown in full when pip fails.
if ! .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${extra}" >.venv/install.log 2>&1; then
    cat .venv/install.log >&2
    echo "setup.sh: pip failed (the output above is in $ROOT/.venv/install.log)" >&2
    exit 1
fi
echo "setup.sh: installed into $ROOT/.venv (pip's output: .venv/install.log)"
