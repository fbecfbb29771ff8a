#!/usr/bin/env bash
# The test command: install everything, start a real single-node Kafka broker (KRaft) with the
# project's own script, run the whole suite against it (plus ruff and mypy), stop the broker.
# The suite includes the OpenAPI fuzzer (Schemathesis, a dev dependency) against a real
# `adamem serve`: tests/api/test_fuzz.py.
# Extra arguments go to pytest, e.g. `bash deploy/test.sh -k embedded -x`.
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
t0=$(date +%s)
bash deploy/setup.sh --dev

started_here=0
if ! bash deploy/kafka.sh status >/dev/null 2>&1; then
    bash deploy/kafka.sh start
    started_here=1
fi
cleanup() { if [ "$started_here" = 1 ]; then bash deploy/kafka.sh stop || true; fi; }
trap cleanup EXIT

echo "test.sh: ruff"
.venv/bin/ruff check .
echo "test.sh: ruff format --check"
.venv/bin/ruff format --check .
echo "test.sh: mypy --strict"
.venv/bin/mypy
echo "test.sh: pytest"
ADAMEM_TEST_KAFKA="127.0.0.1:${ADAMEM_KAFKA_PORT:-9092}" .venv/bin/pytest -q -p no:cacheprovider "$@"
echo "test.sh: done in $(( $(date +%s) - t0 )) s"
