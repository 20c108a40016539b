// Command chaos is the processor's fault drill. It runs several processor
// processes (the built binary) in one consumer group while a producer keeps
// writing keyed input, applies faults on a schedule, waits for the group to
// catch up, and then audits the output with eoscheck. It exits 1 if eoscheck
// finds any anomaly or a processor exited when it should not have.
//
// Faults, applied in turn, one per iteration:
//
//	kill    SIGKILL an instance, restart it under the same transactional
//	        and static member IDs (its recovery time is measured)
//	term    SIGSTOP an instance for -term-backlog so input piles up,
//	        SIGCONT, and SIGTERM it while it works through the backlog (it
//	        must fail no record and exit 0); restart it
//	stop    SIGSTOP an instance for longer than the session timeout, then
//	        SIGCONT: the zombie must be fenced and write nothing visible
//	scale   start one more instance; the next time, stop it again
//	broker  restart a broker: the embedded devbroker cleanly (SIGTERM and
//	        start from its data directory), or SIGKILL and restart a node of
//	        the local three-node Apache Kafka cluster (-cluster)
//	pgrestart  with -sink postgres: restart PostgreSQL through
//	        -postgres-script, "restart fast" and "restart immediate" (a
//	        crash: in-flight transactions are lost, the server recovers
//	        from its WAL) in turn
//	pgslow  with -sink postgres: for 10 s every row inserted into the
//	        run's table costs 5 ms more (a trigger), so a backlog's batch
//	        cannot commit within the transaction timeout: the batches must
//	        shrink to what commits in time
//	pgfreeze  with -sink postgres: SIGSTOP an instance inside its database
//	        transaction and keep it stopped until the others have stored
//	        every partition with input left (the server ends the frozen
//	        transaction, idle_in_transaction_session_timeout); then SIGCONT:
//	        the zombie must be fenced. Not within the session timeout plus
//	        about 45 s is unexpected
//	wipe    with aggregate in the chain: SIGKILL an instance, delete its
//	        state directory and restart it, so that it rebuilds its
//	        partitions' state from the changelogs
//	httpdown  with http in the chain: the drill's HTTP service, which the
//	        instances call once per record and attempt, answers 503 for
//	        -pause (at least 1 s): the instances abort and retry their
//	        transactions until it answers again (httpsvc.go)
//
// With "abort" in -faults, every instance also aborts a fraction of its
// transactions on purpose (PROCESSOR_TEST_ABORT_RATE).
//
// The instances run a transform chain (-transforms, PROCESSOR_TRANSFORMS;
// by default jq with a program that keeps every record, -jq-expr) and an
// error policy each (-policies, PROCESSOR_ON_ERROR), taken in turn by
// instance number, so one group mixes dlq and skip (and fail, see below).
// The ordinary input values are JSON objects carrying a sequence number,
// so they never fail a transform: every dead letter of one (dlq instances
// write to a dead-letter topic the drill creates, and eoscheck reads it
// with -dlq) and every dropped one (skip instances; eoscheck's lost) is a
// good record the processor gave up on, and a fail instance exits 1 on
// such a record.
//
// Among them, every -poison-every'th input (500 by default; 0: none) is a
// marked hard one, its key poison-<class>-<seq>, its class taken from
// -poison-classes (by default every class the sink, chain and policies can
// meet) in rounds that hold each class once in an order drawn by the seed,
// and so are each class's variants; eoscheck -poison judges each by its
// class:
//
//	notjson    not JSON (plain text, a cut-off object, bytes that are not
//	           UTF-8): the jq transform fails it, a record failure for the
//	           policy; exactly one dead letter, or nothing where a skip
//	           instance dropped it (eoscheck -poison-skip: skipped by
//	           policy, not lost). Needs jq in the chain.
//	nearlimit  a JSON object of 1,000,000 to 1,048,000 bytes (a pad of
//	           random letters): after jq and the lineage headers its output
//	           still fits Kafka's default max.message.bytes (1048588), so
//	           it must come out as one ordinary output or row
//	jsonb      with -sink postgres: JSON that PostgreSQL's jsonb refuses
//	           but that passes the chain (an integer of 140,000 digits, an
//	           escaped NUL; without jq also a lone surrogate escape): one
//	           row with value NULL and the bytes in value_bytes
//
// A fail instance exits on a notjson input by design and meets it again
// after every restart, so with poison on the default policies are dlq and
// skip; -policies with fail leaves notjson out of the default classes (and
// -poison-classes notjson with fail is a usage error). The drill's topics
// keep the broker's default max.message.bytes; its producer's batches go
// up to 1 MiB so that the nearlimit inputs fit.
//
// With -value-format avro the values are in the Schema Registry wire
// format (Avro): the drill runs a registry in its own process on loopback
// (or uses -schema-registry), registers the input's schema under
// <input>-value (key, seq, and the nearlimit class's pad) and the output's
// under <output>-value (the input's fields and seen, as `.seen = true`
// makes them), and gives the instances PROCESSOR_VALUE_FORMAT=avro and
// PROCESSOR_SCHEMA_REGISTRY_URL, so they decode every input to JSON for
// the chain and encode its output with the output subject's schema.
// Halfway through the input it registers a second input version (half, an
// int with a default: BACKWARD compatible) and writes the rest with it.
// The notjson class becomes values the decode stage fails: without the
// magic byte (plain text, the JSON object unencoded, bytes that are not
// UTF-8), with a schema id the registry does not have, or cut short in the
// Avro body; nearlimit an Avro record of 1,000,000 to 1,048,000 bytes.
// After eoscheck (which judges keys and lineage headers), the drill reads
// every visible output and checks that it decodes with the output
// subject's schema id to its input's key, half and pad with seen true.
//
// With aggregate last in -transforms (-transforms aggregate, or
// jq,aggregate) the drill is stateful: the instances run the aggregate
// transform counting by record key (PROCESSOR_AGGREGATE_FUNCTION=count,
// BY unset, so it reads no value and fails no record), each with its own
// PROCESSOR_STATE_DIR under -state-dir, kept across its restarts (a
// SIGKILLed instance restores the changelogs' tail past its checkpoint;
// a scaled-out one, and one the wipe fault restarted, the whole
// changelog), and eoscheck runs with -check aggregate: every key's counts
// run 1, 2, 3, ... in the committed output up to its inputs taken (those
// with no dead letter, not skipped), besides the checks by lineage. Its
// default faults add wipe; the report sums the processors' "state
// restored" log lines and fails the drill when a wiped instance rebuilt
// no partition. A stateful chain runs exactly once into Kafka only, and
// the counter must come last, as eoscheck's count check reads its own
// outputs. With wasm instead of aggregate (-transforms wasm or jq,wasm,
// and -wasm-module bin/plugins/count.wasm) the counter is the count
// example plugin, keeping its counts in the store counts
// (PROCESSOR_WASM_STORES, PROCESSOR_WASM_STATE_BY_KEY=true), judged the
// same way. With -window (aggregate only) the count is windowed, WINDOW
// and GRACE that long, EMIT=close, late records to a topic of the run's
// own, and eoscheck runs -check windows instead: exactly one final row
// per key and window, each the count of its inputs that were not late,
// every late input in the late topic once. With dedupe instead
// (-transforms dedupe or jq,dedupe) the stateful stage is a dedupe by the
// inputs' unique seq (PROCESSOR_DEDUPE_BY=.seq): every input must pass
// exactly once, judged by eoscheck one to one. With join last
// (-transforms join or jq,join) the instances join every input with its
// record key's row in a compacted table topic of the run's own
// (PROCESSOR_JOIN_TABLE, INTO .row, TYPE -join-type, MODE -join-mode:
// co-partitioned, six partitions like the input's, or global, three),
// which the drill pre-loads with a row for three in four keys and keeps
// writing in transactions while the input is written and the faults land
// (rows, updates and tombstones, every -table-abort'th transaction
// aborted); eoscheck runs -check join: every visible row a committed
// version of its key, none older than an earlier input of its partition
// and key saw, a left join's every input written (join.go).
//
// The input's keys (-keys) are k0 ... k999 by default. With -keys binary
// they are the bytes Java's LongSerializer and IntegerSerializer write
// (8 and 4 bytes, big-endian, of positive and negative numbers): 1,000
// keys, most of them not UTF-8, many differing only in bytes that are
// not, which the stateful chain must count apart (the output's "key"
// names such a key {"base64": ...}, and eoscheck -check aggregate holds
// it to its record key). With -keys orders every input has a key of its
// own, the order id o<seq>, and its value a customer, c<seq % -customers>,
// so that every customer has orders in every input partition; the
// stateful chain (aggregate) then counts by customer
// (PROCESSOR_AGGREGATE_BY=.customer), and eoscheck runs with -group-by
// .customer: every customer's counts must run 1, 2, 3, ... in the
// committed output up to its orders taken, across all input partitions,
// which needs the processor's repartition topic
// (<group>-<store>-repartition); the drill waits for the group to have
// consumed it too, and reports its size. -env PROCESSOR_NAME=value
// (repeatable) gives every instance one more setting, after the drill's
// own.
//
// With -sink postgres the instances write into PostgreSQL instead of an
// output topic (PROCESSOR_SINK=postgres): rows into a table of the run's
// own (chaos_<id>), dead letters into another (chaos_dl_<id>), and the
// consumed offsets into processor_offsets under the run's group, all in
// one database transaction per batch. The default faults then include
// pgrestart, the drill waits until the offsets stored in the database
// reach the input's end, and eoscheck audits the tables
// (-postgres-url). The tables are kept for inspection.
//
//	chaos -embedded -records 100000 -iterations 20
//	chaos -embedded -transforms identity -policies fail   # poison: nearlimit only
//	chaos -embedded -poison-every 0 -policies fail,dlq,skip   # no poison
//	chaos -cluster -brokers 127.0.0.1:19192,127.0.0.1:19292,127.0.0.1:19392
//	chaos -embedded -value-format avro -records 30000 -iterations 8
//	chaos -embedded -sink postgres -postgres-url "$(bash integration/postgres/pg.sh url)"
//	chaos -embedded -transforms jq,aggregate -ordering key -records 60000 -rate 1500 -iterations 14
//	chaos -embedded -transforms jq,aggregate -keys binary -ordering key -records 12000 -rate 1000 -iterations 5
//	chaos -embedded -transforms jq,aggregate -keys orders -records 12000 -rate 1000 -iterations 5
//	chaos -embedded -transforms jq,join -records 8000 -rate 1000 -iterations 5 -faults kill,wipe,scale,term,scale,abort
package main

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
)

func main() {
	o := parseOptions()
	d := &driver{o: o, log: slog.New(slog.NewTextHandler(os.Stderr, nil)), rng: rand.New(rand.NewPCG(o.seed, 1)),
		insts: map[int]*instance{}, poisonWritten: map[string]int{}}
	os.Exit(d.run())
}

// usage reports a usage error on stderr and exits 2.
func usage(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "chaos: "+format+"\n", args...)
	os.Exit(2)
}

// fatal reports a failure of the drill itself on stderr and exits 1.
func fatal(err error) {
	fmt.Fprintln(os.Stderr, "chaos:", err)
	os.Exit(1)
}
