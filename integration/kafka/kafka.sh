#!/usr/bin/env bash
# kafka.sh: run a real Apache Kafka broker (or a 3-node cluster) on loopback,
# without Docker, from the jars Maven fetches into a cache folder.
#
#   kafka.sh fetch            download the broker and tools jars (skipped when cached)
#   kafka.sh up               start one KRaft broker+controller (plaintext, plus
#                             secured listeners: SASL_SSL, mutual TLS and SASL_SSL
#                             with OAUTHBEARER); prints the plaintext bootstrap last
#   kafka.sh secure-env       print the settings of a client of the secured
#                             listeners, as shell exports (after 'up')
#   kafka.sh down [--wipe]    stop it (--wipe also deletes its data and logs)
#   kafka.sh cluster-up       start 3 KRaft nodes; prints bootstrap list last
#   kafka.sh cluster-down [--wipe]
#   kafka.sh kill N           SIGKILL cluster node N (1-3)
#   kafka.sh stop N           SIGTERM cluster node N and wait for it to exit
#   kafka.sh start N          (re)start cluster node N from its data and wait
#   kafka.sh status           show what is running
#   kafka.sh bootstrap [single|cluster]   print the bootstrap address(es)
#   kafka.sh consumer-groups ARGS...   Kafka's kafka-consumer-groups tool, e.g.
#                             --describe --group G (default --bootstrap-server
#                             is the single broker)
#
# See README.md beside this file for ports and environment overrides.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
POM="$SCRIPT_DIR/pom.xml"
LOG4J_CONFIG="$SCRIPT_DIR/log4j2.xml"

CACHE_DIR=${KAFKA_CACHE_DIR:-$SCRIPT_DIR/.cache}
LIB_DIR="$CACHE_DIR/lib"
RUN_ROOT=${KAFKA_RUN_ROOT:-$SCRIPT_DIR/.run}
SINGLE_DIR=${KAFKA_RUN_DIR:-$RUN_ROOT/single}
CLUSTER_DIR=${KAFKA_CLUSTER_RUN_DIR:-$RUN_ROOT/cluster}

HOST=127.0.0.1
SINGLE_PORT=${KAFKA_PORT:-19092}
SINGLE_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-} # default: KAFKA_PORT+1, set in check_ports
# The single broker's secured listeners (see "Secured listeners" in README.md).
SINGLE_SASL_PORT=${KAFKA_SASL_SSL_PORT:-} # SASL_SSL; default: KAFKA_PORT+2
SINGLE_MTLS_PORT=${KAFKA_MTLS_PORT:-}     # SSL with client certificates required; default: KAFKA_PORT+3
SINGLE_OAUTH_PORT=${KAFKA_OAUTH_PORT:-}   # SASL_SSL with OAUTHBEARER (JWTs); default: KAFKA_PORT+4
# Cluster node N: broker port BASE+100*N, controller port BASE+100*N+1.
CLUSTER_BASE_PORT=${KAFKA_CLUSTER_BASE_PORT:-19092}
CLUSTER_NODES=3

SINGLE_HEAP=${KAFKA_HEAP_OPTS:--Xmx512m -Xms512m}
CLUSTER_HEAP=${KAFKA_CLUSTER_HEAP_OPTS:-${KAFKA_HEAP_OPTS:--Xmx384m -Xms384m}}
START_TIMEOUT=${KAFKA_START_TIMEOUT:-90}
STOP_TIMEOUT=${KAFKA_STOP_TIMEOUT:-30}
# G1 as in Kafka's own scripts; C1 only (TieredStopAtLevel=1) roughly halves
# the CPU a broker burns while starting, which matters when three of them
# start at once on two cores. Test traffic does not need C2.
JVM_OPTS=${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -XX:TieredStopAtLevel=1}
# The command-line tools are short-lived clients: a small heap, the serial
# collector and C1 only start them fastest.
TOOLS_JVM_OPTS=${KAFKA_TOOLS_JVM_OPTS:--Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1}

STARTED_MARKER='Kafka Server started'

die() { printf 'kafka.sh: error: %s\n' "$*" >&2; exit 1; }
info() { printf 'kafka.sh: %s\n' "$*" >&2; }

usage() {
  sed -n '2,23s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit "${1:-2}"
}

need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found on PATH ($2)"; }

valid_port() { [[ $1 =~ ^[0-9]+$ ]] && (( $1 > 0 && $1 < 65536 )); }

check_ports() {
  valid_port "$SINGLE_PORT" || die "KAFKA_PORT='$SINGLE_PORT' is not a port number"
  [[ -n $SINGLE_CONTROLLER_PORT ]] || SINGLE_CONTROLLER_PORT=$((SINGLE_PORT + 1))
  valid_port "$SINGLE_CONTROLLER_PORT" || die "KAFKA_CONTROLLER_PORT='$SINGLE_CONTROLLER_PORT' is not a port number"
  [[ -n $SINGLE_SASL_PORT ]] || SINGLE_SASL_PORT=$((SINGLE_PORT + 2))
  valid_port "$SINGLE_SASL_PORT" || die "KAFKA_SASL_SSL_PORT='$SINGLE_SASL_PORT' is not a port number"
  [[ -n $SINGLE_MTLS_PORT ]] || SINGLE_MTLS_PORT=$((SINGLE_PORT + 3))
  valid_port "$SINGLE_MTLS_PORT" || die "KAFKA_MTLS_PORT='$SINGLE_MTLS_PORT' is not a port number"
  [[ -n $SINGLE_OAUTH_PORT ]] || SINGLE_OAUTH_PORT=$((SINGLE_PORT + 4))
  valid_port "$SINGLE_OAUTH_PORT" || die "KAFKA_OAUTH_PORT='$SINGLE_OAUTH_PORT' is not a port number"
  [[ $CLUSTER_BASE_PORT =~ ^[0-9]+$ ]] && valid_port $((CLUSTER_BASE_PORT + 100 * CLUSTER_NODES + 1)) \
    || die "KAFKA_CLUSTER_BASE_PORT='$CLUSTER_BASE_PORT' is not usable"
  [[ $START_TIMEOUT =~ ^[0-9]+$ ]] || die "KAFKA_START_TIMEOUT='$START_TIMEOUT' is not a number of seconds"
  [[ $STOP_TIMEOUT =~ ^[0-9]+$ ]] || die "KAFKA_STOP_TIMEOUT='$STOP_TIMEOUT' is not a number of seconds"
}

# port_open PORT: true when something accepts TCP connections on HOST:PORT.
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# Serialise commands that touch one run folder (e.g. parallel `go test` packages).
lock() {
  mkdir -p "$1"
  exec 9>"$1/.lock"
  flock -w $((START_TIMEOUT + STOP_TIMEOUT + 30)) 9 || die "timed out waiting for the lock on $1 (another kafka.sh is busy there)"
}

# ---------------------------------------------------------------- fetch ----

# Jars the commands start classes from: the broker (kafka.Kafka,
# kafka.tools.StorageTool) and the tools (org.apache.kafka.tools.*). Globs
# in LIB_DIR; kafka-tools-[0-9]* so that kafka-tools-api-*.jar, which the
# broker brings alone, does not count.
REQUIRED_JARS=('kafka_2.13-[0-9]*.jar' 'kafka-tools-[0-9]*.jar')

# has_jars DIR: DIR holds every required jar; otherwise print the first
# missing glob and fail.
has_jars() {
  local g
  for g in "${REQUIRED_JARS[@]}"; do
    compgen -G "$1/$g" >/dev/null || { printf '%s\n' "$g"; return 1; }
  done
}

# cache_ok SUM: the cache was filled from a pom.xml with sha256 SUM and
# holds every required jar. A cache filled before a jar was added to the pom
# (or one emptied by hand) is not: fetch fills it again.
cache_ok() {
  local stamp="$LIB_DIR/.complete"
  [[ -f $stamp && $(cat "$stamp") == "$1" ]] && has_jars "$LIB_DIR" >/dev/null
}

fetch() {
  local want missing
  want=$(sha256sum "$POM" | cut -d' ' -f1)
  cache_ok "$want" && return 0
  mkdir -p "$CACHE_DIR"
  exec 8>"$CACHE_DIR/.fetch.lock"
  flock -w 600 8 || die "timed out waiting for another fetch into $CACHE_DIR"
  if cache_ok "$want"; then exec 8>&-; return 0; fi
  need mvn "install Maven 3.x: it downloads the Kafka jars from Maven Central"
  info "fetching Kafka jars into $LIB_DIR (mvn dependency:copy-dependencies)"
  local tmp="$CACHE_DIR/lib.tmp.$$"
  rm -rf "$tmp"
  # (sed: Maven 3.8 prints stray ANSI resets even in batch mode)
  if ! mvn -q -B -Dstyle.color=never -f "$POM" dependency:copy-dependencies -DoutputDirectory="$tmp" 2>&1 \
      | sed 's/\x1b\[[0-9;]*m//g' >&2; then
    rm -rf "$tmp"
    die "mvn could not fetch the Kafka jars (see the Maven output above)"
  fi
  if ! missing=$(has_jars "$tmp"); then
    rm -rf "$tmp"
    die "mvn ran but no $missing arrived (is it in $POM?)"
  fi
  printf '%s\n' "$want" >"$tmp/.complete"
  rm -rf "$LIB_DIR"
  mv "$tmp" "$LIB_DIR"
  exec 8>&-
  info "fetched $(find "$LIB_DIR" -name '*.jar' | wc -l) jars"
}

# ------------------------------------------------------- node primitives ----
# A node lives in a folder D: D/server.properties, D/data (log.dirs),
# D/server.log (log4j2), D/server.out (JVM stdout/stderr), D/kafka.pid.

# node_pid D: print the pid of the live broker of folder D, or fail.
node_pid() {
  local d=$1 pid
  [[ -f $d/kafka.pid ]] || return 1
  pid=$(cat "$d/kafka.pid" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  # Guard against pid reuse: the process must be our java with our config.
  tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$d/server.properties" || return 1
  printf '%s\n' "$pid"
}

java_cmd() { # java_cmd D HEAP
  local d=$1 heap=$2
  local -a more=()
  # Kafka 4.x reads an OAUTHBEARER JWKS (or token) URL only if this system
  # property lists it.
  [[ -f $d/oauth/.complete ]] && more+=("-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=$(oauth_jwks_url "$d")")
  # shellcheck disable=SC2086  # heap options are deliberately word-split
  printf '%s\0' java $heap $JVM_OPTS -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    -Dkafka.logs.dir="$d" -Dlog4j2.configurationFile="$LOG4J_CONFIG" "${more[@]}" \
    -cp "$LIB_DIR/*"
}

# format_storage D [extra format args...]: format D/data once.
format_storage() {
  local d=$1; shift
  [[ -f $d/data/meta.properties ]] && return 0
  local cid
  cid=$(cat "$d/cluster.id")
  local -a cmd
  mapfile -d '' cmd < <(java_cmd "$d" "-Xmx256m")
  if ! "${cmd[@]}" kafka.tools.StorageTool format --config "$d/server.properties" \
        --cluster-id "$cid" "$@" >"$d/format.out" 2>&1; then
    cat "$d/format.out" >&2
    die "formatting the storage in $d/data failed (output above, also in $d/format.out)"
  fi
}

# launch D HEAP NAME: start the broker of D in the background (no waiting).
launch() {
  local d=$1 heap=$2 name=$3 port p
  port=$(sed -n 's/^# broker-port=//p' "$d/server.properties")
  local cport more
  cport=$(sed -n 's/^# controller-port=//p' "$d/server.properties")
  more=$(sed -n 's/^# secured-ports=//p' "$d/server.properties")
  # shellcheck disable=SC2086  # the secured ports are a space-separated list
  for p in "$port" "$cport" $more; do
    if port_open "$p"; then
      die "port $HOST:$p is already in use by another process; stop it or pick other ports (see README.md)"
    fi
  done
  info "starting $name on $HOST:$port (log $d/server.log)"
  local -a cmd
  mapfile -d '' cmd < <(java_cmd "$d" "$heap")
  # Remember where the log ends so that wait_ready only looks at new lines.
  stat -c %s "$d/server.log" 2>/dev/null >"$d/.log-offset" || echo 0 >"$d/.log-offset"
  {
    printf '\n===== %s starting: %s\n' "$(date -Is)" "${cmd[*]} kafka.Kafka $d/server.properties"
  } >>"$d/server.out"
  # setsid: survive the caller's process group (Ctrl-C of a test run);
  # the inner shell records its own pid, then becomes java via exec.
  # 8>&- 9>&-: the broker must not inherit (and so hold) kafka.sh's locks.
  rm -f "$d/kafka.pid"
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$d/kafka.pid" \
    "${cmd[@]}" kafka.Kafka "$d/server.properties" \
    </dev/null >>"$d/server.out" 2>&1 8>&- 9>&- &
  disown $! 2>/dev/null || true
}

# wait_ready D: wait until D's broker accepts connections and has logged
# that it started; fail with a pointer to the log otherwise.
wait_ready() {
  local d=$1 name=$2 port offset deadline pid
  port=$(sed -n 's/^# broker-port=//p' "$d/server.properties")
  offset=$(cat "$d/.log-offset" 2>/dev/null || echo 0)
  deadline=$((SECONDS + START_TIMEOUT))
  # The pid file is written by the launched shell a moment after launch.
  while [[ ! -s $d/kafka.pid ]] && (( SECONDS < deadline )); do sleep 0.1; done
  while :; do
    if ! pid=$(node_pid "$d"); then
      tail -n 30 "$d/server.out" >&2 || true
      die "$name exited during startup; see $d/server.log and $d/server.out"
    fi
    if port_open "$port"; then
      local size
      size=$(stat -c %s "$d/server.log" 2>/dev/null || echo 0)
      (( size < offset )) && offset=0 # the log rolled over
      if tail -c +$((offset + 1)) "$d/server.log" 2>/dev/null | grep -qF "$STARTED_MARKER"; then
        return 0
      fi
    fi
    if (( SECONDS >= deadline )); then
      # Do not leave a half-started broker behind for the next 'up' to trust.
      kill -KILL "$pid" 2>/dev/null || true
      rm -f "$d/kafka.pid"
      die "$name did not start within ${START_TIMEOUT}s (killed pid $pid); see $d/server.log (and $d/server.out)"
    fi
    sleep 0.5
  done
}

# stop_nodes SIGNAL D NAME [D NAME]...: stop brokers together. TERM waits up
# to STOP_TIMEOUT seconds for all of them, then SIGKILLs the ones left.
# (Stopping the nodes of a KRaft cluster one after another would leave the
# last one without a quorum, stuck in its controlled shutdown.)
stop_nodes() {
  local sig=$1 d name pid
  shift
  local -a pids=() names=() dirs=()
  while (($# >= 2)); do
    d=$1 name=$2
    shift 2
    if pid=$(node_pid "$d"); then
      pids+=("$pid") names+=("$name") dirs+=("$d")
      kill "-$sig" "$pid" 2>/dev/null || true
    else
      rm -f "$d/kafka.pid"
      info "$name is not running"
    fi
  done
  ((${#pids[@]} > 0)) || return 0
  local deadline=$((SECONDS + STOP_TIMEOUT)) i alive
  [[ $sig == KILL ]] && deadline=$((SECONDS + 10))
  while :; do
    alive=0
    for i in "${!pids[@]}"; do kill -0 "${pids[$i]}" 2>/dev/null && alive=1; done
    ((alive && SECONDS < deadline)) || break
    sleep 0.25
  done
  for i in "${!pids[@]}"; do
    local how="SIG$sig"
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      info "${names[$i]} (pid ${pids[$i]}) still running after ${STOP_TIMEOUT}s; sending SIGKILL (see ${dirs[$i]}/server.log)"
      kill -KILL "${pids[$i]}" 2>/dev/null || true
      local n=0
      while kill -0 "${pids[$i]}" 2>/dev/null && ((n < 40)); do sleep 0.25; n=$((n + 1)); done
      how="SIG$sig, then SIGKILL"
    fi
    rm -f "${dirs[$i]}/kafka.pid"
    info "${names[$i]} stopped (pid ${pids[$i]}, $how)"
  done
}

# new_cluster_id: what `kafka-storage random-uuid` prints (16 random bytes,
# URL-safe base64, no padding, not starting with '-'), without a JVM.
new_cluster_id() {
  local id
  while :; do
    id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
    [[ $id == -* ]] || break
  done
  printf '%s\n' "$id"
}

# Settings shared by the single broker and the cluster nodes.
common_props() { # common_props D [MORE_PROTOCOL_MAP_ENTRIES]
  cat <<EOF
process.roles=broker,controller
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT${2:+,$2}
inter.broker.listener.name=PLAINTEXT
log.dirs=$1/data
auto.create.topics.enable=true
num.partitions=1
offsets.topic.num.partitions=6
transaction.state.log.num.partitions=6
share.coordinator.state.topic.num.partitions=6
group.initial.rebalance.delay.ms=0
# Small machine (2 cores): fewer threads than the defaults.
num.network.threads=2
num.io.threads=4
background.threads=4
num.recovery.threads.per.data.dir=1
EOF
}

# ------------------------------------------------------------ secured ----
# The single broker's secured listeners: SASL_SSL (SCRAM-SHA-512 or PLAIN
# over TLS) and SSL that requires a client certificate (mutual TLS). A test
# CA, the broker's keystore, a client certificate and the users' passwords
# are made on first use into D/secure, and kept until 'down --wipe':
#
#   ca.p12, ca.pem           the CA (keystore; its certificate in PEM, for clients)
#   broker.p12               the broker's key and certificate (127.0.0.1, localhost)
#   truststore.p12           the CA, to which client certificates must chain
#   client.pem, client.key   a client certificate (CN=processor-client) and its key
#   processor.password       the password (SCRAM-SHA-512 and PLAIN) of user processor
#   reader.password          ... of user reader, who may do nothing (no ACLs)
#   store.pass               the keystores' password
#
# keytool (part of the JDK) makes the CA and the broker's keystore and signs
# the client certificate; the client's key and request come from openssl,
# without which there is no client certificate (secure-env leaves it out).

SECURE_USER=processor  # a super user: may do everything
SECURE_READER=reader   # no ACLs: authenticates, then is refused everything
SECURE_CLIENT_CN=processor-client

# random_secret: 24 random letters and digits, which the credential syntax
# of kafka-storage and kafka-configs takes without quoting.
random_secret() {
  local s
  s=$(head -c 600 /dev/urandom | LC_ALL=C tr -dc 'A-Za-z0-9')
  ((${#s} >= 24)) || die "could not make a random password"
  printf '%s\n' "${s:0:24}"
}

# keytool_in DIR ARGS...: keytool ARGS, its output kept in DIR/keytool.out.
keytool_in() {
  local dir=$1
  shift
  if ! keytool "$@" >>"$dir/keytool.out" 2>&1; then
    tail -n 20 "$dir/keytool.out" >&2
    die "keytool $1 failed (output above, also in $dir/keytool.out)"
  fi
}

# secure_material D: make D/secure, unless it is complete.
secure_material() {
  local s=$1/secure
  [[ -f $s/.complete ]] && return 0
  need keytool "it comes with the JDK; install a JDK 17+"
  rm -rf "$s"
  mkdir -p "$s"
  chmod 700 "$s"
  info "making a test CA, the broker's keystore and a client certificate in $s"
  random_secret >"$s/store.pass"
  random_secret >"$s/$SECURE_USER.password"
  random_secret >"$s/$SECURE_READER.password"
  local -a pass=(-storetype PKCS12 -storepass:file "$s/store.pass")
  local -a ec=(-keyalg EC -groupname secp256r1 -validity 3650)
  keytool_in "$s" -genkeypair -keystore "$s/ca.p12" "${pass[@]}" -alias ca -dname "CN=kafka.sh test CA" "${ec[@]}" \
    -ext bc:c -ext ku:c=keyCertSign,cRLSign
  keytool_in "$s" -exportcert -keystore "$s/ca.p12" "${pass[@]}" -alias ca -rfc -file "$s/ca.pem"
  keytool_in "$s" -genkeypair -keystore "$s/broker.p12" "${pass[@]}" -alias broker -dname "CN=localhost" "${ec[@]}"
  keytool_in "$s" -certreq -keystore "$s/broker.p12" "${pass[@]}" -alias broker -file "$s/broker.csr"
  keytool_in "$s" -gencert -keystore "$s/ca.p12" "${pass[@]}" -alias ca -infile "$s/broker.csr" -outfile "$s/broker.pem" \
    -rfc -validity 3650 -ext san=ip:127.0.0.1,dns:localhost -ext eku=serverAuth -ext ku=digitalSignature
  keytool_in "$s" -importcert -keystore "$s/broker.p12" "${pass[@]}" -alias ca -file "$s/ca.pem" -noprompt
  keytool_in "$s" -importcert -keystore "$s/broker.p12" "${pass[@]}" -alias broker -file "$s/broker.pem"
  keytool_in "$s" -importcert -keystore "$s/truststore.p12" "${pass[@]}" -alias ca -file "$s/ca.pem" -noprompt
  if command -v openssl >/dev/null 2>&1; then
    if ! { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$s/client.key" &&
      openssl req -new -key "$s/client.key" -subj "/CN=$SECURE_CLIENT_CN" -out "$s/client.csr"; } >>"$s/openssl.out" 2>&1; then
      cat "$s/openssl.out" >&2
      die "openssl could not make the client's key (output above, also in $s/openssl.out)"
    fi
    chmod 600 "$s/client.key"
    keytool_in "$s" -gencert -keystore "$s/ca.p12" "${pass[@]}" -alias ca -infile "$s/client.csr" -outfile "$s/client.pem" \
      -rfc -validity 3650 -ext eku=clientAuth -ext ku=digitalSignature
  else
    info "openssl not found: no client certificate for the mutual TLS listener (secure-env leaves it out)"
  fi
  rm -f "$s"/*.csr
  touch "$s/.complete"
}

# secure_props D: the broker settings of the secured listeners.
secure_props() {
  local s=$1/secure sp up rp
  sp=$(cat "$s/store.pass")
  up=$(cat "$s/$SECURE_USER.password")
  rp=$(cat "$s/$SECURE_READER.password")
  cat <<EOF
# Secured listeners: TLS with the broker's certificate from the test CA;
# SASL_SSL takes SCRAM-SHA-512 (users in the metadata log) or PLAIN (users
# below); SSL requires a client certificate signed by the CA.
ssl.keystore.type=PKCS12
ssl.keystore.location=$s/broker.p12
ssl.keystore.password=$sp
ssl.key.password=$sp
ssl.truststore.type=PKCS12
ssl.truststore.location=$s/truststore.p12
ssl.truststore.password=$sp
listener.name.ssl.ssl.client.auth=required
sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$SECURE_USER="$up" user_$SECURE_READER="$rp";
# ACLs: the plaintext listeners (ANONYMOUS), user $SECURE_USER and the
# client certificate are super users; user $SECURE_READER has no ACLs.
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:$SECURE_USER;User:CN=$SECURE_CLIENT_CN
EOF
}

# scram_args D: the kafka-storage format arguments that create the SCRAM
# users, NUL-separated.
scram_args() {
  local s=$1/secure u
  for u in "$SECURE_USER" "$SECURE_READER"; do
    printf '%s\0' --add-scram "SCRAM-SHA-512=[name=$u,password=$(cat "$s/$u.password")]"
  done
}

# scram_stamp D: what D/scram-users holds once the broker's SCRAM users
# have the passwords in D/secure.
scram_stamp() { cat "$1/secure/$SECURE_USER.password" "$1/secure/$SECURE_READER.password" | sha256sum | cut -d' ' -f1; }

# ensure_scram_users D: give the SCRAM users the passwords in D/secure on
# the running broker, through its plaintext listener, unless they have
# them (its storage was formatted with them, or this ran before). Needed
# for storage formatted before the secured listeners existed.
ensure_scram_users() {
  local d=$1 u
  [[ -f $d/scram-users && $(cat "$d/scram-users") == "$(scram_stamp "$d")" ]] && return 0
  info "creating the SCRAM-SHA-512 users $SECURE_USER and $SECURE_READER (kafka-configs)"
  for u in "$SECURE_USER" "$SECURE_READER"; do
    if ! tool org.apache.kafka.tools.ConfigCommand --bootstrap-server "$HOST:$SINGLE_PORT" --alter \
      --add-config "SCRAM-SHA-512=[password=$(cat "$d/secure/$u.password")]" \
      --entity-type users --entity-name "$u" >"$d/scram.out" 2>&1; then
      cat "$d/scram.out" >&2
      die "could not create the SCRAM user $u (output above, also in $d/scram.out)"
    fi
  done
  scram_stamp "$d" >"$d/scram-users"
}

# secure_env: what a client of the secured listeners needs, as shell
# exports: eval "$(kafka.sh secure-env)". Passwords are files, not values.
secure_env() {
  local d=$SINGLE_DIR s=$SINGLE_DIR/secure
  [[ -f $s/.complete ]] || die "no secured listeners in $d yet; run '$0 up' first"
  port_open "$SINGLE_SASL_PORT" \
    || info "warning: nothing listens on $HOST:$SINGLE_SASL_PORT; run '$0 up' ('$0 down' first if the broker predates the secured listeners)"
  emit() { printf 'export %s=%q\n' "$1" "$2"; }
  emit PROCESSOR_TEST_SECURE_BROKERS "$HOST:$SINGLE_SASL_PORT"
  emit PROCESSOR_TEST_SECURE_MTLS_BROKERS "$HOST:$SINGLE_MTLS_PORT"
  emit PROCESSOR_TEST_SECURE_CA_FILE "$s/ca.pem"
  emit PROCESSOR_TEST_SECURE_MECHANISM SCRAM-SHA-512
  emit PROCESSOR_TEST_SECURE_USERNAME "$SECURE_USER"
  emit PROCESSOR_TEST_SECURE_PASSWORD_FILE "$s/$SECURE_USER.password"
  emit PROCESSOR_TEST_SECURE_READER_USERNAME "$SECURE_READER"
  emit PROCESSOR_TEST_SECURE_READER_PASSWORD_FILE "$s/$SECURE_READER.password"
  if [[ -f $s/client.pem ]]; then
    emit PROCESSOR_TEST_SECURE_CERT_FILE "$s/client.pem"
    emit PROCESSOR_TEST_SECURE_KEY_FILE "$s/client.key"
  fi
  oauth_env "$d"
}

# ------------------------------------------------------------- oauth ----
# The single broker's OAUTHBEARER listener (SASL_SSL, listener OAUTH): it
# takes JWTs signed (RS256) with a test key, checked by Kafka's own
# OAuthBearerValidatorCallbackHandler against a JWKS file, with the issuer
# and audience below. No token endpoint runs here: a client (the tests)
# signs its tokens with the private key, or serves them from an endpoint of
# its own. Made on first use into D/oauth, kept until 'down --wipe', apart
# from D/secure so that a folder made before the listener existed gets it:
#
#   signer.key   the RSA private key (PKCS#8 PEM) that signs the tokens
#   signer.kid   its key id, the "kid" a token's header names
#   jwks.json    its public key as a JSON Web Key Set
#
# Without openssl there is no key, and so no OAUTHBEARER listener.

OAUTH_ISSUER=https://issuer.kafka-sh.test
OAUTH_AUDIENCE=kafka-sh-test
OAUTH_SUBJECT=$SECURE_USER # the principal of the tokens: a super user

# oauth_jwks_url D: the file: URL of D's JWKS.
oauth_jwks_url() { printf 'file://%s/oauth/jwks.json\n' "$1"; }

# oauth_b64url: stdin as unpadded base64url (RFC 7515), one line.
oauth_b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }

# oauth_material D: make D/oauth unless it is complete (or openssl is missing).
oauth_material() {
  local o=$1/oauth n e kid
  [[ -f $o/.complete ]] && return 0
  if ! command -v openssl >/dev/null 2>&1; then
    info "openssl not found: no OAUTHBEARER listener (secure-env leaves it out)"
    return 0
  fi
  rm -rf "$o"
  mkdir -p "$o"
  chmod 700 "$o"
  info "making the RSA key and JWKS of the OAUTHBEARER listener in $o"
  if ! { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$o/signer.key" &&
    n=$(openssl rsa -in "$o/signer.key" -noout -modulus) &&
    e=$(openssl rsa -in "$o/signer.key" -noout -text | sed -n 's/^publicExponent: \([0-9]*\) .*/\1/p'); } 2>>"$o/openssl.out"; then
    cat "$o/openssl.out" >&2
    die "openssl could not make the OAUTHBEARER signing key (output above, also in $o/openssl.out)"
  fi
  chmod 600 "$o/signer.key"
  [[ $e == 65537 ]] || die "openssl made an RSA key with public exponent '$e', not 65537"
  n=${n#Modulus=}
  [[ $n =~ ^[0-9A-F]+$ ]] || die "openssl printed no RSA modulus"
  kid=$(printf '%s' "$n" | sha256sum | cut -c1-16)
  printf '%s\n' "$kid" >"$o/signer.kid"
  # The modulus as bytes (printf %b of \xHH escapes), then base64url.
  n=$(printf '%b' "$(sed 's/../\\x&/g' <<<"$n")" | oauth_b64url)
  printf '{"keys":[{"kty":"RSA","use":"sig","alg":"RS256","kid":"%s","n":"%s","e":"AQAB"}]}\n' "$kid" "$n" >"$o/jwks.json"
  touch "$o/.complete"
}

# oauth_props D: the broker settings of the OAUTHBEARER listener; none
# without D/oauth.
oauth_props() {
  [[ -f $1/oauth/.complete ]] || return 0
  cat <<EOF
# OAUTH (SASL_SSL) takes OAUTHBEARER only: a JWT signed with $1/oauth/signer.key,
# issued by $OAUTH_ISSUER for $OAUTH_AUDIENCE, unexpired; its "sub" is the
# principal. A session ends with its token: clients must authenticate again
# (KIP-368), with a fresh token, before it expires.
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
listener.name.oauth.oauthbearer.connections.max.reauth.ms=3600000
sasl.oauthbearer.jwks.endpoint.url=$(oauth_jwks_url "$1")
sasl.oauthbearer.expected.issuer=$OAUTH_ISSUER
sasl.oauthbearer.expected.audience=$OAUTH_AUDIENCE
EOF
}

# oauth_env D: the OAUTHBEARER listener's client settings, as secure_env
# prints them (with emit); none without D/oauth.
oauth_env() {
  local o=$1/oauth
  [[ -f $o/.complete ]] || return 0
  port_open "$SINGLE_OAUTH_PORT" \
    || info "warning: nothing listens on $HOST:$SINGLE_OAUTH_PORT; run '$0 up' ('$0 down' first if the broker predates the OAUTHBEARER listener)"
  emit PROCESSOR_TEST_OAUTH_BROKERS "$HOST:$SINGLE_OAUTH_PORT"
  emit PROCESSOR_TEST_OAUTH_KEY_FILE "$o/signer.key"
  emit PROCESSOR_TEST_OAUTH_KEY_ID "$(cat "$o/signer.kid")"
  emit PROCESSOR_TEST_OAUTH_ISSUER "$OAUTH_ISSUER"
  emit PROCESSOR_TEST_OAUTH_AUDIENCE "$OAUTH_AUDIENCE"
  emit PROCESSOR_TEST_OAUTH_SUBJECT "$OAUTH_SUBJECT"
}

# ------------------------------------------------------------- single ----

single_props() {
  local d=$SINGLE_DIR oauth="" oauth_port="" oauth_map=""
  if [[ -f $d/oauth/.complete ]]; then
    oauth=",OAUTH://$HOST:$SINGLE_OAUTH_PORT" oauth_port=" $SINGLE_OAUTH_PORT" oauth_map=",OAUTH:SASL_SSL"
  fi
  cat <<EOF
# Written by kafka.sh; regenerated on every 'up'.
# broker-port=$SINGLE_PORT
# controller-port=$SINGLE_CONTROLLER_PORT
# secured-ports=$SINGLE_SASL_PORT $SINGLE_MTLS_PORT$oauth_port
node.id=1
listeners=PLAINTEXT://$HOST:$SINGLE_PORT,CONTROLLER://$HOST:$SINGLE_CONTROLLER_PORT,SASL_SSL://$HOST:$SINGLE_SASL_PORT,SSL://$HOST:$SINGLE_MTLS_PORT$oauth
advertised.listeners=PLAINTEXT://$HOST:$SINGLE_PORT,SASL_SSL://$HOST:$SINGLE_SASL_PORT,SSL://$HOST:$SINGLE_MTLS_PORT$oauth
controller.quorum.bootstrap.servers=$HOST:$SINGLE_CONTROLLER_PORT
$(common_props "$d" "SASL_SSL:SASL_SSL,SSL:SSL$oauth_map")
$(secure_props "$d")
$(oauth_props "$d")
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
EOF
}

single_up() {
  check_ports
  need java "install a JDK 17+"
  fetch
  local d=$SINGLE_DIR
  lock "$d"
  local addr="$HOST:$SINGLE_PORT"
  if pid=$(node_pid "$d"); then
    local running
    running=$(sed -n 's/^# broker-port=//p' "$d/server.properties")
    [[ $running == "$SINGLE_PORT" ]] \
      || die "Kafka in $d is already running on port $running, not $SINGLE_PORT; run '$0 down' first"
    info "Kafka is already running (pid $pid), log $d/server.log"
    grep -q '^listeners=.*SASL_SSL://' "$d/server.properties" \
      || info "it was started without the secured listeners; '$0 down' then '$0 up' adds them"
    grep -q '^listeners=.*OAUTH://' "$d/server.properties" \
      || info "it was started without the OAUTHBEARER listener; '$0 down' then '$0 up' adds it"
    printf '%s\n' "$addr"
    return 0
  fi
  # The controller's address is recorded in the formatted metadata log
  # (--standalone), so a folder formatted for other ports cannot be reused.
  if [[ -f $d/data/meta.properties && -f $d/ports && $(cat "$d/ports") != "$SINGLE_PORT $SINGLE_CONTROLLER_PORT" ]]; then
    die "$d was formatted for ports $(cat "$d/ports"), not $SINGLE_PORT $SINGLE_CONTROLLER_PORT; run '$0 down --wipe' first"
  fi
  mkdir -p "$d/data"
  secure_material "$d"
  oauth_material "$d"
  single_props >"$d/server.properties"
  [[ -s $d/cluster.id ]] || new_cluster_id >"$d/cluster.id"
  [[ -s $d/cluster.id ]] || die "could not generate a cluster id"
  if [[ ! -f $d/data/meta.properties ]]; then
    local -a scram
    mapfile -d '' scram < <(scram_args "$d")
    format_storage "$d" --standalone "${scram[@]}"
    scram_stamp "$d" >"$d/scram-users"
  fi
  echo "$SINGLE_PORT $SINGLE_CONTROLLER_PORT" >"$d/ports"
  local t0=$SECONDS
  launch "$d" "$SINGLE_HEAP" "Kafka"
  wait_ready "$d" "Kafka"
  ensure_scram_users "$d"
  info "Kafka is up (pid $(node_pid "$d"), $((SECONDS - t0))s)"
  local oauth=""
  [[ -f $d/oauth/.complete ]] && oauth=", OAUTHBEARER (SASL_SSL) on $HOST:$SINGLE_OAUTH_PORT"
  info "secured: SASL_SSL on $HOST:$SINGLE_SASL_PORT, mutual TLS on $HOST:$SINGLE_MTLS_PORT$oauth; '$0 secure-env' prints a client's settings"
  printf '%s\n' "$addr"
}

single_down() {
  local wipe=$1 d=$SINGLE_DIR
  lock "$d"
  stop_nodes TERM "$d" "Kafka"
  if [[ $wipe == yes ]]; then
    find "$d" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
    info "wiped $d"
  fi
}

# ------------------------------------------------------------ cluster ----

node_dir() { printf '%s/node%s\n' "$CLUSTER_DIR" "$1"; }
node_port() { echo $((CLUSTER_BASE_PORT + 100 * $1)); }
node_cport() { echo $((CLUSTER_BASE_PORT + 100 * $1 + 1)); }

cluster_bootstrap() {
  local i out=""
  for ((i = 1; i <= CLUSTER_NODES; i++)); do out+="${out:+,}$HOST:$(node_port "$i")"; done
  printf '%s\n' "$out"
}

cluster_voters() {
  local i out=""
  for ((i = 1; i <= CLUSTER_NODES; i++)); do out+="${out:+,}$i@$HOST:$(node_cport "$i")"; done
  printf '%s\n' "$out"
}

node_props() { # node_props N
  local n=$1 d port cport
  d=$(node_dir "$n"); port=$(node_port "$n"); cport=$(node_cport "$n")
  cat <<EOF
# Written by kafka.sh; regenerated on every start.
# broker-port=$port
# controller-port=$cport
node.id=$n
listeners=PLAINTEXT://$HOST:$port,CONTROLLER://$HOST:$cport
advertised.listeners=PLAINTEXT://$HOST:$port
# Static quorum: every node is a voter.
controller.quorum.voters=$(cluster_voters)
$(common_props "$d")
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
# Notice a killed node (and let a restarted one re-register) after 4s
# instead of the default 9s.
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=1000
EOF
}

check_node_arg() {
  [[ ${1:-} =~ ^[0-9]+$ ]] && (( $1 >= 1 && $1 <= CLUSTER_NODES )) \
    || die "expected a node number 1..$CLUSTER_NODES, got '${1:-}'"
}

# prepare_node N: config, cluster id and formatted storage for node N.
prepare_node() {
  local n=$1 d
  d=$(node_dir "$n")
  mkdir -p "$d/data"
  node_props "$n" >"$d/server.properties"
  cp "$CLUSTER_DIR/cluster.id" "$d/cluster.id"
  format_storage "$d"
}

cluster_up() {
  check_ports
  need java "install a JDK 17+"
  fetch
  lock "$CLUSTER_DIR"
  local ports="$(cluster_bootstrap)"
  if [[ -f $CLUSTER_DIR/ports && $(cat "$CLUSTER_DIR/ports") != "$ports" ]] && compgen -G "$CLUSTER_DIR/node*/data/meta.properties" >/dev/null; then
    die "$CLUSTER_DIR was formatted for $(cat "$CLUSTER_DIR/ports"); run '$0 cluster-down --wipe' first"
  fi
  [[ -s $CLUSTER_DIR/cluster.id ]] || new_cluster_id >"$CLUSTER_DIR/cluster.id"
  [[ -s $CLUSTER_DIR/cluster.id ]] || die "could not generate a cluster id"
  echo "$ports" >"$CLUSTER_DIR/ports"
  local i t0=$SECONDS started=()
  for ((i = 1; i <= CLUSTER_NODES; i++)); do
    local d pid
    d=$(node_dir "$i")
    if pid=$(node_pid "$d"); then
      info "node $i is already running (pid $pid)"
      continue
    fi
    prepare_node "$i"
    launch "$d" "$CLUSTER_HEAP" "node $i"
    started+=("$i")
  done
  # The nodes need each other for a quorum: start all, then wait for all.
  for i in "${started[@]}"; do
    wait_ready "$(node_dir "$i")" "node $i"
  done
  ((${#started[@]} == 0)) || info "cluster is up ($((SECONDS - t0))s)"
  cluster_bootstrap
}

cluster_down() {
  local wipe=$1 i
  local -a args=()
  lock "$CLUSTER_DIR"
  for ((i = 1; i <= CLUSTER_NODES; i++)); do
    [[ -d $(node_dir "$i") ]] && args+=("$(node_dir "$i")" "node $i")
  done
  ((${#args[@]} == 0)) || stop_nodes TERM "${args[@]}"
  if [[ $wipe == yes ]]; then
    find "$CLUSTER_DIR" -mindepth 1 -maxdepth 1 ! -name .lock -exec rm -rf {} +
    info "wiped $CLUSTER_DIR"
  fi
}

node_signal() { # node_signal N KILL|TERM
  check_node_arg "${1:-}"
  lock "$CLUSTER_DIR"
  local d
  d=$(node_dir "$1")
  [[ -d $d ]] || die "node $1 has no folder $d; run '$0 cluster-up' first"
  stop_nodes "$2" "$d" "node $1"
}

node_start() {
  check_node_arg "${1:-}"
  check_ports
  need java "install a JDK 17+"
  fetch
  lock "$CLUSTER_DIR"
  local n=$1 d pid
  d=$(node_dir "$n")
  [[ -s $CLUSTER_DIR/cluster.id ]] || die "no cluster in $CLUSTER_DIR; run '$0 cluster-up' first"
  if pid=$(node_pid "$d"); then
    info "node $n is already running (pid $pid)"
  else
    local t0=$SECONDS
    prepare_node "$n"
    launch "$d" "$CLUSTER_HEAP" "node $n"
    wait_ready "$d" "node $n"
    info "node $n is up ($((SECONDS - t0))s)"
  fi
  printf '%s:%s\n' "$HOST" "$(node_port "$n")"
}

# -------------------------------------------------------------- tools ----

# tools_log4j: print the path of the log4j2 config of the tools (written on
# first use): warnings and errors to stderr, so that stdout carries only the
# tool's own output, which scripts and tests parse.
tools_log4j() {
  local f="$CACHE_DIR/tools-log4j2.xml" tmp
  if [[ ! -s $f ]]; then
    mkdir -p "$CACHE_DIR"
    tmp="$f.tmp.$$"
    cat >"$tmp" <<'EOF'
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by kafka.sh for Kafka's command-line tools: WARN and above to stderr. -->
<Configuration status="WARN" name="kafka-tools">
  <Appenders>
    <Console name="stderr" target="SYSTEM_ERR">
      <PatternLayout pattern="[%d{ISO8601}] %-5p %m (%c{1})%n"/>
    </Console>
  </Appenders>
  <Loggers>
    <Root level="WARN">
      <AppenderRef ref="stderr"/>
    </Root>
  </Loggers>
</Configuration>
EOF
    mv -f "$tmp" "$f"
  fi
  printf '%s\n' "$f"
}

# run_tool CLASS ARGS...: replace this shell with one of Kafka's
# command-line tools, run with the cached jars (fetched first if needed).
# Its stdout, stderr and exit status are the tool's.
run_tool() {
  local class=$1 log4j
  shift
  need java "install a JDK 17+"
  fetch
  log4j=$(tools_log4j)
  # shellcheck disable=SC2086  # JVM options are deliberately word-split
  exec java $TOOLS_JVM_OPTS -Djava.awt.headless=true -Dlog4j2.configurationFile="$log4j" \
    -cp "$LIB_DIR/*" "$class" "$@"
}

# tool CLASS ARGS...: run one of Kafka's command-line tools and wait for
# it (run_tool replaces the shell).
tool() {
  local class=$1 log4j
  shift
  log4j=$(tools_log4j)
  # shellcheck disable=SC2086  # JVM options are deliberately word-split
  java $TOOLS_JVM_OPTS -Djava.awt.headless=true -Dlog4j2.configurationFile="$log4j" -cp "$LIB_DIR/*" "$class" "$@"
}

# consumer_groups ARGS...: kafka-consumer-groups.sh; without a
# --bootstrap-server it talks to the single broker.
consumer_groups() {
  local a
  for a in "$@"; do
    case "$a" in
      --bootstrap-server | --bootstrap-server=*) run_tool org.apache.kafka.tools.consumer.group.ConsumerGroupCommand "$@" ;;
    esac
  done
  run_tool org.apache.kafka.tools.consumer.group.ConsumerGroupCommand --bootstrap-server "$HOST:$SINGLE_PORT" "$@"
}

# ------------------------------------------------------------- status ----

status() {
  local pid d i any=0 rss
  show() { # show NAME D ADDR
    if pid=$(node_pid "$2"); then
      rss=$(awk '/^VmRSS/ {printf "%d MiB", $2/1024}' "/proc/$pid/status" 2>/dev/null || echo '?')
      printf '%-8s running  pid %-7s %-16s rss %s  %s\n' "$1" "$pid" "$3" "$rss" "$2"
      any=1
    else
      printf '%-8s stopped  %s\n' "$1" "$2"
    fi
  }
  show single "$SINGLE_DIR" "$HOST:$SINGLE_PORT"
  for ((i = 1; i <= CLUSTER_NODES; i++)); do
    d=$(node_dir "$i")
    show "node$i" "$d" "$HOST:$(node_port "$i")"
  done
  ((any)) || true
}

# --------------------------------------------------------------- main ----

# wipe_flag ARGS...: set WIPE=yes|no from the optional --wipe argument.
wipe_flag() {
  WIPE=no
  (($# <= 1)) || die "too many arguments (only --wipe is accepted)"
  case "${1:-}" in
    "") ;;
    --wipe) WIPE=yes ;;
    *) die "unknown option '$1' (only --wipe is accepted)" ;;
  esac
}

main() {
  local cmd=${1:-}
  (($# > 0)) && shift
  check_ports
  case "$cmd" in
    fetch) (($# == 0)) || die "fetch takes no arguments"; fetch; info "jars in $LIB_DIR" ;;
    up) (($# == 0)) || die "up takes no arguments"; single_up ;;
    down) wipe_flag "$@"; single_down "$WIPE" ;;
    cluster-up) (($# == 0)) || die "cluster-up takes no arguments"; cluster_up ;;
    cluster-down) wipe_flag "$@"; cluster_down "$WIPE" ;;
    kill) (($# == 1)) || die "usage: kafka.sh kill N"; node_signal "$1" KILL ;;
    stop) (($# == 1)) || die "usage: kafka.sh stop N"; node_signal "$1" TERM ;;
    start) (($# == 1)) || die "usage: kafka.sh start N"; node_start "$1" ;;
    status) status ;;
    secure-env) (($# == 0)) || die "secure-env takes no arguments"; secure_env ;;
    consumer-groups) consumer_groups "$@" ;;
    bootstrap)
      case "${1:-single}" in
        single) echo "$HOST:$SINGLE_PORT" ;;
        cluster) cluster_bootstrap ;;
        *) die "usage: kafka.sh bootstrap [single|cluster]" ;;
      esac ;;
    -h | --help | help) usage 0 ;;
    "") usage 2 ;;
    *) info "unknown command '$cmd'"; usage 2 ;;
  esac
}

main "$@"
