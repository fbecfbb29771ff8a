#!/usr/bin/env bash
# The test command: install everything (and build the Java conformance check), start a real
# single-node Kafka broker (KRaft) with the project's own script, run the whole suite against it
# (plus ruff and mypy) and an S3-compatible server (deploy/s3.sh, moto) for the s3:// store tests,
# stop both. The suite includes the OpenAPI fuzzer (Schemathesis, a
# dev dependency) against a real `adamem serve`: tests/api/test_fuzz.py.
# Extra arguments go to pytest, e.g. `bash deploy/test.sh -k embedded -x`.
set -euo pipefail
ROOT=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
t0=$(date +%s)
bash deploy/setup.sh --dev
echo "test.sh: Java conformance build (Avro + Kafka Java reference; cached in conformance/java/target)"
bash conformance/java/build.sh

# kcat (librdkafka's command-line client) produces in the interoperability tests.
if ! command -v kcat >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: installing kcat"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
    else
        echo "test.sh: kcat is missing; install it (Debian: apt-get install -y kcat) and run again" >&2
        exit 1
    fi
fi

# prometheus and promtool (Debian's prometheus package): tests/deploy/test_observability.py runs a
# real Prometheus server on free ports and checks the shipped config and rules with promtool. The
# package's service is not started (policy-rc.d), so no server is left listening on 9090.
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: installing prometheus"
        made_policy=0
        if [ ! -e /usr/sbin/policy-rc.d ]; then
            printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && made_policy=1
        fi
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
        if [ "$made_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
    else
        echo "test.sh: prometheus/promtool are missing; install them (Debian: apt-get install -y prometheus) and run again" >&2
        exit 1
    fi
fi

# chromium and its chromedriver (Debian's chromium, chromium-driver): tests/api/test_ui_browser.py drives the
# memory inspector in real headless Chromium through Selenium; fonts-wqy-zenhei renders its Chinese text.
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "test.sh: installing chromium and chromium-driver"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver fonts-wqy-zenhei >/dev/null
    else
        echo "test.sh: chromium/chromedriver are missing; install them (Debian: apt-get install -y chromium chromium-driver) and run again" >&2
        exit 1
    fi
fi

started_here=0
if ! bash deploy/kafka.sh status >/dev/null 2>&1; then
    bash deploy/kafka.sh start
    started_here=1
fi
# The S3-compatible server (moto, an emulator) for the s3:// store tests (pytest -m s3).
export ADAMEM_S3_PORT="${ADAMEM_S3_PORT:-9000}"
s3_started_here=0
if ! bash deploy/s3.sh status >/dev/null 2>&1; then
    bash deploy/s3.sh start
    s3_started_here=1
fi
cleanup() {
    if [ "$started_here" = 1 ]; then bash deploy/kafka.sh stop || true; fi
    if [ "$s3_started_here" = 1 ]; then bash deploy/s3.sh stop || true; fi
}
trap cleanup EXIT

echo "test.sh: ruff"
.venv/bin/ruff check .
echo "test.sh: ruff format --check"
.venv/bin/ruff format --check .
echo "test.sh: mypy --strict"
.venv/bin/mypy
echo "test.sh: mkdocs build --strict (the documentation site; a broken link or reference fails)"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet -d "$(mktemp -d)"
echo "test.sh: pytest"
ADAMEM_TEST_KAFKA="127.0.0.1:${ADAMEM_KAFKA_PORT:-9092}" ADAMEM_TEST_S3="127.0.0.1:$ADAMEM_S3_PORT" .venv/bin/pytest -q -p no:cacheprovider "$@"
echo "test.sh: done in $(( $(date +%s) - t0 )) s"
