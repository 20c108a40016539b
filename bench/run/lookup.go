package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/streamproc/processor/internal/launch"
)

// lookupDelay is how long the http rows' service takes to answer.
const lookupDelay = time.Millisecond

// httpRecords is how many records the http row at inFlight requests at
// once drains, in its own input of one partition: 5,000 at one in flight
// (about 1.5 ms each), 8 times as many from 8 on, so that the faster rows'
// drains, too, last seconds and their start (the group join, the first
// fetch) is a small part of their records/s.
func httpRecords(inFlight int) int { return 5000 * min(inFlight, 8) }

// httpRow is the http transform looking up each order's customer at
// inFlight requests at once (PROCESSOR_HTTP_MAX_IN_FLIGHT under key
// ordering), on its own input of httpRecords(inFlight) records in one partition.
func httpRow(inFlight int) system {
	return system{key: "http-" + strconv.Itoa(inFlight),
		label:        fmt.Sprintf("processor, http lookup per record (a service answering in %s), %d in flight, single-partition input", lookupDelay, inFlight),
		onePartition: true, ownInput: true, records: httpRecords(inFlight),
		needs: []string{"PROCESSOR_HTTP_URL", "PROCESSOR_HTTP_MAX_IN_FLIGHT", "PROCESSOR_ORDERING"},
		cmd: func(e *environment, b *broker, s *runSpec, extra []string) (launch.Command, error) {
			if e.lookup == "" {
				return launch.Command{}, fmt.Errorf("no lookup service for the http rows")
			}
			return processorCmd(func(in *launch.Instance) {
				in.Transforms = []string{"http"}
				in.Settings = map[string]string{
					"PROCESSOR_HTTP_URL":           `"` + e.lookup + `/customers/\(.customer)"`,
					"PROCESSOR_HTTP_RESPONSE":      ".record + {tier: .response.body.tier}",
					"PROCESSOR_HTTP_MAX_IN_FLIGHT": strconv.Itoa(inFlight),
					"PROCESSOR_ORDERING":           "key",
				}
			})(e, b, s, extra)
		}}
}

// needsLookup reports whether an http row runs.
func needsLookup(o options) bool {
	for _, k := range o.systems {
		if strings.HasPrefix(k, "http-") {
			return true
		}
	}
	return false
}

// startLookup starts the http rows' service on a free local port: it
// answers every request after lookupDelay with a small JSON object, until
// ctx ends.
func (e *environment) startLookup(ctx context.Context) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(lookupDelay)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"tier":"gold"}`))
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	e.lookup = "http://" + l.Addr().String()
	say("lookup service for the http rows: %s, answering in %s", e.lookup, lookupDelay)
	return nil
}
