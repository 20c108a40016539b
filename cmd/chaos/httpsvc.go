package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// With http in -transforms the instances call a service of the drill's
// own, an HTTP server on loopback in the drill's process, once per record
// and attempt: GET /seq/<the input's seq>, answered after about a
// millisecond (a lookup across a network), so that a partition's requests
// overlap (MAX_IN_FLIGHT 8 under -ordering key), with {"seq": <seq>}. The
// chain merges the answer into the output as svc. The httpdown fault has
// the service answer 503 for a while: the instances count it as the
// service being unavailable, abort and retry their transactions and
// report unready until it answers again. eoscheck judges the outputs one
// to one (and by key order under -ordering key), as for jq.
type httpService struct {
	srv  *http.Server
	addr string
	down atomic.Bool
	// answered and refused count the requests answered 200 and 503; bad
	// those without a sequence number in their path (a chain that called
	// the service wrongly).
	answered, refused, bad atomic.Int64
}

// httpDelay is how long the service takes to answer.
const httpDelay = time.Millisecond

// httpInFlight is the instances' PROCESSOR_HTTP_MAX_IN_FLIGHT under
// -ordering key; without it, 1 (more needs key ordering).
const httpInFlight = 8

// startHTTPService starts the service on a free loopback port.
func startHTTPService() (*httpService, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("the http transform's service: %w", err)
	}
	s := &httpService{addr: ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// serve answers one request.
func (s *httpService) serve(w http.ResponseWriter, r *http.Request) {
	seq, ok := strings.CutPrefix(r.URL.Path, "/seq/")
	n, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil {
		s.bad.Add(1)
		http.Error(w, "want GET /seq/<the input's seq>", http.StatusBadRequest)
		return
	}
	time.Sleep(httpDelay)
	if s.down.Load() {
		s.refused.Add(1)
		http.Error(w, "down (the drill's httpdown fault)", http.StatusServiceUnavailable)
		return
	}
	s.answered.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, `{"seq":%d}`, n)
}

// stop closes the service.
func (s *httpService) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = s.srv.Close()
	}
}

// settings are the http transform's settings of an instance: the URL of
// the input's seq, the answer merged as svc, the timeout and
// MAX_IN_FLIGHT.
func (s *httpService) settings(in map[string]string, ordering string) {
	in["PROCESSOR_HTTP_URL"] = `"http://` + s.addr + `/seq/\(.seq)"`
	in["PROCESSOR_HTTP_RESPONSE"] = `.record + {svc: .response.body.seq}`
	// A record's attempts must fit the drill's short transaction timeout
	// (the processor refuses the default 2s there).
	in["PROCESSOR_HTTP_TIMEOUT"] = "500ms"
	in["PROCESSOR_HTTP_MAX_IN_FLIGHT"] = "1"
	if ordering == "key" {
		in["PROCESSOR_HTTP_MAX_IN_FLIGHT"] = strconv.Itoa(httpInFlight)
	}
}

// httpDown is the httpdown fault: the service answers 503 for pause (at
// least a second), then again as before.
func (d *driver) httpDown() {
	d.svc.down.Store(true)
	time.Sleep(max(d.o.pause, time.Second))
	d.svc.down.Store(false)
}

// printHTTP prints what the service answered, with http in the chain.
func (d *driver) printHTTP() {
	if d.svc == nil {
		return
	}
	fmt.Printf("http service: %d requests answered, %d refused while down, %d malformed\n",
		d.svc.answered.Load(), d.svc.refused.Load(), d.svc.bad.Load())
	if n := d.svc.bad.Load(); n > 0 {
		d.mu.Lock()
		d.unexpected = append(d.unexpected, fmt.Sprintf("%d requests to the http service without an input's seq in their path", n))
		d.mu.Unlock()
	}
}
