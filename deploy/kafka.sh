#!/usr/bin/env bash
# Run a single-node Kafka broker (KRaft, combined broker+controller, loopback only) from jars
# that Maven resolves, for development, tests and CI on machines without Docker.
#
#   deploy/kafka.sh fetch    resolve the broker's jars into the cache (once per pom.xml version)
#   deploy/kafka.sh start    fetch if needed, format storage if new, start, wait until ready
#   deploy/kafka.sh stop     TERM the recorded pid, KILL after a grace period
#   deploy/kafka.sh status   exit 0 if the broker is running and accepts connections
#   deploy/kafka.sh reset    stop and delete the data directory
#
# Clients use bootstrap 127.0.0.1:$ADAMEM_KAFKA_PORT (not "localhost", which may resolve to ::1).
# Every command is idempotent and may be run from any working directory.
#
# Environment (all optional):
#   ADAMEM_KAFKA_PORT             client (PLAINTEXT) port                        [9092]
#   ADAMEM_KAFKA_CONTROLLER_PORT  KRaft controller port                          [9093]
#   ADAMEM_KAFKA_HOME             state: data/, logs/, config/, kafka.pid        [<repo>/.kafka]
#   ADAMEM_KAFKA_LIBS             jar cache, shareable between homes             [<repo>/.kafka/libs]
#   ADAMEM_KAFKA_START_TIMEOUT    seconds to wait for readiness                  [120]
#   ADAMEM_KAFKA_STOP_TIMEOUT     seconds between TERM and KILL                  [20]
#   ADAMEM_KAFKA_HEAP_OPTS        broker heap                                    [-Xms256m -Xmx512m]
#   ADAMEM_KAFKA_JVM_OPTS         extra JVM options for the broker               []
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
REPO_ROOT=$(cd -- "$SCRIPT_DIR/.." && pwd -P)
POM="$SCRIPT_DIR/kafka/pom.xml"

HOST=127.0.0.1
PORT=${ADAMEM_KAFKA_PORT:-9092}
CONTROLLER_PORT=${ADAMEM_KAFKA_CONTROLLER_PORT:-9093}
KAFKA_HOME=${ADAMEM_KAFKA_HOME:-$REPO_ROOT/.kafka}
LIBS=${ADAMEM_KAFKA_LIBS:-$REPO_ROOT/.kafka/libs}
START_TIMEOUT=${ADAMEM_KAFKA_START_TIMEOUT:-120}
STOP_TIMEOUT=${ADAMEM_KAFKA_STOP_TIMEOUT:-20}
HEAP_OPTS=${ADAMEM_KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}
JVM_OPTS=${ADAMEM_KAFKA_JVM_OPTS:-}
[[ $KAFKA_HOME == /* ]] || KAFKA_HOME="$PWD/$KAFKA_HOME"
[[ $LIBS == /* ]] || LIBS="$PWD/$LIBS"

DATA_DIR="$KAFKA_HOME/data"
LOG_DIR="$KAFKA_HOME/logs"
CONF_DIR="$KAFKA_HOME/config"
PID_FILE="$KAFKA_HOME/kafka.pid"
LOG_FILE="$LOG_DIR/server.log"
SERVER_PROPERTIES="$CONF_DIR/server.properties"
LOG4J_CONFIG="$CONF_DIR/log4j2.properties"
LIBS_MARKER="$LIBS/.complete"
READY_LINE='Kafka Server started'

log() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
    sed -n '2,/^set -euo pipefail$/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

now_ms() { date +%s%3N; }

check_settings() {
    local name value
    for name in PORT CONTROLLER_PORT START_TIMEOUT STOP_TIMEOUT; do
        value=${!name}
        [[ $value =~ ^[0-9]+$ ]] || die "ADAMEM_KAFKA_$name must be a whole number, got '$value'"
    done
    [[ $PORT != "$CONTROLLER_PORT" ]] || die "ADAMEM_KAFKA_PORT and ADAMEM_KAFKA_CONTROLLER_PORT are both $PORT"
}

require_java() {
    command -v java >/dev/null || die "java not found: the broker needs a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless)"
    local version major
    version=$(java -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)
    major=${version%%.*}
    if [[ $major =~ ^[0-9]+$ ]] && ((major < 17)); then
        die "java $version found, but Kafka 4 needs Java 17+"
    fi
}

# Runs "$@" holding an exclusive lock on file $2 through file descriptor $1 (when flock(1)
# exists), so that concurrent invocations (parallel test runners) do not race. The broker and
# the tools close these descriptors, so that they never inherit a lock.
with_lock() {
    local fd=$1 lock_file=$2
    shift 2
    if command -v flock >/dev/null; then
        mkdir -p -- "$(dirname -- "$lock_file")"
        eval "exec $fd>\"\$lock_file\""
        flock -w 600 "$fd" || die "could not lock $lock_file within 600 s"
    fi
    "$@"
}

pom_hash() { sha256sum "$POM" | cut -d ' ' -f 1; }

libs_complete() { [[ -f $LIBS_MARKER && $(<"$LIBS_MARKER") == "$(pom_hash)" ]]; }

kafka_version() {
    local jar
    for jar in "$LIBS"/kafka-clients-*.jar; do
        if [[ -f $jar ]]; then
            jar=${jar##*/kafka-clients-}
            printf '%s' "${jar%.jar}"
            return
        fi
    done
    printf 'unknown'
}

# $1 = "quiet" when called from start, which needs no word about an up-to-date cache.
do_fetch() {
    if libs_complete; then
        [[ ${1:-} == quiet ]] || log "jars already in $LIBS (Kafka $(kafka_version))"
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found: Maven 3.6+ resolves the broker's jars (e.g. apt-get install maven)"
    local parent staging started
    parent=$(dirname -- "$LIBS")
    mkdir -p -- "$parent"
    staging=$(mktemp -d "$parent/.libs.XXXXXX")
    # shellcheck disable=SC2064  # expand now: $staging is local
    trap "rm -rf -- '$staging'" EXIT
    chmod 755 "$staging"
    started=$(now_ms)
    log "resolving the broker's jars with Maven into $LIBS ..."
    # Maven 3.8 prints stray colour codes even with -q -B, so its output is shown only on failure.
    local output
    if ! output=$(mvn -q -B -f "$POM" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$staging" 2>&1); then
        printf '%s\n' "$output" | sed 's/\x1b\[[0-9;]*m//g' >&2
        die "mvn dependency:copy-dependencies failed for $POM (is Maven Central reachable?)"
    fi
    pom_hash >"$staging/.complete"
    rm -rf -- "$LIBS"
    mv -- "$staging" "$LIBS"
    trap - EXIT
    log "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars (Kafka $(kafka_version)) in $(elapsed "$started") s"
}

fetch() { with_lock 8 "$(dirname -- "$LIBS")/.fetch.lock" do_fetch "$@"; }

elapsed() {
    local ms=$(($(now_ms) - $1))
    printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100))
}

read_pid() {
    [[ -f $PID_FILE ]] || return 1
    local pid
    pid=$(<"$PID_FILE")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    printf '%s' "$pid"
}

# True if process $1 exists and has not exited (a dead child of ours stays a zombie until this
# script exits, and kill -0 still succeeds on a zombie).
alive() {
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [[ -n $state && $state != Z* ]]
}

# True if $1 is alive and is the broker started with this home's server.properties, so that a
# recycled pid never gets signalled.
is_our_broker() {
    local args
    alive "$1" || return 1
    args=$(ps -ww -o args= -p "$1" 2>/dev/null) || return 1
    [[ $args == *"kafka.Kafka $SERVER_PROPERTIES"* ]]
}

port_open() {
    timeout 2 bash -c "exec 3<>/dev/tcp/$HOST/$1" 2>/dev/null
}

print_log_tail() {
    if [[ -s $LOG_FILE ]]; then
        log "last 50 lines of $LOG_FILE:"
        tail -n 50 -- "$LOG_FILE" >&2
    else
        log "$LOG_FILE is empty or missing"
    fi
}

write_config() {
    mkdir -p -- "$DATA_DIR" "$LOG_DIR" "$CONF_DIR"
    cat >"$SERVER_PROPERTIES" <<EOF
# Written by deploy/kafka.sh on every start; edit the script, not this file.
# One node in KRaft combined mode with a static one-voter quorum, bound to loopback only.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@$HOST:$CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://$HOST:$CONTROLLER_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$DATA_DIR

# Topics: Faust creates its own (and its changelogs), so auto-creation stays on.
auto.create.topics.enable=true
num.partitions=4
default.replication.factor=1
min.insync.replicas=1

# Internal topics on a single node: one replica; one partition makes the first group join fast.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0

# Small thread pools for a 2-core machine.
num.network.threads=2
num.io.threads=2
background.threads=2
num.replica.fetchers=1
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1

# Faust changelog topics are compacted, so the cleaner stays on, with a 32 MiB buffer.
log.cleaner.enable=true
log.cleaner.dedupe.buffer.size=33554432
EOF
    cat >"$LOG4J_CONFIG" <<'EOF'
# Written by deploy/kafka.sh. The broker's stdout (and so this log) goes to logs/server.log.
status = warn
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = WARN
EOF
}

java_tool() {
    java -Xmx256m -XX:TieredStopAtLevel=1 -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$LOG4J_CONFIG" -cp "$LIBS/*" "$@" 8>&- 9>&-
}

format_storage() {
    if [[ -f $DATA_DIR/meta.properties ]]; then
        return 0
    fi
    local cluster_id
    cluster_id=$(java_tool kafka.tools.StorageTool random-uuid | tail -n 1)
    [[ $cluster_id =~ ^[A-Za-z0-9_-]{22}$ ]] || die "StorageTool random-uuid printed '$cluster_id'"
    log "formatting $DATA_DIR for new cluster $cluster_id"
    java_tool kafka.tools.StorageTool format --cluster-id "$cluster_id" \
        --config "$SERVER_PROPERTIES" --ignore-formatted >>"$LOG_FILE" 2>&1 ||
        { print_log_tail; die "formatting $DATA_DIR failed"; }
}

# Stops pid $1: TERM, then KILL after STOP_TIMEOUT seconds.
terminate() {
    local pid=$1 waited=0
    kill -TERM "$pid" 2>/dev/null || return 0
    while alive "$pid"; do
        if ((waited == STOP_TIMEOUT * 10)); then
            log "pid $pid still alive after ${STOP_TIMEOUT} s; sending KILL"
            kill -KILL "$pid" 2>/dev/null || true
        elif ((waited > STOP_TIMEOUT * 10 + 100)); then
            die "pid $pid survived KILL for 10 s"
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
}

# Waits until pid $1 logged READY_LINE and the client port accepts connections.
wait_ready() {
    local pid=$1 started=$2 deadline=$(($(now_ms) + START_TIMEOUT * 1000))
    while true; do
        if ! alive "$pid"; then
            rm -f -- "$PID_FILE"
            print_log_tail
            die "the broker (pid $pid) exited during start-up"
        fi
        if grep -qF -- "$READY_LINE" "$LOG_FILE" 2>/dev/null && port_open "$PORT"; then
            log "Kafka $(kafka_version) ready at $HOST:$PORT (pid $pid) after $(elapsed "$started") s"
            return 0
        fi
        if (($(now_ms) >= deadline)); then
            print_log_tail
            log "not ready after ${START_TIMEOUT} s (ADAMEM_KAFKA_START_TIMEOUT); stopping pid $pid"
            terminate "$pid"
            rm -f -- "$PID_FILE"
            exit 1
        fi
        sleep 0.2
    done
}

do_start() {
    local started pid port
    started=$(now_ms)
    if pid=$(read_pid) && is_our_broker "$pid"; then
        if port_open "$PORT"; then
            log "already running at $HOST:$PORT (pid $pid)"
            return 0
        fi
        log "pid $pid is starting; waiting for it"
        wait_ready "$pid" "$started"
        return 0
    fi
    rm -f -- "$PID_FILE"
    for port in "$PORT" "$CONTROLLER_PORT"; do
        if port_open "$port"; then
            die "$HOST:$port is already in use by another process; stop it or choose free ports with ADAMEM_KAFKA_PORT / ADAMEM_KAFKA_CONTROLLER_PORT"
        fi
    done
    require_java
    fetch quiet
    write_config
    if [[ -f $LOG_FILE ]]; then
        mv -f -- "$LOG_FILE" "$LOG_FILE.1"
    fi
    : >"$LOG_FILE"
    format_storage
    # A session of its own, so that a Ctrl-C or a job-control kill aimed at the caller's process
    # group does not reach the broker; stdin/stdout redirected so that callers capturing our
    # output are not held open by it. (A background job is no group leader, so setsid does not
    # fork and $! stays the JVM's pid.)
    local detach=()
    if command -v setsid >/dev/null; then detach=(setsid); fi
    # shellcheck disable=SC2086  # the option strings are word lists on purpose
    ${detach[@]+"${detach[@]}"} java $HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
        -Djava.awt.headless=true -Dlog4j2.configurationFile="$LOG4J_CONFIG" $JVM_OPTS \
        -cp "$LIBS/*" kafka.Kafka "$SERVER_PROPERTIES" \
        </dev/null >>"$LOG_FILE" 2>&1 8>&- 9>&- &
    pid=$!
    printf '%s\n' "$pid" >"$PID_FILE"
    log "started pid $pid; waiting up to ${START_TIMEOUT} s for $HOST:$PORT (log: $LOG_FILE)"
    wait_ready "$pid" "$started"
}

do_stop() {
    local pid
    if ! pid=$(read_pid); then
        log "not running (no $PID_FILE)"
        return 0
    fi
    if ! is_our_broker "$pid"; then
        log "pid $pid is not this broker any more; removing stale $PID_FILE"
        rm -f -- "$PID_FILE"
        return 0
    fi
    local started
    started=$(now_ms)
    terminate "$pid"
    rm -f -- "$PID_FILE"
    log "stopped pid $pid in $(elapsed "$started") s"
}

do_status() {
    local pid
    if ! pid=$(read_pid) || ! is_our_broker "$pid"; then
        log "not running"
        return 1
    fi
    if ! port_open "$PORT"; then
        log "pid $pid is alive but $HOST:$PORT does not accept connections (starting, or unhealthy: see $LOG_FILE)"
        return 1
    fi
    log "running at $HOST:$PORT (pid $pid, Kafka $(kafka_version), data $DATA_DIR)"
}

do_reset() {
    do_stop
    rm -rf -- "$DATA_DIR"
    log "deleted $DATA_DIR"
}

main() {
    local command=${1:-help}
    check_settings
    case $command in
        fetch) fetch ;;
        start) with_lock 9 "$KAFKA_HOME/kafka.lock" do_start ;;
        stop) with_lock 9 "$KAFKA_HOME/kafka.lock" do_stop ;;
        status) do_status ;;
        reset) with_lock 9 "$KAFKA_HOME/kafka.lock" do_reset ;;
        help | -h | --help) usage ;;
        *)
            usage >&2
            die "unknown command '$command'"
            ;;
    esac
}

main "$@"
