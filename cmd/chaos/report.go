package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamproc/processor/cmd/eoscheck/check"
)

// report prints what the drill did and measured, runs eoscheck on the
// run and returns the exit code: 1 when the group did not catch up, a
// processor misbehaved or eoscheck found an anomaly.
func (d *driver) report(caughtUp bool) int {
	fmt.Printf("\nchaos run: %d records, %d instances (+scale), seed %d, logs in %s\n", d.o.records, d.o.instances, d.o.seed, d.o.logDir)
	d.printFaults()
	d.printChain()
	d.printJoin()
	d.printHTTP()
	d.printSchemas()
	d.printTimings()
	failed := false
	for _, u := range d.printState() {
		fmt.Println("unexpected:", u)
		failed = true
	}
	if !caughtUp {
		fmt.Printf("the group did not catch up within %s\n", d.o.settle)
		failed = true
	}
	for _, u := range d.unexpected {
		fmt.Println("unexpected:", u)
		failed = true
	}
	fmt.Println()
	cmd := exec.Command(filepath.Join(d.o.bin, "eoscheck"), d.eoscheckArgs()...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		failed = true
	}
	if d.o.valueFormat == "avro" && !d.auditAvro() {
		failed = true
	}
	if failed {
		fmt.Println("chaos: FAILED")
		return 1
	}
	fmt.Println("chaos: every anomaly count is zero")
	return 0
}

// printFaults prints how often each fault was applied.
func (d *driver) printFaults() {
	fmt.Printf("%-10s %s\n", "fault", "applied")
	for _, f := range []string{"kill", "term", "stop", "scale", "wipe", "broker", "httpdown", "pgrestart", "pgslow", "pgfreeze"} {
		n := d.applied[f]
		if n == 0 {
			continue
		}
		modes := ""
		if f == "pgrestart" {
			modes = fmt.Sprintf(" (%d fast, %d immediate)", d.pgRestarts["fast"], d.pgRestarts["immediate"])
		}
		fmt.Printf("%-10s %d%s\n", f, n, modes)
	}
	if slices.Contains(d.o.faults, "abort") {
		fmt.Printf("%-10s rate %g of transactions\n", "abort", d.o.abortRate)
	}
}

// printChain prints the chain, the instances' policies, the poison inputs
// and the sink.
func (d *driver) printChain() {
	chain := strings.Join(d.o.transforms, ",")
	if slices.Contains(d.o.transforms, "jq") {
		chain += fmt.Sprintf(" (jq: %s)", d.o.jqExpr)
	}
	fmt.Printf("transforms %s\n", chain)
	switch d.o.keys {
	case keysBinary:
		fmt.Printf("%-10s binary: LongSerializer and IntegerSerializer bytes, %d keys, most not UTF-8\n", "keys", keySpace)
	case keysOrders:
		fmt.Printf("%-10s orders: one order id per input, %s drawn from %d customers\n", "keys", groupField, d.o.customers)
	}
	if len(d.o.env) > 0 {
		fmt.Printf("%-10s %s (-env)\n", "settings", strings.Join(d.o.env, " "))
	}
	switch {
	case d.o.ordering != "" && d.o.stateful():
		fmt.Printf("%-10s %s (PROCESSOR_ORDERING; aggregate is ordered: per key, or per partition)\n", "ordering", d.o.ordering)
	case d.o.ordering == "key" && d.svc != nil:
		fmt.Printf("%-10s key (PROCESSOR_ORDERING; the http transform keeps up to %d requests of a partition in flight, each key's in order)\n", "ordering", httpInFlight)
	case d.o.ordering != "":
		fmt.Printf("%-10s %s (PROCESSOR_ORDERING; the chain is not ordered, so each partition's records are shared among the workers as without it)\n", "ordering", d.o.ordering)
	}
	d.mu.Lock()
	last := d.nextID
	d.mu.Unlock()
	var byPolicy []string
	for _, p := range knownPolicies {
		var ids []string
		for id := 1; id <= last; id++ {
			if d.policy(id) == p {
				ids = append(ids, strconv.Itoa(id))
			}
		}
		switch len(ids) {
		case 0:
		case 1:
			byPolicy = append(byPolicy, fmt.Sprintf("%s (instance %s)", p, ids[0]))
		default:
			byPolicy = append(byPolicy, fmt.Sprintf("%s (instances %s)", p, strings.Join(ids, ", ")))
		}
	}
	fmt.Printf("policies   %s\n", strings.Join(byPolicy, ", "))
	if d.o.poisonEvery > 0 {
		fmt.Printf("poison     every %d inputs one of %s: %s\n", d.o.poisonEvery, classList(d.o.poisonClasses), d.poisonSummary())
	} else {
		fmt.Printf("poison     none (-poison-every 0)\n")
	}
	d.mu.Lock()
	if d.dupSummary != "" {
		fmt.Printf("duplicates %s, late topic %s\n", d.dupSummary, d.late)
	}
	d.mu.Unlock()
	if d.table != "" {
		fmt.Printf("sink       postgres: table %s, dead letters %s, offsets processor_offsets (group %s)\n", d.table, d.deadTable, d.group)
	}
}

// printTimings prints the recoveries measured after the faults.
func (d *driver) printTimings() {
	d.mu.Lock()
	recoveries, pgDown, pgRec := slices.Clone(d.recoveries), slices.Clone(d.pgDowntimes), slices.Clone(d.pgRecoveries)
	freezes := slices.Clone(d.pgFreezes)
	d.mu.Unlock()
	if len(recoveries) > 0 {
		fmt.Printf("recovery after SIGKILL (restart to first commit): %s restarts\n", spread(recoveries))
	}
	if len(pgDown) > 0 {
		fmt.Printf("PostgreSQL restart (stop and start, the script's time): %s restarts\n", spread(pgDown))
	}
	if len(pgRec) > 0 {
		fmt.Printf("commits after a PostgreSQL restart (server up to an offset stored): %s restarts\n", spread(pgRec))
	}
	if len(freezes) > 0 {
		fmt.Printf("partitions of an instance frozen mid-transaction stored by the others (freeze to every partition stored): %s freezes\n", spread(freezes))
	}
}

// eoscheckArgs are the arguments that audit this run.
func (d *driver) eoscheckArgs() []string {
	args := []string{"-brokers", strings.Join(d.brokers, ","), "-input", d.in, "-group", d.group}
	if d.table != "" {
		// Every instance writes dead letters to the run's own table,
		// so it is read whatever the policies: any row in it is a good
		// record given up on.
		args = append(args, "-postgres-url", d.o.pgURL, "-table", d.table, "-dead-letter-table", d.deadTable)
	} else {
		args = append(args, "-output", d.out, "-transaction-timeout", d.o.txnTimeout.String())
	}
	if d.dlq != "" {
		args = append(args, "-dlq", d.dlq)
	}
	if d.o.guarantee == "at_least_once" {
		args = append(args, "-at-least-once")
	}
	switch {
	case d.o.window > 0:
		w := d.o.window.String()
		args = append(args, "-check", "windows", "-one-to-one=false", "-window", w, "-grace", w, "-late-topic", d.late)
		args = append(args, d.groupArgs()...) // behind the hop: the late topic is the record of the late inputs
	case d.o.duplicates(): // every id once, its duplicates never, the late ones in the late topic
		args = append(args, "-check", "dedupe", "-one-to-one=false", "-dedupe-by", ".seq", "-dedupe-grace", dedupeGrace.String(), "-late-topic", d.late)
	case d.o.counter() == "dedupe": // without duplicates every id once: the checks by lineage, one to one
	case d.o.counter() == "join":
		args = append(args, d.joinArgs()...)
	case d.o.stateful():
		args = append(args, "-check", "aggregate")
		args = append(args, d.groupArgs()...)
	}
	if d.o.poisonEvery > 0 {
		args = append(args, "-poison")
		if slices.Contains(d.o.policies, "skip") {
			args = append(args, "-poison-skip")
		}
	}
	return args
}

// classList renders classes comma-separated, "none" when empty.
func classList(classes []check.Class) string {
	if len(classes) == 0 {
		return "none"
	}
	names := make([]string, len(classes))
	for i, c := range classes {
		names[i] = string(c)
	}
	return strings.Join(names, ",")
}

// poisonSummary renders the marked inputs written per class and variant,
// e.g. "notjson 4 (text 2, binary 2), nearlimit 3 (pad 3)".
func (d *driver) poisonSummary() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var parts []string
	for _, c := range d.o.poisonClasses {
		var vs []string
		for _, v := range d.variantsOf(c) {
			if n := d.poisonWritten[string(c)+"/"+v]; n > 0 {
				vs = append(vs, fmt.Sprintf("%s %d", v, n))
			}
		}
		part := fmt.Sprintf("%s %d", c, d.poisonWritten[string(c)])
		if len(vs) > 0 {
			part += " (" + strings.Join(vs, ", ") + ")"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

// spread renders the min, median and max of ds and their number, e.g.
// "min 1s, median 2s, max 3s over 3".
func spread(ds []time.Duration) string {
	r := slices.Clone(ds)
	slices.Sort(r)
	return fmt.Sprintf("min %s, median %s, max %s over %d",
		r[0].Round(10*time.Millisecond), r[len(r)/2].Round(10*time.Millisecond), r[len(r)-1].Round(10*time.Millisecond), len(r))
}
