#!/usr/bin/env bash
# Run an S3-compatible server on loopback for development, tests and CI: moto's server
# (`moto[server]`, Apache-2.0, installed by `deploy/setup.sh --dev`). It is an *emulator* of S3 —
# a real HTTP server speaking the S3 API, keeping objects in memory — not a storage system:
# production stores use Amazon S3, Google Cloud Storage or MinIO (see the README). (SeaweedFS was
# tried first: its Go module cannot be `go install`ed, its go.mod has replace directives.)
#
#   deploy/s3.sh start    start, wait until it answers, create the bucket
#   deploy/s3.sh stop     TERM the recorded pid, KILL after a grace period
#   deploy/s3.sh status   exit 0 if it is running and answers
#   deploy/s3.sh env      print the ADAMEM_STORE_* settings that reach it (eval "$(deploy/s3.sh env)")
#
# Environment (all optional):
#   ADAMEM_S3_PORT     port                                   [9000]
#   ADAMEM_S3_HOME     state: s3.pid, s3.log                  [<repo>/.s3]
#   ADAMEM_S3_BUCKET   bucket made at start                   [adamem]
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/.." && pwd -P)
HOST=127.0.0.1
PORT=${ADAMEM_S3_PORT:-9000}
S3_HOME=${ADAMEM_S3_HOME:-$REPO_ROOT/.s3}
BUCKET=${ADAMEM_S3_BUCKET:-adamem}
[[ $S3_HOME == /* ]] || S3_HOME="$PWD/$S3_HOME"
PIDFILE="$S3_HOME/s3.pid"
VENV_BIN=${ADAMEM_VENV_BIN:-$(dirname -- "$(command -v python3)")}
[ -x "$REPO_ROOT/.venv/bin/moto_server" ] && VENV_BIN="$REPO_ROOT/.venv/bin"
MOTO="$VENV_BIN/moto_server"
PY="$VENV_BIN/python"

answers() {
    "$PY" - "$HOST" "$PORT" <<'PY' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(f"http://{sys.argv[1]}:{sys.argv[2]}/", timeout=2).read()
PY
}

running() { [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

case "${1:-}" in
start)
    mkdir -p "$S3_HOME"
    if running && answers; then echo "s3.sh: already running (pid $(cat "$PIDFILE")) on $HOST:$PORT"; exit 0; fi
    [ -x "$MOTO" ] || { echo "s3.sh: $MOTO not found; run deploy/setup.sh --dev (installs moto[server])" >&2; exit 1; }
    nohup "$MOTO" -H "$HOST" -p "$PORT" >"$S3_HOME/s3.log" 2>&1 &
    echo $! >"$PIDFILE"
    for _ in $(seq 1 100); do
        if answers; then break; fi
        kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { echo "s3.sh: server exited; see $S3_HOME/s3.log" >&2; exit 1; }
        sleep 0.2
    done
    answers || { echo "s3.sh: no answer on $HOST:$PORT after 20 s; see $S3_HOME/s3.log" >&2; exit 1; }
    "$PY" - "$HOST" "$PORT" "$BUCKET" <<'PY'
import sys, urllib.request
req = urllib.request.Request(f"http://{sys.argv[1]}:{sys.argv[2]}/{sys.argv[3]}", method="PUT")
urllib.request.urlopen(req, timeout=10).read()
PY
    echo "s3.sh: S3-compatible server (moto) ready at http://$HOST:$PORT (pid $(cat "$PIDFILE")), bucket $BUCKET"
    ;;
stop)
    if running; then
        pid=$(cat "$PIDFILE")
        kill "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
        echo "s3.sh: stopped pid $pid"
    fi
    rm -f "$PIDFILE"
    ;;
status)
    running && answers
    ;;
env)
    echo "export ADAMEM_STORE_ENDPOINT=http://$HOST:$PORT ADAMEM_STORE_ALLOW_HTTP=true ADAMEM_STORE_REGION=us-east-1"
    echo "export ADAMEM_STORE_ACCESS_KEY=testing ADAMEM_STORE_SECRET_KEY=testing"
    ;;
*)
    echo "usage: deploy/s3.sh start|stop|status|env" >&2
    exit 2
    ;;
esac
