package schemas

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/schema"
)

// waitExit waits for p to exit by itself and returns its exit code.
func waitExit(t *testing.T, p *itest.Proc, within time.Duration, what string) int {
	t.Helper()
	select {
	case <-p.Done:
	case <-time.After(within):
		t.Fatalf("still running %s after start: %s", within, what)
	}
	var ee *exec.ExitError
	if !errors.As(p.Err, &ee) {
		if p.Err == nil {
			return 0
		}
		t.Fatalf("%s: %v", what, p.Err)
	}
	return ee.ExitCode()
}

// configErrorLines are the lines of logs that report a configuration
// error.
func configErrorLines(logs string) []string {
	var out []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "configuration error") {
			out = append(out, l)
		}
	}
	return out
}

// An unusable output schema stops the processor at start with exit code
// 2 and one line naming the setting to fix: a schema file the registry
// refuses as incompatible with the subject's latest version (BACKWARD:
// a field added without a default) names PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE,
// and an output subject with no version names PROCESSOR_OUTPUT_VALUE_SUBJECT
// (or PROCESSOR_OUTPUT_KEY_SUBJECT, configured for keys that pass
// through); so do the subject name strategy's mistakes.
func TestSchemaOutputRefusedAtStart(t *testing.T) {
	t.Parallel()
	forEachSchemaTarget(t, func(t *testing.T, tg *itest.Target, r *itest.SREnv) {
		in, out, group := itest.Unique("sr-refuse-in"), itest.Unique("sr-refuse-out"), itest.Unique("sr-refuse-group")
		tg.NewTopics(t, 1, in, out)
		r.Register(t, in+"-value", schema.Avro, payV1)
		r.Register(t, out+"-value", schema.Avro, payV1)
		bad := filepath.Join(t.TempDir(), "bad.avsc")
		incompatible := `{"type":"record","name":"Payment","namespace":"e2e","fields":[{"name":"id","type":"string"},` +
			`{"name":"amount_cents","type":"long"},{"name":"merchant","type":"string"}]}`
		if err := os.WriteFile(bad, []byte(incompatible), 0o600); err != nil {
			t.Fatal(err)
		}
		union := filepath.Join(t.TempDir(), "union.avsc")
		if err := os.WriteFile(union, []byte(`["null","string"]`), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name, want string
			extra      []string
		}{
			{"schema-file", "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE", []string{"PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE=" + bad}},
			{"no-versions", "PROCESSOR_OUTPUT_VALUE_SUBJECT", []string{"PROCESSOR_OUTPUT_VALUE_SUBJECT=" + itest.Unique("sr-never-registered")}},
			// Keys pass through (jq reads values only), but a subject set
			// for them is checked all the same.
			{"key-subject", "PROCESSOR_OUTPUT_KEY_SUBJECT", []string{"PROCESSOR_KEY_FORMAT=avro", "PROCESSOR_OUTPUT_KEY_SUBJECT=" + itest.Unique("sr-never-registered")}},
			// A subject name strategy that is not one, one that names each
			// output's subject beside a subject naming one for all, and a
			// schema file with no record name for it to name a subject by.
			{"strategy-unknown", "PROCESSOR_VALUE_SUBJECT_STRATEGY", []string{"PROCESSOR_VALUE_SUBJECT_STRATEGY=RecordNameStrategy"}},
			{"strategy-and-subject", "PROCESSOR_OUTPUT_VALUE_SUBJECT", []string{"PROCESSOR_VALUE_SUBJECT_STRATEGY=record", "PROCESSOR_OUTPUT_VALUE_SUBJECT=" + out + "-value"}},
			{"strategy-unnamed-file", "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE", []string{"PROCESSOR_VALUE_SUBJECT_STRATEGY=topic_record", "PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE=" + union}},
		} {
			inst := tg.SchemaInstance(r, group, in, out, schema.Avro, ".amount_cents *= 2")
			inst.Extra = append(inst.Extra, c.extra...)
			p := itest.RunBinary(t, group+"-"+c.name, inst)
			code := waitExit(t, p, 60*time.Second, c.name)
			lines := configErrorLines(p.Logs.String())
			if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], c.want) {
				t.Errorf("%s: exit %d, configuration error lines %q; want exit 2 and one line naming %s", c.name, code, lines, c.want)
			}
			if strings.Contains(p.Logs.String(), "goroutine ") {
				t.Errorf("%s: the log has a stack trace", c.name)
			}
		}
	})
}

// Record faults with PROCESSOR_ON_ERROR=dlq: a value without the magic
// byte, one naming a schema id the registry does not have (it answered
// 404, 40403: no endless retry, the instance stays ready), one whose
// payload is cut short, and one whose jq output does not fit the output
// schema (a string where a long is wanted) each make exactly one dead
// letter, which holds the original bytes, says why in processor.error,
// names the stage that failed (decode or encode) in
// processor.error.transform and, for the two that failed to decode with
// the id they name, that id in processor.error.schema.id; every good
// record is output exactly once.
func TestSchemaRecordFaults(t *testing.T) {
	t.Parallel()
	forEachSchemaTarget(t, func(t *testing.T, tg *itest.Target, r *itest.SREnv) {
		in, out, dlq, group := itest.Unique("sr-faults-in"), itest.Unique("sr-faults-out"), itest.Unique("sr-faults-dlq"), itest.Unique("sr-faults-group")
		tg.NewTopics(t, 2, in, out, dlq)
		inSubj := r.Register(t, in+"-value", schema.Avro, payV1)
		outSubj := r.Register(t, out+"-value", schema.Avro, formatCases[0].out)
		enc := r.Encoder(t, inSubj)
		const good = 60
		type fault struct {
			value           []byte
			stage, want, id string
		}
		truncated := encode(t, enc, `{"id":"p-truncated-xxxxxxxxxxxxxxxx","amount_cents":123456789}`)
		truncated = truncated[:len(truncated)-12]
		unknown := append([]byte{0, 0x7f, 0xff, 0xff, 0xf0}, encode(t, enc, paymentJSON(1))[5:]...)
		faults := []fault{
			{[]byte(`{"id":"p-json","amount_cents":1}`), "decode", "no magic byte", ""},
			{unknown, "decode", "schema id " + strconv.Itoa(0x7ffffff0), strconv.Itoa(0x7ffffff0)},
			{truncated, "decode", "does not decode", strconv.Itoa(inSubj.ID)},
			{encode(t, enc, `{"id":"bad-encode","amount_cents":5}`), "encode", "does not fit", ""},
		}
		var recs []*kgo.Record
		for i := range good {
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i)), Value: encode(t, enc, paymentJSON(i))})
			if i%15 == 7 {
				f := faults[i/15]
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte("bad" + strconv.Itoa(i/15)), Value: f.value})
			}
		}
		tg.SyncProduce(t, recs...)
		wantDead := map[string]fault{}
		for _, rec := range recs {
			if strings.HasPrefix(string(rec.Key), "bad") {
				i, _ := strconv.Atoi(strings.TrimPrefix(string(rec.Key), "bad"))
				wantDead[itest.SrcKey(rec)] = faults[i]
			}
		}
		inst := tg.SchemaInstance(r, group, in, out, schema.Avro,
			`if .id == "bad-encode" then .amount_cents = "lots" else .amount_cents *= 2 end`)
		inst.OnError, inst.DLQTopic, inst.HTTPAddr = "dlq", dlq, itest.FreeAddr(t)
		p := itest.RunBinary(t, group, inst)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		if code, body := itest.HTTPGet(inst.HTTPAddr, "/readyz"); code != http.StatusOK {
			t.Errorf("/readyz = %d %q after the faulty records, want ready", code, body)
		}
		p.Terminate(t)

		got := outputsByID(t, schema.NewDecoder(r.Reg, schema.Avro, schema.DecoderOptions{}), tg.ReadAll(t, out, true), outSubj.ID)
		checkAmounts(t, got, good, "amount_cents")
		dead := tg.ReadAll(t, dlq, true)
		if len(dead) != len(faults) {
			t.Errorf("%d dead letters, want %d", len(dead), len(faults))
		}
		for _, d := range dead {
			src, _ := itest.SourceOf(d)
			f, ok := wantDead[src]
			if !ok {
				t.Errorf("a dead letter from %q, which is not a faulty record (%s)", src, itest.HeaderValue(d, record.HeaderError))
				continue
			}
			delete(wantDead, src)
			if string(d.Value) != string(f.value) {
				t.Errorf("dead letter from %s: value %x, want the original %x", src, d.Value, f.value)
			}
			if e := itest.HeaderValue(d, record.HeaderError); !strings.Contains(e, f.want) {
				t.Errorf("dead letter from %s: %s = %q, want it to say %q", src, record.HeaderError, e, f.want)
			}
			if st := itest.HeaderValue(d, record.HeaderErrorTransform); st != f.stage {
				t.Errorf("dead letter from %s: %s = %q, want %q", src, record.HeaderErrorTransform, st, f.stage)
			}
			if id := itest.HeaderValue(d, record.HeaderErrorSchemaID); id != f.id {
				t.Errorf("dead letter from %s: %s = %q, want %q", src, record.HeaderErrorSchemaID, id, f.id)
			}
		}
		for src, f := range wantDead {
			t.Errorf("no dead letter for the faulty record at %s (%s)", src, f.want)
		}
	})
}

// A registry outage while the processor runs is no record's fault: with
// the in-process registry stopped and records arriving with a schema id
// the processor has not seen, /readyz says not ready and /healthz turns
// unhealthy naming PROCESSOR_SCHEMA_REGISTRY_URL, and no dead letter is
// written; once the registry is back on the same port with the same state,
// every record is output exactly once and the processor is healthy again.
func TestSchemaRegistryOutage(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		addr, dir := itest.FreeAddr(t), t.TempDir()
		srv, url := startSRServer(t, addr, dir)
		r := &itest.SREnv{Name: "srserver", URL: url, Reg: newSRClient(t, url)}
		in, out, dlq, group := itest.Unique("sr-outage-in"), itest.Unique("sr-outage-out"), itest.Unique("sr-outage-dlq"), itest.Unique("sr-outage-group")
		tg.NewTopics(t, 2, in, out, dlq)
		v1 := r.Register(t, in+"-value", schema.Avro, payV1)
		r.Register(t, out+"-value", schema.Avro, payOutV1) // takes v2's currency too
		write := func(enc *schema.Encoder, from, to int) {
			var recs []*kgo.Record
			for i := from; i < to; i++ {
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte("k" + strconv.Itoa(i%4)), Value: encode(t, enc, paymentJSON(i))})
			}
			tg.SyncProduce(t, recs...)
		}
		write(r.Encoder(t, v1), 0, 50)
		v2 := r.Register(t, in+"-value", schema.Avro, payV2) // an id the processor has not seen
		enc2 := r.Encoder(t, v2)

		httpAddr := itest.FreeAddr(t)
		inst := tg.SchemaInstance(r, group, in, out, schema.Avro, ".amount_cents *= 2")
		inst.OnError, inst.DLQTopic, inst.HTTPAddr = "dlq", dlq, httpAddr
		p := itest.RunBinary(t, group, inst)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		if code, body := itest.HTTPGet(httpAddr, "/healthz"); code != http.StatusOK {
			t.Fatalf("/healthz = %d %q before the outage", code, body)
		}

		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		write(enc2, 50, 100)
		var body string
		itest.WaitFor(t, 20*time.Second, "/healthz to turn unhealthy naming PROCESSOR_SCHEMA_REGISTRY_URL", func() bool {
			var code int
			code, body = itest.HTTPGet(httpAddr, "/healthz")
			return code != http.StatusOK && strings.Contains(body, "PROCESSOR_SCHEMA_REGISTRY_URL")
		})
		if code, b := itest.HTTPGet(httpAddr, "/readyz"); code == http.StatusOK {
			t.Errorf("/readyz = 200 %q during the outage, want not ready", b)
		}
		if dead := tg.ReadAll(t, dlq, false); len(dead) != 0 {
			t.Errorf("%d dead letters during the outage, want none: %s", len(dead), itest.HeaderValue(dead[0], record.HeaderError))
		}
		t.Logf("during the outage /healthz said: %s", body)
		if n := strings.Count(body, "transform decode:"); n != 1 {
			t.Errorf("/healthz names the failed stage %d times, want once: %s", n, body)
		}

		_, url2 := startSRServer(t, addr, dir)
		if url2 != url {
			t.Fatalf("the registry restarted at %s, not %s", url2, url)
		}
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		itest.WaitFor(t, 20*time.Second, "/healthz and /readyz to answer 200 again", func() bool {
			c1, _ := itest.HTTPGet(httpAddr, "/healthz")
			c2, _ := itest.HTTPGet(httpAddr, "/readyz")
			return c1 == http.StatusOK && c2 == http.StatusOK
		})
		p.Terminate(t)
		if dead := tg.ReadAll(t, dlq, true); len(dead) != 0 {
			t.Errorf("%d dead letters, want none; the first: %s", len(dead), itest.HeaderValue(dead[0], record.HeaderError))
		}
		got := outputsByID(t, schema.NewDecoder(r.Reg, schema.Avro, schema.DecoderOptions{}), tg.ReadAll(t, out, true), -1)
		checkAmounts(t, got, 100, "amount_cents")
	})
}

// Credentials the registry refuses stop the processor at start with exit
// code 1 and a line about the credentials naming
// PROCESSOR_SCHEMA_REGISTRY_USERNAME; the password appears nowhere in the
// log. The registry is a proxy that answers 401 unless the password is
// right (and then forwards), so the right password is proven to work.
func TestSchemaRefusedCredentials(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		_, backend := startSRServer(t, "127.0.0.1:0", "")
		const user, password = "svc-processor", "s3cret-registry-pw"
		proxy := authProxy(t, backend, user, password, new(atomic.Bool))
		r := &itest.SREnv{Name: "srserver", URL: backend, Reg: newSRClient(t, backend)}
		in, out, group := itest.Unique("sr-creds-in"), itest.Unique("sr-creds-out"), itest.Unique("sr-creds-group")
		tg.NewTopics(t, 1, in, out)
		inSubj := r.Register(t, in+"-value", schema.Avro, payV1)
		r.Register(t, out+"-value", schema.Avro, formatCases[0].out)
		tg.SyncProduce(t, &kgo.Record{Topic: in, Value: encode(t, r.Encoder(t, inSubj), paymentJSON(0))})

		run := func(name, pw string) *itest.Proc {
			inst := tg.SchemaInstance(&itest.SREnv{URL: proxy.URL}, group, in, out, schema.Avro, ".amount_cents *= 2")
			inst.Extra = append(inst.Extra, "PROCESSOR_SCHEMA_REGISTRY_USERNAME="+user, "PROCESSOR_SCHEMA_REGISTRY_PASSWORD="+pw)
			return itest.RunBinary(t, group+"-"+name, inst)
		}
		p := run("wrong", "not-the-"+password)
		code := waitExit(t, p, 60*time.Second, "with refused credentials")
		logs := p.Logs.String()
		line := logLine(logs, "credentials", "PROCESSOR_SCHEMA_REGISTRY_USERNAME")
		if code != 1 || line == "" {
			t.Errorf("exit %d, want 1 with a line about the credentials naming PROCESSOR_SCHEMA_REGISTRY_USERNAME:\n%s", code, logs)
		}
		if strings.Contains(logs, password) {
			t.Error("the log shows the password")
		}
		t.Logf("the line: %s", line)

		ok := run("right", password)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		ok.Terminate(t)
		if n := len(tg.ReadAll(t, out, true)); n != 1 {
			t.Errorf("%d outputs with the right password, want 1", n)
		}
		if strings.Contains(ok.Logs.String(), password) {
			t.Error("the log shows the password")
		}
	})
}

// authProxy is a registry in front of backend that answers 401 unless
// the request carries user and password, or always while refuse is set,
// and forwards the rest.
func authProxy(t *testing.T, backend, user, password string, refuse *atomic.Bool) *httptest.Server {
	t.Helper()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, pw, ok := req.BasicAuth(); refuse.Load() || !ok || u != user || pw != password {
			w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error_code":40101,"message":"Unauthorized"}`)
			return
		}
		forward(w, req, backend, nil)
	}))
	t.Cleanup(proxy.Close)
	return proxy
}

// forward passes req on to backend (a URL without a path), with edit
// applied to the copy when given, and answers w with the response; a
// request that cannot be made or sent is answered 502.
func forward(w http.ResponseWriter, req *http.Request, backend string, edit func(*http.Request)) {
	out, err := http.NewRequestWithContext(req.Context(), req.Method, backend+req.URL.RequestURI(), req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = req.Header.Clone()
	if edit != nil {
		edit(out)
	}
	resp, err := http.DefaultClient.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// Credentials refused while the processor runs (the registry starts
// answering 401 when a record names a schema id not cached yet) stop it
// with exit code 1 and a line naming PROCESSOR_SCHEMA_REGISTRY_USERNAME,
// without the password; the record is not failed (no dead letter) and
// nothing of it is committed, so a restart once the registry takes the
// credentials again outputs every record exactly once.
func TestSchemaCredentialsRefusedWhileRunning(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		_, backend := startSRServer(t, "127.0.0.1:0", "")
		const user, password = "svc-processor", "s3cret-registry-pw"
		var refuse atomic.Bool
		proxy := authProxy(t, backend, user, password, &refuse)
		r := &itest.SREnv{Name: "srserver", URL: backend, Reg: newSRClient(t, backend)}
		in, out, dlq, group := itest.Unique("sr-revoked-in"), itest.Unique("sr-revoked-out"), itest.Unique("sr-revoked-dlq"), itest.Unique("sr-revoked-group")
		tg.NewTopics(t, 1, in, out, dlq)
		v1 := r.Register(t, in+"-value", schema.Avro, payV1)
		r.Register(t, out+"-value", schema.Avro, payOutV1)
		write := func(enc *schema.Encoder, from, to int) {
			var recs []*kgo.Record
			for i := from; i < to; i++ {
				recs = append(recs, &kgo.Record{Topic: in, Value: encode(t, enc, paymentJSON(i))})
			}
			tg.SyncProduce(t, recs...)
		}
		run := func(name string) *itest.Proc {
			inst := tg.SchemaInstance(&itest.SREnv{URL: proxy.URL}, group, in, out, schema.Avro, ".amount_cents *= 2")
			inst.OnError, inst.DLQTopic = "dlq", dlq
			inst.Extra = append(inst.Extra, "PROCESSOR_SCHEMA_REGISTRY_USERNAME="+user, "PROCESSOR_SCHEMA_REGISTRY_PASSWORD="+password)
			return itest.RunBinary(t, group+"-"+name, inst)
		}
		write(r.Encoder(t, v1), 0, 20)
		p := run("first")
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)

		refuse.Store(true)
		write(r.Encoder(t, r.Register(t, in+"-value", schema.Avro, payV2)), 20, 40)
		code := waitExit(t, p, 60*time.Second, "with credentials refused while running")
		logs := p.Logs.String()
		if line := logLine(logs, "credentials", "PROCESSOR_SCHEMA_REGISTRY_USERNAME"); code != 1 || line == "" {
			t.Errorf("exit %d, want 1 with a line about the credentials naming PROCESSOR_SCHEMA_REGISTRY_USERNAME:\n%s", code, logs)
		}
		if strings.Contains(logs, password) {
			t.Error("the log shows the password")
		}
		if dead := tg.ReadAll(t, dlq, false); len(dead) != 0 {
			t.Errorf("%d dead letters for refused credentials, want none: %s", len(dead), itest.HeaderValue(dead[0], record.HeaderError))
		}

		refuse.Store(false)
		p2 := run("second")
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		p2.Terminate(t)
		got := outputsByID(t, schema.NewDecoder(r.Reg, schema.Avro, schema.DecoderOptions{}), tg.ReadAll(t, out, true), -1)
		checkAmounts(t, got, 40, "amount_cents")
	})
}

// A registry that cannot be reached at start is no crash loop: the
// processor retries with backoff, says so, answers /readyz with 503, and
// once the registry is up it processes every record exactly once.
func TestSchemaRegistryDownAtStart(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		addr, dir := itest.FreeAddr(t), t.TempDir()
		srv, url := startSRServer(t, addr, dir)
		r := &itest.SREnv{Name: "srserver", URL: url, Reg: newSRClient(t, url)}
		in, out, group := itest.Unique("sr-down-in"), itest.Unique("sr-down-out"), itest.Unique("sr-down-group")
		tg.NewTopics(t, 1, in, out)
		v1 := r.Register(t, in+"-value", schema.Avro, payV1)
		r.Register(t, out+"-value", schema.Avro, payOutV1)
		enc := r.Encoder(t, v1)
		var recs []*kgo.Record
		for i := range 30 {
			recs = append(recs, &kgo.Record{Topic: in, Value: encode(t, enc, paymentJSON(i))})
		}
		tg.SyncProduce(t, recs...)
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}

		httpAddr := itest.FreeAddr(t)
		inst := tg.SchemaInstance(r, group, in, out, schema.Avro, ".amount_cents *= 2")
		inst.HTTPAddr = httpAddr
		p := itest.RunBinary(t, group, inst)
		itest.WaitFor(t, 30*time.Second, "a line saying the registry cannot be reached", func() bool {
			return logLine(p.Logs.String(), "cannot be reached; retrying", "PROCESSOR_SCHEMA_REGISTRY_URL") != ""
		})
		if code, body := itest.HTTPGet(httpAddr, "/readyz"); code != http.StatusServiceUnavailable {
			t.Errorf("/readyz = %d %q while the registry is down, want 503", code, body)
		}
		select {
		case <-p.Done:
			t.Fatalf("exited while the registry was down: %v", p.Err)
		default:
		}
		startSRServer(t, addr, dir)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		p.Terminate(t)
		checkAmounts(t, outputsByID(t, schema.NewDecoder(r.Reg, schema.Avro, schema.DecoderOptions{}), tg.ReadAll(t, out, true), -1), 30, "amount_cents")
	})
}

// PROCESSOR_EMBEDDED_SCHEMA_REGISTRY=true runs an in-process registry at
// PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR that the processor uses: the
// output schema file is registered there at start, input schemas that
// clients register there decode, and a restart with the same
// PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_DIR keeps the schema ids, so records
// written before it still decode after it, each output exactly once.
func TestSchemaEmbeddedRegistry(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		regAddr, dir, httpAddr := itest.FreeAddr(t), t.TempDir(), itest.FreeAddr(t)
		file := filepath.Join(t.TempDir(), "out.avsc")
		if err := os.WriteFile(file, []byte(formatCases[0].out), 0o600); err != nil {
			t.Fatal(err)
		}
		in, out, group := itest.Unique("sr-embedded-in"), itest.Unique("sr-embedded-out"), itest.Unique("sr-embedded-group")
		tg.NewTopics(t, 1, in, out)
		url := "http://" + regAddr
		r := &itest.SREnv{Name: "embedded", URL: url, Reg: newSRClient(t, url)}
		run := func(name string) *itest.Proc {
			inst := tg.BinaryInstance(group, group+"-1", in, out)
			inst.Transforms, inst.Settings, inst.HTTPAddr = []string{"jq"}, map[string]string{"PROCESSOR_JQ_EXPR": ".amount_cents *= 2"}, httpAddr
			inst.Extra = append(inst.Extra, "PROCESSOR_VALUE_FORMAT=avro", "PROCESSOR_EMBEDDED_SCHEMA_REGISTRY=true",
				"PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR="+regAddr, "PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_DIR="+dir,
				"PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE="+file)
			p := itest.RunBinary(t, group+"-"+name, inst)
			itest.WaitFor(t, 30*time.Second, "/readyz to answer 200", func() bool { code, _ := itest.HTTPGet(httpAddr, "/readyz"); return code == http.StatusOK })
			return p
		}
		write := func(enc *schema.Encoder, from, to int) {
			var recs []*kgo.Record
			for i := from; i < to; i++ {
				recs = append(recs, &kgo.Record{Topic: in, Value: encode(t, enc, paymentJSON(i))})
			}
			tg.SyncProduce(t, recs...)
		}
		p := run("first")
		inSubj := r.Register(t, in+"-value", schema.Avro, payV1)
		enc := r.Encoder(t, inSubj)
		write(enc, 0, 20)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		p.Terminate(t)

		write(enc, 20, 40) // while no registry runs: decoded after the restart
		p2 := run("second")
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		outSubj, err := r.Reg.Latest(t.Context(), out+"-value")
		if err != nil {
			t.Fatal(err)
		}
		got := outputsByID(t, schema.NewDecoder(r.Reg, schema.Avro, schema.DecoderOptions{}), tg.ReadAll(t, out, true), outSubj.ID)
		checkAmounts(t, got, 40, "amount_cents")
		p2.Terminate(t)
	})
}

// A registry that hangs (accepts requests and answers none) while the
// processor runs is an outage too, not the records' fault: records with a
// schema id not cached yet are not dead-lettered, /healthz turns
// unhealthy naming PROCESSOR_SCHEMA_REGISTRY_URL, and once the registry
// answers again every record is output exactly once.
func TestSchemaRegistryHangs(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		_, backend := startSRServer(t, "127.0.0.1:0", "")
		var hang atomic.Bool
		release := make(chan struct{})
		fwd := authProxy(t, backend, "u", "p", new(atomic.Bool))
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if hang.Load() {
				select {
				case <-release:
				case <-req.Context().Done():
					return
				}
			}
			forward(w, req, fwd.URL, func(out *http.Request) { out.SetBasicAuth("u", "p") })
		}))
		t.Cleanup(proxy.Close)
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
		r := &itest.SREnv{Name: "srserver", URL: backend, Reg: newSRClient(t, backend)}
		in, out, dlq, group := itest.Unique("sr-hang-in"), itest.Unique("sr-hang-out"), itest.Unique("sr-hang-dlq"), itest.Unique("sr-hang-group")
		tg.NewTopics(t, 1, in, out, dlq)
		v1 := r.Register(t, in+"-value", schema.Avro, payV1)
		r.Register(t, out+"-value", schema.Avro, payOutV1)
		write := func(enc *schema.Encoder, from, to int) {
			var recs []*kgo.Record
			for i := from; i < to; i++ {
				recs = append(recs, &kgo.Record{Topic: in, Value: encode(t, enc, paymentJSON(i))})
			}
			tg.SyncProduce(t, recs...)
		}
		httpAddr := itest.FreeAddr(t)
		inst := tg.SchemaInstance(&itest.SREnv{URL: proxy.URL}, group, in, out, schema.Avro, ".amount_cents *= 2")
		inst.OnError, inst.DLQTopic, inst.HTTPAddr = "dlq", dlq, httpAddr
		write(r.Encoder(t, v1), 0, 20)
		p := itest.RunBinary(t, group, inst)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)

		hang.Store(true)
		write(r.Encoder(t, r.Register(t, in+"-value", schema.Avro, payV2)), 20, 40)
		var body string
		itest.WaitFor(t, 30*time.Second, "/healthz to turn unhealthy naming PROCESSOR_SCHEMA_REGISTRY_URL", func() bool {
			var code int
			code, body = itest.HTTPGet(httpAddr, "/healthz")
			return code != http.StatusOK && strings.Contains(body, "PROCESSOR_SCHEMA_REGISTRY_URL")
		})
		t.Logf("while the registry hangs /healthz says: %s", body)
		if dead := tg.ReadAll(t, dlq, false); len(dead) != 0 {
			t.Errorf("%d dead letters while the registry hangs, want none: %s", len(dead), itest.HeaderValue(dead[0], record.HeaderError))
		}
		hang.Store(false)
		close(release)
		tg.WaitCaughtUpWithin(t, 60*time.Second, group, in)
		p.Terminate(t)
		if dead := tg.ReadAll(t, dlq, true); len(dead) != 0 {
			t.Errorf("%d dead letters, want none: %s", len(dead), itest.HeaderValue(dead[0], record.HeaderError))
		}
		checkAmounts(t, outputsByID(t, schema.NewDecoder(r.Reg, schema.Avro, schema.DecoderOptions{}), tg.ReadAll(t, out, true), -1), 40, "amount_cents")
	})
}
