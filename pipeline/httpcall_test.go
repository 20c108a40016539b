package pipeline

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/transform"
	_ "github.com/streamproc/processor/transform/httpcall"
	"github.com/streamproc/processor/transform/transformtest"
)

// lookupServer is a local service that answers /<key>/<seq> with
// {"n": 2*seq} after delay, and records how many requests it served at
// once and, per key, the sequence numbers in the order it got them.
type lookupServer struct {
	*httptest.Server
	delay time.Duration

	mu      sync.Mutex
	now     int
	most    int
	seqs    map[string][]int
	answers int
}

func newLookupServer(t *testing.T, delay time.Duration) *lookupServer {
	s := &lookupServer{delay: delay, seqs: map[string][]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, seq, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		n, err := strconv.Atoi(seq)
		if err != nil {
			http.Error(w, "bad sequence number", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.now++
		s.most = max(s.most, s.now)
		s.seqs[key] = append(s.seqs[key], n)
		s.answers++
		s.mu.Unlock()
		time.Sleep(s.delay)
		s.mu.Lock()
		s.now--
		s.mu.Unlock()
		fmt.Fprintf(w, `{"n":%d}`, 2*n)
	}))
	t.Cleanup(s.Close)
	return s
}

// The http transform with MAX_IN_FLIGHT=4 on 8 workers under key
// ordering, over one partition: the service never has more than 4 of the
// partition's requests at once but does have several, gets each key's
// requests in input order, and every input is written once, merged with
// its answer, each key's outputs in input order.
func TestHTTPTransformInFlight(t *testing.T) {
	e := newMemEnv(t)
	e.mem.Create(e.in, 1, 0)
	const n, keys = 600, 30
	recs := make([]*kgo.Record, n)
	for i := range recs {
		k := "k" + strconv.Itoa(i%keys)
		recs[i] = &kgo.Record{Key: []byte(k), Value: fmt.Appendf(nil, `{"k":%q,"seq":%d}`, k, i/keys)}
	}
	e.produceInputs(recs)
	srv := newLookupServer(t, 2*time.Millisecond)
	set := map[string]string{"URL": `"` + srv.URL + `/\(.k)/\(.seq)"`, "MAX_IN_FLIGHT": "4", "RESPONSE": ".record + {double: .response.body.n}"}
	var chains []*transform.Chain
	for range 8 {
		c, err := transformtest.Build("http", set)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		chains = append(chains, c)
	}
	run := e.start("g", "g-a", chains[0], Options{Chains: chains[1:], Ordering: OrderKey, MaxRecordsPerTxn: 200})
	eventually(t, 30*time.Second, "the group to commit every input", run, func() bool { return e.caughtUp("g") })
	run.stop(t, 10*time.Second)

	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.most > 4 || srv.most < 2 {
		t.Errorf("the service had at most %d requests at once, want 2 to 4 (MAX_IN_FLIGHT)", srv.most)
	}
	if srv.answers != n {
		t.Errorf("the service answered %d requests, want one per input, %d", srv.answers, n)
	}
	for k, seqs := range srv.seqs {
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				t.Errorf("key %s: requests in the order %v, want input order", k, seqs)
				break
			}
		}
	}
	checkDoubled(t, e.read(e.out, true), n, keys)
}

// checkDoubled checks that outs hold each of the n inputs of keys keys
// once, merged with the answer, in each key's order.
func checkDoubled(t *testing.T, outs []*kgo.Record, n, keys int) {
	t.Helper()
	if len(outs) != n {
		t.Errorf("%d outputs, want %d", len(outs), n)
	}
	next := map[string]int{}
	for _, r := range outs {
		var v struct {
			K      string
			Seq    int
			Double int
		}
		if err := json.Unmarshal(r.Value, &v); err != nil || v.Double != 2*v.Seq || v.K != string(r.Key) {
			t.Fatalf("output %s (key %s): %v; want the record with double = 2*seq", r.Value, r.Key, err)
		}
		if v.Seq != next[v.K] {
			t.Fatalf("key %s: output seq %d, want %d (each key's outputs once, in order)", v.K, v.Seq, next[v.K])
		}
		next[v.K]++
	}
	if len(next) != keys {
		t.Errorf("outputs of %d keys, want %d", len(next), keys)
	}
}

// BenchmarkHTTPInFlight runs the loop's step over transactions of
// benchPerTxn records of one partition (1000 keys) through the http
// transform against a local service that answers in 1ms, at 1, 8 and 32
// requests in flight (MAX_IN_FLIGHT under key ordering, one worker per
// request as the processor builds them). Compare records/s: requests
// waiting on the service at once, on any number of cores.
func BenchmarkHTTPInFlight(b *testing.B) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		time.Sleep(time.Millisecond)
		w.Write([]byte(`{"tier":"gold"}`))
	}))
	defer srv.Close()
	for _, n := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("in_flight=%d", n), func(b *testing.B) {
			set := map[string]string{"URL": `"` + srv.URL + `/customers/\(.customer)"`, "MAX_IN_FLIGHT": strconv.Itoa(n),
				"RESPONSE": ".record + {tier: .response.body.tier}"}
			var chains []*transform.Chain
			for range n {
				c, err := transformtest.Build("http", set)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				chains = append(chains, c)
			}
			recs := make([]*kgo.Record, benchPerTxn)
			for i := range recs {
				k := strconv.Itoa(i % 1000)
				recs[i] = &kgo.Record{Key: []byte(k), Value: []byte(`{"customer":"` + k + `","amount":12}`)}
			}
			from := served.Load()
			benchRecords(b, chains[0], Options{Chains: chains[1:], Ordering: OrderKey}, recs)
			if got := served.Load() - from; got != int64(b.N*len(recs)) {
				b.Fatalf("the service answered %d requests, want one per record, %d", got, b.N*len(recs))
			}
			b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkHTTPRoundTrips is BenchmarkHTTPInFlight's ceiling on the same
// machine: the same 1 ms service called by n goroutines, each with a
// client of its own (as each chain instance has), one request after
// another, with no transform and no loop around them. Compare its
// requests/s at 1, 8 and 32 with BenchmarkHTTPInFlight's records/s, run
// at the same time: what the machine's scheduling leaves of 8 requests in
// flight, before the processor adds anything.
func BenchmarkHTTPRoundTrips(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond)
		w.Write([]byte(`{"tier":"gold"}`))
	}))
	defer srv.Close()
	for _, n := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("in_flight=%d", n), func(b *testing.B) {
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
					defer c.CloseIdleConnections()
					for j := i; j < b.N*benchPerTxn; j += n {
						resp, err := c.Get(srv.URL + "/customers/" + strconv.Itoa(j%1000))
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N*benchPerTxn)/b.Elapsed().Seconds(), "requests/s")
		})
	}
}
