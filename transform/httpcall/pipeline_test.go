package httpcall

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/pipeline/pipelinetest"
	"github.com/streamproc/processor/transform"
)

// lockedBuffer is a log destination the loop and the test share.
type lockedBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func newLockedBuffer() *lockedBuffer { return &lockedBuffer{mu: make(chan struct{}, 1)} }

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.String()
}

// drive starts the real loop over c with the dead-letter policy, logging
// at debug level to the returned buffer.
func drive(t *testing.T, c *transform.Chain) (*pipelinetest.Driver, *lockedBuffer) {
	t.Helper()
	logs := newLockedBuffer()
	d, err := pipelinetest.New(c, pipelinetest.WithOptions(pipeline.Options{OnError: pipeline.DeadLetter, DLQTopic: "dlq", Lineage: true,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, logs
}

// In the loop, a 2xx answer is merged into the output and a 4xx sends the
// record to the dead-letter topic with the service's reason; neither log
// nor dead letter shows the secret header.
func TestDeadLetterOn4xx(t *testing.T) {
	srv := statusServer(t)
	c := build(t, map[string]string{"URL": `"` + srv.URL + `/\(.status)"`, "HEADER_FILES": "Authorization=" + secretFile(t)})
	d, logs := drive(t, c)
	res, err := d.Send(&kgo.Record{Key: []byte("a"), Value: []byte(`{"status":200}`)}, &kgo.Record{Key: []byte("b"), Value: []byte(`{"status":404}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res[0].Outputs) != 1 || string(res[0].Outputs[0].Value) != `{"response":"why\n  /200\n","status":200}` {
		t.Errorf("200: outputs %v, want the merged record", res[0].Outputs)
	}
	dl := res[1].DeadLetter
	if dl == nil || dl.Stage != "http" || !strings.Contains(dl.Err.Error(), "404 Not Found: why /404") {
		t.Fatalf("404: dead letter %+v, want one of stage http saying 404 and the body", dl)
	}
	for _, h := range res[1].DeadLetterRecord.Headers {
		if strings.Contains(string(h.Value), "s3cr3t") {
			t.Errorf("dead-letter header %s shows the secret", h.Key)
		}
	}
	if strings.Contains(logs.String(), "s3cr3t") {
		t.Errorf("the log shows the secret:\n%s", logs)
	}
}

// waitReady waits for d's instance to report itself ready.
func waitReady(t *testing.T, d *pipelinetest.Driver) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !d.Status().Ready {
		if time.Now().After(deadline) {
			t.Fatal("the instance is not ready")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// flappingServer answers 503, then twice not within TIMEOUT, then
// answers; it counts the requests.
func flappingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch i := n.Add(1); {
		case i <= 3:
			http.Error(w, "restarting", http.StatusServiceUnavailable)
		case i <= 5:
			select {
			case <-time.After(2 * time.Second):
			case <-r.Context().Done():
			}
		default:
			io.WriteString(w, `{"ok":true}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// sendWatching sends rec through d and, until Send returns, reports
// whether the instance was ever not ready.
func sendWatching(t *testing.T, d *pipelinetest.Driver, rec *kgo.Record) (pipelinetest.Result, bool) {
	t.Helper()
	type sent struct {
		res []pipelinetest.Result
		err error
	}
	done := make(chan sent, 1)
	go func() {
		res, err := d.Send(rec)
		done <- sent{res, err}
	}()
	unready := false
	for {
		select {
		case s := <-done:
			if s.err != nil {
				t.Fatal(s.err)
			}
			return s.res[0], unready
		case <-time.After(5 * time.Millisecond):
			if !d.Status().Ready {
				unready = true
			}
		}
	}
}

// A service that fails (503, then timeouts) makes the transaction abort
// and run again, and the instance not ready, until it answers: then the
// record is written once, not dead-lettered, and the instance is ready.
func TestFlappingService(t *testing.T) {
	srv, n := flappingServer(t)
	c := build(t, map[string]string{"URL": `"` + srv.URL + `/"`, "TIMEOUT": "100ms", "RESPONSE": ".record + .response.body"})
	d, logs := drive(t, c)
	waitReady(t, d)
	res, unready := sendWatching(t, d, &kgo.Record{Key: []byte("k"), Value: []byte(`{"id":7}`)})
	if !unready {
		t.Error("the instance was ready throughout the outage")
	}
	if res.DeadLetter != nil || len(res.Outputs) != 1 || string(res.Outputs[0].Value) != `{"id":7,"ok":true}` {
		t.Errorf("after the outage: outputs %v, dead letter %+v; want the merged record once", res.Outputs, res.DeadLetter)
	}
	if got := n.Load(); got < 6 {
		t.Errorf("the service got %d requests, want at least 6 (one per attempt)", got)
	}
	waitReady(t, d)
	if !strings.Contains(logs.String(), "no answer within TIMEOUT=100ms") || !strings.Contains(logs.String(), "503 Service Unavailable") {
		t.Errorf("the log does not say why the service failed:\n%s", logs)
	}
}

// A refused connection is an outage too: the record waits for the
// service to listen, then is written once.
func TestRefusedUntilListening(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := build(t, map[string]string{"URL": fmt.Sprintf(`"http://%s/"`, addr)})
	d, _ := drive(t, c)
	waitReady(t, d)
	go func() {
		// Listen again once the loop has found the service refusing.
		for d.Status().Ready {
			time.Sleep(5 * time.Millisecond)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `"up"`) })}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
	}()
	res, unready := sendWatching(t, d, &kgo.Record{Value: []byte(`{"id":1}`)})
	if !unready || res.DeadLetter != nil || len(res.Outputs) != 1 || string(res.Outputs[0].Value) != `{"id":1,"response":"up"}` {
		t.Errorf("unready %v, outputs %v, dead letter %+v; want unready, then the merged record once", unready, res.Outputs, res.DeadLetter)
	}
}
