#!/usr/bin/env bash
# make run, make run-billing and make run-avro: the processor on its
# embedded broker, fed sample orders by loadgen, from the repository's root.
#
#   scripts/run.sh NAME RATE     check the ports, then run bin/processor
#                                (configured by the caller's PROCESSOR_*
#                                variables) and bin/loadgen -rate RATE
#   scripts/run.sh --check NAME  only check the ports
#
# The addresses are the processor's own variables, with its defaults:
# PROCESSOR_EMBEDDED_BROKER_ADDR (127.0.0.1:9092; loadgen writes there) and
# PROCESSOR_HTTP_ADDR (:8080), e.g. make run PROCESSOR_HTTP_ADDR=:8081,
# and, when PROCESSOR_EMBEDDED_SCHEMA_REGISTRY=true, the embedded Schema
# Registry's PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR (127.0.0.1:8081).
#
# Two variables of the caller's shape the rest: LOADGEN_ARGS, more
# arguments for loadgen (e.g. -format avro -schema-registry URL); and
# RUN_SHOW_ARGS, when set, the arguments of one more loadgen started
# alongside (e.g. -read 3 -topic orders-enriched -format avro), which
# shows a few outputs and exits; its end stops nothing.
#
# Before anything starts, each port must be free: when something answers
# on one (another Kafka broker on 9092, another make run), the script says
# which, and how to choose another, and exits 2, so that loadgen never
# writes sample orders into a broker that is not the embedded one. Then:
# when the processor exits, loadgen is stopped; when loadgen fails, the
# processor is stopped (SIGTERM: a clean stop). Ctrl-C reaches both, which
# stop cleanly; the script waits for them. It exits with the processor's
# code, or loadgen's when loadgen failed first.
set -uo pipefail

check_only=
if [[ ${1:-} == --check ]]; then
	check_only=1
	shift
fi
name=${1:?usage: scripts/run.sh [--check] NAME [RATE]}
rate=${2:-500}

broker=${PROCESSOR_EMBEDDED_BROKER_ADDR:-127.0.0.1:9092}
http=${PROCESSOR_HTTP_ADDR:-:8080}
export PROCESSOR_EMBEDDED_BROKER_ADDR=$broker PROCESSOR_HTTP_ADDR=$http

# split ADDR: sets host and port; an empty or unspecified host is this
# machine's loopback address.
split() {
	host=${1%:*}
	port=${1##*:}
	host=${host#[}
	host=${host%]}
	case $host in '' | 0.0.0.0 | :: | '*') host=127.0.0.1 ;; esac
	[[ $1 == *:* && $port =~ ^[0-9]+$ ]] && ((port > 0 && port < 65536))
}

# answers HOST PORT: whether something accepts connections there.
answers() {
	local t=()
	command -v timeout >/dev/null 2>&1 && t=(timeout 2)
	"${t[@]}" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}

# free HOST PORT: the first port from PORT on (50 tried) where nothing
# answers, for the suggestion.
free() {
	local p
	for ((p = $2; p < $2 + 50; p++)); do
		answers "$1" "$p" || { echo "$p"; return; }
	done
	echo "$2"
}

taken=0
if ! split "$broker"; then
	echo "$name: PROCESSOR_EMBEDDED_BROKER_ADDR=\"$broker\" is invalid: want host:port, e.g. 127.0.0.1:9092" >&2
	exit 2
fi
bhost=$host bport=$port
if ! split "$http"; then
	echo "$name: PROCESSOR_HTTP_ADDR=\"$http\" is invalid: want host:port or :port, e.g. :8080" >&2
	exit 2
fi
hhost=$host hport=$port
if [[ $bport == "$hport" ]]; then
	echo "$name: PROCESSOR_EMBEDDED_BROKER_ADDR ($broker) and PROCESSOR_HTTP_ADDR ($http) use the same port $bport: choose two" >&2
	exit 2
fi
registry=
if [[ ${PROCESSOR_EMBEDDED_SCHEMA_REGISTRY:-} == true ]]; then
	registry=${PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR:-127.0.0.1:8081}
	export PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR=$registry
	if ! split "$registry"; then
		echo "$name: PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR=\"$registry\" is invalid: want host:port, e.g. 127.0.0.1:8081" >&2
		exit 2
	fi
	rhost=$host rport=$port
	if [[ $rport == "$bport" || $rport == "$hport" ]]; then
		echo "$name: PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR ($registry) uses port $rport, as the broker ($broker) or the status page ($http) does: choose another" >&2
		exit 2
	fi
fi
if answers "$bhost" "$bport"; then
	echo "$name: $bhost:$bport, where the embedded broker would listen, is taken (another Kafka broker, or a make run still running?): stop it, or choose another address, e.g. $name PROCESSOR_EMBEDDED_BROKER_ADDR=$bhost:$(free "$bhost" 29092)" >&2
	taken=1
fi
if answers "$hhost" "$hport"; then
	echo "$name: port $hport, where the status page and /metrics would be served (PROCESSOR_HTTP_ADDR=$http), is taken: stop what listens there, or choose another port, e.g. $name PROCESSOR_HTTP_ADDR=:$(free "$hhost" 8081)" >&2
	taken=1
fi
if [[ -n $registry ]] && answers "$rhost" "$rport"; then
	echo "$name: $rhost:$rport, where the embedded Schema Registry would listen, is taken (another registry, or a make run-avro still running?): stop it, or choose another address, e.g. $name PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR=$rhost:$(free "$rhost" 18091)" >&2
	taken=1
fi
((taken)) && exit 2
[[ -n $check_only ]] && exit 0

statushost=localhost
[[ $hhost != 127.0.0.1 ]] && statushost=$hhost
withreg=
[[ -n $registry ]] && withreg=" and the embedded Schema Registry at http://$rhost:$rport"
echo "$name: processor on the embedded broker at $broker$withreg, status page http://$statushost:$hport/ (metrics /metrics); loadgen writes $rate orders/s to 'orders'. Ctrl-C stops."

# Ctrl-C reaches the processor and loadgen themselves (one process group)
# and each stops cleanly; the script waits for them. (make's recipe
# ignores SIGINT, so that make waits too; a shell cannot trap a signal
# ignored on entry, so interrupted is set only when this script is run
# by hand.) A SIGTERM to this script is passed on.
interrupted=
trap 'interrupted=1' INT
trap 'interrupted=1; kill -TERM "$proc" "$gen" 2>/dev/null' TERM

./bin/processor &
proc=$!
# shellcheck disable=SC2086 # LOADGEN_ARGS and RUN_SHOW_ARGS are lists of words
./bin/loadgen -brokers "$broker" -topic orders -rate "$rate" -wait 30s ${LOADGEN_ARGS:-} &
gen=$!
if [[ -n ${RUN_SHOW_ARGS:-} ]]; then
	# shellcheck disable=SC2086
	./bin/loadgen -brokers "$broker" -wait 30s $RUN_SHOW_ARGS &
fi

alive() { kill -0 "$1" 2>/dev/null; }
# reap PID: waits until PID has exited (a trap ends a wait early) and
# sets rc to its exit code.
reap() {
	while :; do
		wait "$1"
		rc=$?
		alive "$1" || return 0
	done
}

while alive "$proc" && alive "$gen"; do
	sleep 0.2
done
if ! alive "$proc"; then
	reap "$proc"
	code=$rc
	if alive "$gen" && [[ -z $interrupted ]]; then
		# Exit 0 is a signalled stop, most often Ctrl-C, which loadgen
		# has too: say nothing then.
		((code != 0)) && echo "$name: the processor exited with code $code; stopping loadgen" >&2
		kill -TERM "$gen" 2>/dev/null
	fi
	reap "$gen"
	exit "$code"
fi
# loadgen ended first: stop the processor only when loadgen failed (a
# loadgen ended by Ctrl-C exits 0, and the processor is stopping too).
reap "$gen"
code=$rc
if ((code != 0)) && [[ -z $interrupted ]]; then
	echo "$name: loadgen exited with code $code; stopping the processor" >&2
	kill -TERM "$proc" 2>/dev/null
fi
reap "$proc"
((code == 0)) && code=$rc
exit "$code"
