// Package httpcall registers the "http" transform, which calls an HTTP
// service once per record and merges its answer into the record: the
// method (METHOD), the URL (URL) and the body (BODY) are jq expressions
// over the record's JSON value, and RESPONSE, a jq expression over
// {record: <the value>, response: {status, headers, body}}, makes the
// output values (each result one output record, none filtering the
// record out, as for the jq transform).
//
// What the service answers decides what happens to the record:
//
//   - 2xx: the record succeeds, with RESPONSE's results.
//   - another status (a 4xx such as 404, or a 3xx not followed): the
//     record fails, and PROCESSOR_ON_ERROR decides (dead letter, skip or
//     stop), as for any record a transform fails.
//   - 5xx, 408, 429, a timeout (TIMEOUT), a refused or broken
//     connection: the service is unavailable, which is not the record's
//     fault (transform.Unavailable). The transaction is aborted and
//     retried after a backoff, the instance reports itself not ready until
//     the service answers again, and no record is failed for it.
//
// The transform runs inside the transaction like every transform, so an
// aborted or retried transaction calls the service again for the same
// records: a request happens once per attempt, not once per record. It is
// for lookups and idempotent calls (GET, or a PUT keyed by the record),
// never for effects that must happen once.
//
// The transform is ordered (transform.Ordered) and declares MAX_IN_FLIGHT
// (transform.Concurrent): under PROCESSOR_ORDERING=key the processor runs
// up to MAX_IN_FLIGHT records of a partition at once, each waiting on its
// request, whatever PROCESSOR_WORKERS says, and each key's records one
// after another in offset order.
//
// Header values are given in HEADERS, or read from files in HEADER_FILES
// (mounted secrets such as an Authorization value); a value from a file is
// never logged nor put in an error message.
package httpcall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/itchyny/gojq"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/record"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/jq"
)

func init() {
	transform.Register("http", transform.Typed("calls an HTTP service per record (URL, METHOD, BODY: jq) and merges its answer into the record (RESPONSE: jq)", New))
}

// Settings are the http transform's settings, one set per chain entry.
// None is named ADDR or TOKEN_FILE: PROCESSOR_HTTP_ADDR and
// PROCESSOR_HTTP_TOKEN_FILE are the processor's own.
type Settings struct {
	// URL is the jq expression of the URL to call.
	URL string `setting:"URL" required:"true" doc:"a jq expression over the record's JSON value that yields the URL to call" form:"a jq expression yielding an http or https URL, e.g. \"http://users:8080/users/\\(.user_id)\""`
	// Method is a method name, or a jq expression yielding one.
	Method string `setting:"METHOD" default:"GET" doc:"the request's method: a method name, or a jq expression over the record's value that yields one" form:"GET, POST, PUT, PATCH, DELETE or HEAD, or a jq expression yielding one, e.g. if .id then \"PUT\" else \"POST\" end"`
	// Body is the jq expression of the request body; empty: none.
	Body string `setting:"BODY" doc:"a jq expression over the record's value that yields the request body: a string is sent as it is, any other value as JSON (Content-Type application/json unless HEADERS sets one); unset sends no body" form:"a jq expression, e.g. {id: .user_id}"`
	// Headers are Name=value pairs sent with every request.
	Headers []string `setting:"HEADERS" doc:"headers of every request; secrets belong in HEADER_FILES" form:"comma-separated Name=value pairs, e.g. Accept=application/json,X-Source=orders (values cannot contain commas; no Authorization, Cookie or names with token, secret, key or password)"`
	// HeaderFiles are Name=path pairs: each header's value read from a file.
	HeaderFiles []string `setting:"HEADER_FILES" doc:"headers of every request whose values are read from files at start, such as mounted secrets (a trailing newline is dropped); the values are never logged" form:"comma-separated Name=path pairs, e.g. Authorization=/var/run/secrets/users-api/authorization"`
	// Timeout bounds one request, answer included.
	Timeout time.Duration `setting:"TIMEOUT" default:"2s" doc:"how long one request may take, answer included; a request that takes longer counts as the service being unavailable" form:"a Go duration from 1ms to 1m, e.g. 500ms"`
	// Response is the jq expression making the output values.
	Response string `setting:"RESPONSE" default:".record + {response: .response.body}" doc:"a jq expression over {record: <the value>, response: {status, headers, body}} (body parsed as JSON, or a string when it is not JSON; header names in lower case) whose results are the output values" form:"a jq expression, e.g. .record + {user: .response.body.name}"`
	// MaxInFlight bounds the requests of one partition at once.
	MaxInFlight int `setting:"MAX_IN_FLIGHT" default:"1" doc:"the most requests of one partition at once; above 1 it needs PROCESSOR_ORDERING=key, which keeps each key's records in order, and it does not depend on PROCESSOR_WORKERS" form:"an integer from 1 to 256"`
}

// MaxResponseBytes bounds the body of one response: a longer one fails
// the record.
const MaxResponseBytes = 8 << 20

// MaxInFlight is the most MAX_IN_FLIGHT may be.
const MaxInFlight = 256

// Transform calls the service for each record. Like every transform it is
// called from one goroutine at a time; the processor builds one per
// request it runs at once.
type Transform struct {
	url, method, body, response *jq.Program
	literalMethod               string // METHOD as a plain method name; "" when it is an expression
	headers                     http.Header
	secret                      map[string]bool // canonical names of headers from files
	timeout                     time.Duration
	inFlight                    int
	client                      *http.Client
}

var (
	_ transform.Timed      = (*Transform)(nil)
	_ transform.Ordered    = (*Transform)(nil)
	_ transform.Concurrent = (*Transform)(nil)
	_ transform.Toucher    = (*Transform)(nil)
)

// methodName is a plain method name, which METHOD takes as it is.
var methodName = regexp.MustCompile(`^[A-Z]+$`)

// New compiles the expressions, reads the header files and checks the
// bounds. Every refusal is a *settings.Error naming its setting; the value
// of a header file is never part of one.
func New(s *Settings) (transform.Transform, error) {
	t := &Transform{timeout: s.Timeout, inFlight: s.MaxInFlight, headers: http.Header{}, secret: map[string]bool{}}
	var err error
	if t.url, err = compile("URL", s.URL); err != nil {
		return nil, err
	}
	if methodName.MatchString(s.Method) {
		t.literalMethod = s.Method
	} else if t.method, err = compile("METHOD", s.Method); err != nil {
		return nil, err
	}
	if s.Body != "" {
		if t.body, err = compile("BODY", s.Body); err != nil {
			return nil, err
		}
	}
	if t.response, err = compile("RESPONSE", s.Response); err != nil {
		return nil, err
	}
	if s.Timeout < time.Millisecond || s.Timeout > time.Minute {
		return nil, transform.Invalid("TIMEOUT", s.Timeout.String(), "")
	}
	if s.MaxInFlight < 1 || s.MaxInFlight > MaxInFlight {
		return nil, transform.Invalid("MAX_IN_FLIGHT", fmt.Sprint(s.MaxInFlight), "")
	}
	if err := t.readHeaders(s); err != nil {
		return nil, err
	}
	t.client = &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second,
		ForceAttemptHTTP2: true, TLSHandshakeTimeout: s.Timeout,
	}}
	return t, nil
}

// compile compiles the jq expression of setting field.
func compile(field, expr string) (*jq.Program, error) {
	p, err := jq.Compile(expr)
	if err != nil {
		return nil, jq.ExprError(field, expr, err)
	}
	return p, nil
}

// secretName matches header names whose values are secrets, which HEADERS
// refuses so that they are not shown where settings are.
var secretName = regexp.MustCompile(`(?i)^(authorization|proxy-authorization|cookie)$|token|secret|key|password`)

// readHeaders fills t.headers from HEADERS and HEADER_FILES.
func (t *Transform) readHeaders(s *Settings) error {
	joined := strings.Join(s.Headers, ",")
	for _, item := range s.Headers {
		name, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		name = strings.TrimSpace(name)
		switch {
		case !ok || !validHeaderName(name) || t.headers.Get(name) != "":
			return transform.Invalid("HEADERS", joined, "")
		case secretName.MatchString(name):
			// The value is likely the secret itself: not shown.
			e := transform.Invalid("HEADERS", "", fmt.Sprintf(" (%s looks like a secret: put it in a file named in HEADER_FILES)", name))
			e.Secret = true
			return e
		}
		t.headers.Set(name, strings.TrimSpace(value))
	}
	joined = strings.Join(s.HeaderFiles, ",")
	for _, item := range s.HeaderFiles {
		name, path, ok := strings.Cut(strings.TrimSpace(item), "=")
		name, path = strings.TrimSpace(name), strings.TrimSpace(path)
		if !ok || !validHeaderName(name) || path == "" || t.headers.Get(name) != "" {
			return transform.Invalid("HEADER_FILES", joined, "")
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return transform.Invalid("HEADER_FILES", joined, fmt.Sprintf(" (%s: %v)", name, pathError(err)))
		}
		v := strings.TrimRight(string(b), "\r\n")
		if v == "" || strings.ContainsAny(v, "\r\n\x00") {
			return transform.Invalid("HEADER_FILES", joined, fmt.Sprintf(" (the file of %s must hold one line, not empty)", name))
		}
		t.headers.Set(name, v)
		t.secret[http.CanonicalHeaderKey(name)] = true
	}
	return nil
}

// pathError is a file's error without anything read from it.
func pathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}

// validHeaderName reports whether name is an HTTP token (RFC 9110).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if c > 0x7e || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}

// CallTimeout returns TIMEOUT: one record's request takes no longer.
func (t *Transform) CallTimeout() time.Duration { return t.timeout }

// Ordered returns true: each key's records (each partition's under
// PROCESSOR_ORDERING=partition) are called for in offset order.
func (t *Transform) Ordered() bool { return true }

// InFlight returns MAX_IN_FLIGHT: how many records of one partition may
// wait on their requests at once.
func (t *Transform) InFlight() int { return t.inFlight }

// Touches returns the value: the expressions read it and RESPONSE writes
// it; keys pass through unchanged.
func (t *Transform) Touches() transform.Parts { return transform.PartValue }

// Close releases the idle connections.
func (t *Transform) Close() error {
	t.client.CloseIdleConnections()
	return nil
}

// Process calls the service for rec and appends one record per result of
// RESPONSE: the first is rec itself, the others new records with rec's
// key, a copy of its headers, its timestamp and topic.
func (t *Transform) Process(ctx context.Context, _ record.Source, rec *kgo.Record, out []*kgo.Record) ([]*kgo.Record, error) {
	v, err := jq.ParseValue(rec.Value)
	if err != nil {
		return out, fmt.Errorf("the value is not JSON: %w", err)
	}
	req, err := t.request(ctx, v)
	if err != nil {
		return out, err
	}
	resp, err := t.call(ctx, req)
	if err != nil {
		return out, err
	}
	iter := t.response.Run(ctx, map[string]any{"record": v, "response": resp})
	var vals [][]byte
	for {
		r, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := r.(error); isErr {
			return out, fmt.Errorf("RESPONSE: %w", jq.RunError(err))
		}
		if len(vals) == jq.MaxResults {
			return out, fmt.Errorf("RESPONSE produced more than %d results for one record", jq.MaxResults)
		}
		b, err := gojq.Marshal(r)
		if err != nil {
			return out, fmt.Errorf("encoding a RESPONSE result as JSON: %w", err)
		}
		vals = append(vals, b)
	}
	for i, b := range vals {
		if i == 0 {
			rec.Value = b
			out = append(out, rec)
			continue
		}
		hs := append([]kgo.RecordHeader(nil), rec.Headers...)
		out = append(out, &kgo.Record{Key: rec.Key, Value: b, Headers: hs, Timestamp: rec.Timestamp, Topic: rec.Topic})
	}
	return out, nil
}

// readBody reads at most MaxResponseBytes of body.
func readBody(body io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(body, MaxResponseBytes+1))
	if err == nil && len(b) > MaxResponseBytes {
		return nil, fmt.Errorf("the response body is longer than %d bytes", MaxResponseBytes)
	}
	return b, err
}
