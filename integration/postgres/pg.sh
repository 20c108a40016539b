#!/usr/bin/env bash
# pg.sh: run a real PostgreSQL server on loopback for the pgsink tests and
# the PostgreSQL sink, without Docker, from Debian's postgresql package.
#
#   pg.sh up                   create the cluster if needed, start it, create the
#                              database processor; prints the connection URL last
#   pg.sh down [--wipe]        stop it (fast); --wipe also deletes its folder
#   pg.sh stop fast|immediate  stop it with that shutdown mode (immediate: a crash)
#   pg.sh start                start the existing cluster again; prints the URL last
#   pg.sh restart fast|immediate   stop with that mode, then start (fault drills)
#   pg.sh status               running or stopped, with pid and URL
#   pg.sh url                  print the connection URL (starts nothing)
#   pg.sh psql [ARGS...]       psql connected to the database processor
#
# See README.md beside this file for the folder, port and user.
set -euo pipefail

DIR=${PROCESSOR_PG_DIR:-/tmp/processor-pg}
PORT=${PROCESSOR_PG_PORT:-15432}
HOST=127.0.0.1
START_TIMEOUT=${PROCESSOR_PG_START_TIMEOUT:-60}
STOP_TIMEOUT=${PROCESSOR_PG_STOP_TIMEOUT:-60}
# The database superuser, its password and the database the URL names.
# The password is a fixed, public test value: the server listens on
# loopback only.
DB_USER=processor
DB_PASSWORD=processor
DB_NAME=processor

DATA="$DIR/data"
LOG="$DIR/postgres.log"

die() { printf 'pg.sh: error: %s\n' "$*" >&2; exit 1; }
info() { printf 'pg.sh: %s\n' "$*" >&2; }

usage() {
  sed -n '2,15s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit "${1:-2}"
}

url() { printf 'postgres://%s:%s@%s:%s/%s?sslmode=disable\n' "$DB_USER" "$DB_PASSWORD" "$HOST" "$PORT" "$DB_NAME"; }

check_settings() {
  [[ $PORT =~ ^[0-9]+$ ]] && ((PORT > 0 && PORT < 65536)) || die "PROCESSOR_PG_PORT='$PORT' is not a port number"
  [[ $DIR == /* ]] || die "PROCESSOR_PG_DIR='$DIR' must be an absolute path"
  [[ $START_TIMEOUT =~ ^[0-9]+$ ]] || die "PROCESSOR_PG_START_TIMEOUT='$START_TIMEOUT' is not a number of seconds"
  [[ $STOP_TIMEOUT =~ ^[0-9]+$ ]] || die "PROCESSOR_PG_STOP_TIMEOUT='$STOP_TIMEOUT' is not a number of seconds"
}

# find_bin: set BIN to the bin folder of the highest PostgreSQL version
# installed (Debian installs each major version under
# /usr/lib/postgresql/<version>/bin), or PROCESSOR_PG_BIN when set.
find_bin() {
  if [[ -n ${PROCESSOR_PG_BIN:-} ]]; then
    BIN=$PROCESSOR_PG_BIN
  else
    BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  fi
  local b
  for b in initdb pg_ctl postgres psql pg_isready; do
    [[ -n $BIN && -x $BIN/$b ]] \
      || die "PostgreSQL's $b is not in ${BIN:-/usr/lib/postgresql/*/bin}: install the Debian package postgresql (apt-get install postgresql)"
  done
}

# as_pg CMD...: run a server command as the user that owns the cluster.
# PostgreSQL refuses to run as root, so root runs it as the user postgres
# (which the Debian package creates), or PROCESSOR_PG_OS_USER; anyone else
# runs it as themselves. The command runs in DIR, which that user can enter.
# 9>&-: the server must not inherit (and so hold) pg.sh's lock.
as_pg() {
  if ((EUID == 0)); then
    (cd "$DIR" && runuser -u "$OS_USER" -- "$@" 9>&-)
  else
    (cd "$DIR" && "$@" 9>&-)
  fi
}

# prepare_dir: create DIR, owned by the user the server runs as, and take
# the lock that serialises pg.sh commands on it (e.g. parallel tests).
prepare_dir() {
  mkdir -p "$DIR"
  if ((EUID == 0)); then
    OS_USER=${PROCESSOR_PG_OS_USER:-postgres}
    id -u "$OS_USER" >/dev/null 2>&1 \
      || die "no user '$OS_USER' to run PostgreSQL as (root cannot); install the Debian package postgresql, which creates it, or set PROCESSOR_PG_OS_USER"
    chown "$OS_USER:" "$DIR"
    runuser -u "$OS_USER" -- test -w "$DIR" -a -x "$DIR" \
      || die "the user $OS_USER cannot enter $DIR (a parent folder is private?); choose a PROCESSOR_PG_DIR it can reach, e.g. under /tmp"
  fi
  chmod 700 "$DIR"
  exec 9>"$DIR/.lock"
  flock -w $((START_TIMEOUT + STOP_TIMEOUT + 30)) 9 || die "timed out waiting for the lock on $DIR (another pg.sh is busy there)"
}

# server_pid: print the pid of the running postmaster of DATA, or fail.
server_pid() {
  local pid
  [[ -f $DATA/postmaster.pid ]] || return 1
  pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  # Guard against pid reuse: the process must be a postgres of this folder.
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$DATA" || return 1
  printf '%s\n' "$pid"
}

# running_port: the port the running server was started with.
running_port() { sed -n '4p' "$DATA/postmaster.pid" 2>/dev/null; }

port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# init_cluster: initdb into DATA once. The superuser is DB_USER with
# password DB_PASSWORD; connections over the unix socket (in DATA, only
# reachable by its owner) are trusted, TCP ones need the password
# (scram-sha-256), so that the URL tests password authentication too.
init_cluster() {
  [[ -f $DATA/PG_VERSION ]] && return 0
  local tmp="$DIR/data.tmp"
  rm -rf "$tmp"
  (umask 077 && printf '%s\n' "$DB_PASSWORD" >"$DIR/pwfile")
  ((EUID == 0)) && chown "$OS_USER:" "$DIR/pwfile"
  info "initdb into $DATA ($("$BIN/postgres" --version))"
  # --no-sync: a test cluster; its files need not survive a machine crash
  # (a server crash, 'stop immediate', is recovered from the WAL as usual).
  if ! as_pg "$BIN/initdb" -D "$tmp" -U "$DB_USER" --pwfile="$DIR/pwfile" \
      --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --no-locale --no-sync \
      >"$DIR/initdb.out" 2>&1; then
    rm -f "$DIR/pwfile"
    cat "$DIR/initdb.out" >&2
    die "initdb failed (output above, also in $DIR/initdb.out)"
  fi
  rm -f "$DIR/pwfile"
  printf "\n# pg.sh: listen address, port and socket folder\ninclude_if_exists = 'pg-sh.conf'\n" >>"$tmp/postgresql.conf"
  mv "$tmp" "$DATA"
}

# write_conf: the settings pg.sh owns, rewritten on every start.
write_conf() {
  cat >"$DATA/pg-sh.conf" <<EOF
# Written by pg.sh on every start.
listen_addresses = '$HOST'
port = $PORT
unix_socket_directories = '$DATA'
EOF
  ((EUID == 0)) && chown "$OS_USER:" "$DATA/pg-sh.conf"
  return 0
}

# start_server: start the cluster of DATA if it is not running, and wait
# until it accepts connections.
start_server() {
  local pid
  if pid=$(server_pid); then
    local p
    p=$(running_port)
    [[ $p == "$PORT" ]] || die "PostgreSQL in $DIR is already running on port $p, not $PORT; run '$0 down' first"
    info "PostgreSQL is already running (pid $pid), log $LOG"
    return 0
  fi
  port_open "$PORT" && die "port $HOST:$PORT is already in use by another process; stop it or set PROCESSOR_PG_PORT"
  # A server that was killed (not stopped) leaves its lock files behind;
  # their pid may since belong to another process, which PostgreSQL
  # would take for a live server. server_pid found none of this folder.
  rm -f "$DATA/postmaster.pid" "$DATA"/.s.PGSQL.*.lock
  write_conf
  ((EUID == 0)) && { touch "$LOG"; chown "$OS_USER:" "$LOG"; }
  local t0=$SECONDS
  info "starting PostgreSQL on $HOST:$PORT (log $LOG)"
  if ! as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t "$START_TIMEOUT" -s start >&2; then
    tail -n 20 "$LOG" >&2 || true
    die "PostgreSQL did not start within ${START_TIMEOUT}s; see $LOG"
  fi
  local deadline=$((SECONDS + START_TIMEOUT))
  until "$BIN/pg_isready" -q -h "$HOST" -p "$PORT" -t 2; do
    ((SECONDS < deadline)) || die "PostgreSQL started but does not accept connections on $HOST:$PORT; see $LOG"
    sleep 0.2
  done
  info "PostgreSQL is up (pid $(server_pid || echo '?'), $((SECONDS - t0))s)"
}

# ensure_database: create the database DB_NAME if it is missing (over the
# unix socket, which is trusted).
ensure_database() {
  local q=(-X -q -v ON_ERROR_STOP=1 -h "$DATA" -p "$PORT" -U "$DB_USER" -d postgres -tA)
  if [[ -z $(as_pg "$BIN/psql" "${q[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'") ]]; then
    as_pg "$BIN/psql" "${q[@]}" -c "CREATE DATABASE $DB_NAME" >&2 || die "could not create the database $DB_NAME"
  fi
}

# stop_server MODE: stop the running server with pg_ctl's shutdown mode
# (fast: roll back and disconnect clients, checkpoint; immediate: quit at
# once, recovery on the next start).
stop_server() {
  local mode=$1 pid
  if ! pid=$(server_pid); then
    info "PostgreSQL is not running"
    return 0
  fi
  if ! as_pg "$BIN/pg_ctl" -D "$DATA" -m "$mode" -w -t "$STOP_TIMEOUT" -s stop >&2; then
    die "PostgreSQL (pid $pid) did not stop within ${STOP_TIMEOUT}s; see $LOG"
  fi
  info "PostgreSQL stopped (pid $pid, $mode)"
}

mode_arg() { # mode_arg CMD ARGS...: check the one shutdown mode argument
  local cmd=$1
  shift
  (($# == 1)) && [[ $1 == fast || $1 == immediate ]] || die "usage: pg.sh $cmd fast|immediate"
}

cmd_up() {
  find_bin
  prepare_dir
  init_cluster
  start_server
  ensure_database
  url
}

cmd_start() {
  find_bin
  prepare_dir
  [[ -f $DATA/PG_VERSION ]] || die "no cluster in $DATA; run '$0 up' first"
  start_server
  url
}

cmd_stop() {
  find_bin
  prepare_dir
  stop_server "$1"
}

cmd_restart() {
  find_bin
  prepare_dir
  [[ -f $DATA/PG_VERSION ]] || die "no cluster in $DATA; run '$0 up' first"
  stop_server "$1"
  start_server
  url
}

cmd_down() {
  local wipe=no
  (($# <= 1)) || die "too many arguments (only --wipe is accepted)"
  case "${1:-}" in
    "") ;;
    --wipe) wipe=yes ;;
    *) die "unknown option '$1' (only --wipe is accepted)" ;;
  esac
  [[ -d $DIR ]] || { info "nothing in $DIR"; return 0; }
  prepare_dir
  if server_pid >/dev/null; then
    find_bin
    stop_server fast
  fi
  if [[ $wipe == yes ]]; then
    find "$DIR" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
    info "wiped $DIR"
  fi
}

cmd_status() {
  local pid
  if pid=$(server_pid); then
    printf 'running  pid %-7s %s  %s\n' "$pid" "$(url)" "$DIR"
  else
    printf 'stopped  %s\n' "$DIR"
  fi
}

main() {
  local cmd=${1:-}
  (($# > 0)) && shift
  check_settings
  case "$cmd" in
    up) (($# == 0)) || die "up takes no arguments"; cmd_up ;;
    down) cmd_down "$@" ;;
    start) (($# == 0)) || die "start takes no arguments"; cmd_start ;;
    stop) mode_arg stop "$@"; cmd_stop "$1" ;;
    restart) mode_arg restart "$@"; cmd_restart "$1" ;;
    status) (($# == 0)) || die "status takes no arguments"; cmd_status ;;
    url) (($# == 0)) || die "url takes no arguments"; url ;;
    psql) find_bin; exec "$BIN/psql" -X "$(url)" "$@" ;;
    -h | --help | help) usage 0 ;;
    "") usage 2 ;;
    *) info "unknown command '$cmd'"; usage 2 ;;
  esac
}

main "$@"
