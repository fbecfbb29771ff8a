#!/usr/bin/env bash
# Build the Java conformance check (tests/conformance/test_java.py runs it) into target/, which
# git ignores:
#   target/libs/    the runtime jars of pom.xml (Avro, kafka-clients, slf4j), by Maven
#   target/tools/   avro-tools, by Maven
#   target/classes/ src/ compiled by javac
# Each step is skipped while its inputs (pom.xml; the sources) are unchanged, so a second run
# costs a few hashes. Maven runs offline first (the jars are usually in ~/.m2 already: the
# broker's share it) and goes to Maven Central only when something is missing.
set -euo pipefail
HERE=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
TARGET="$HERE/target"
log() { printf 'conformance/java: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

command -v javac >/dev/null || die "javac not found: the conformance check needs a JDK 17+ (e.g. apt-get install openjdk-17-jdk-headless)"
mkdir -p -- "$TARGET"
if command -v flock >/dev/null; then
    exec 7>"$TARGET/.build.lock"
    flock -w 600 7 || die "could not lock $TARGET/.build.lock within 600 s"
fi

pom_hash=$(sha256sum "$HERE/pom.xml" | cut -d ' ' -f 1)
if [[ ! -f $TARGET/.libs-complete || $(<"$TARGET/.libs-complete") != "$pom_hash" ]]; then
    command -v mvn >/dev/null || die "mvn not found: Maven 3.6+ resolves the jars (e.g. apt-get install maven)"
    rm -rf -- "$TARGET/libs" "$TARGET/tools" "$TARGET/.libs-complete" "$TARGET/.classes-complete"
    goals=(-B -f "$HERE/pom.xml" dependency:copy-dependencies@libs dependency:copy@tools)
    # Maven 3.8 prints stray colour codes even with -q -B, so its output is shown only on failure.
    if ! mvn -q -o "${goals[@]}" >/dev/null 2>&1; then
        log "resolving the jars with Maven (not all in ~/.m2 yet) ..."
        if ! output=$(mvn -q "${goals[@]}" 2>&1); then
            printf '%s\n' "$output" | sed 's/\x1b\[[0-9;]*m//g' >&2
            die "mvn could not resolve $HERE/pom.xml (is Maven Central reachable?)"
        fi
    fi
    printf '%s' "$pom_hash" >"$TARGET/.libs-complete"
    log "jars in $TARGET/libs and $TARGET/tools"
fi

sources=$(find "$HERE/src" -name '*.java' | LC_ALL=C sort)
src_hash=$( { printf '%s\n' "$pom_hash"; javac -version 2>&1; cat $sources; } | sha256sum | cut -d ' ' -f 1)
if [[ ! -f $TARGET/.classes-complete || $(<"$TARGET/.classes-complete") != "$src_hash" ]]; then
    rm -rf -- "$TARGET/classes"
    # shellcheck disable=SC2086  # one word per source file
    javac -d "$TARGET/classes" -cp "$TARGET/libs/*" --release 17 -Xlint:all -Werror -encoding UTF-8 $sources
    printf '%s' "$src_hash" >"$TARGET/.classes-complete"
    log "compiled $(wc -w <<<"$sources") source file(s) into $TARGET/classes"
fi
