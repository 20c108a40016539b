package httpcall

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/itchyny/gojq"

	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/transform/jq"
)

// prepared is a record's request before it is sent: what the expressions
// made of the record.
type prepared struct {
	method, url string
	body        []byte
	json        bool // body is JSON-encoded (BODY yielded a value that is not a string)
}

// request evaluates URL, METHOD and BODY on the record's value v. A
// result of the wrong kind fails the record: the expressions decide on
// the record's data.
func (t *Transform) request(ctx context.Context, v any) (prepared, error) {
	var p prepared
	u, err := one(ctx, t.url, v, "URL")
	if err != nil {
		return p, err
	}
	s, ok := u.(string)
	pu, perr := url.Parse(s)
	if !ok || perr != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return p, fmt.Errorf("URL yielded %s, want an http or https URL", shown(u))
	}
	p.url = s
	p.method = t.literalMethod
	if t.method != nil {
		m, err := one(ctx, t.method, v, "METHOD")
		if err != nil {
			return p, err
		}
		if p.method, ok = m.(string); !ok || !methodName.MatchString(p.method) {
			return p, fmt.Errorf("METHOD yielded %s, want a method name such as GET", shown(m))
		}
	}
	if t.body != nil {
		b, err := one(ctx, t.body, v, "BODY")
		if err != nil {
			return p, err
		}
		if s, isText := b.(string); isText {
			p.body = []byte(s)
		} else if p.body, err = gojq.Marshal(b); err != nil {
			return p, fmt.Errorf("encoding BODY's result as JSON: %w", err)
		} else {
			p.json = true
		}
	}
	return p, nil
}

// one runs prog on v and returns its one result; no result, more than one
// or an error fail the record.
func one(ctx context.Context, prog *jq.Program, v any, field string) (any, error) {
	iter := prog.Run(ctx, v)
	r, ok := iter.Next()
	if !ok {
		return nil, fmt.Errorf("%s yielded no value", field)
	}
	if err, isErr := r.(error); isErr {
		return nil, fmt.Errorf("%s: %w", field, jq.RunError(err))
	}
	if _, more := iter.Next(); more {
		return nil, fmt.Errorf("%s yielded more than one value", field)
	}
	return r, nil
}

// shown is a result as an error message shows it: JSON, cut short.
func shown(v any) string {
	b, err := gojq.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// call sends p within TIMEOUT and returns the response as RESPONSE sees
// it: {status, headers, body}. A 2xx answer is a response; another answer
// below 500 (except 408 and 429) fails the record; a 5xx, 408, 429, a
// timeout or a connection that fails is transform.Unavailable, naming URL.
// When ctx itself ends (the transaction's budget, a shutdown), its error
// is returned, not the service's.
func (t *Transform) call(ctx context.Context, p prepared) (map[string]any, error) {
	rctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	var body io.Reader
	if p.body != nil {
		body = bytes.NewReader(p.body)
	}
	req, err := http.NewRequestWithContext(rctx, p.method, p.url, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", p.method, p.url, err)
	}
	for name, vs := range t.headers {
		req.Header[name] = vs
	}
	if p.json && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := t.client.Do(req)
	var b []byte
	if err == nil {
		b, err = readBody(resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", p.method, p.url, context.Cause(ctx))
		}
		return nil, t.unavailable(p, t.failure(rctx, err))
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests {
		return nil, t.unavailable(p, statusError(resp, b))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("%s %s: %s", p.method, p.url, statusError(resp, b))
	}
	return map[string]any{"status": resp.StatusCode, "headers": headerValues(resp.Header), "body": bodyValue(b)}, nil
}

// failure says why a request got no answer, without the URL (which the
// caller adds): a timeout as TIMEOUT's, the rest as the client says.
func (t *Transform) failure(rctx context.Context, err error) error {
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		return &settings.Message{Err: context.DeadlineExceeded,
			Text: settings.Say("no answer within ", settings.Ref("TIMEOUT"), "="+t.timeout.String())}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// unavailable is the error of the service at URL failing p: not the
// record's fault.
func (t *Transform) unavailable(p prepared, err error) error {
	text := settings.Say("the service that ", settings.Ref("URL"), " calls is unavailable: "+p.method+" "+p.url+": ")
	var msg *settings.Message
	if errors.As(err, &msg) {
		text = append(text, msg.Text...)
	} else {
		text = append(text, settings.Say(err.Error())...)
	}
	return transform.Unavailable(&settings.Message{Err: err, Text: text})
}

// statusError is an answer that is not 2xx: its status and the start of
// its body, which says why.
func statusError(resp *http.Response, b []byte) error {
	msg := strings.Join(strings.Fields(string(b)), " ") // one line
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return fmt.Errorf("answered %s: %s", resp.Status, msg)
}

// headerValues are a response's headers for RESPONSE: lower-case names,
// each with its first value.
func headerValues(h http.Header) map[string]any {
	m := make(map[string]any, len(h))
	for name, vs := range h {
		if len(vs) > 0 {
			m[strings.ToLower(name)] = vs[0]
		}
	}
	return m
}

// bodyValue is a response body for RESPONSE: its JSON value, or the text
// when it is not JSON (null when empty).
func bodyValue(b []byte) any {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	if v, err := jq.ParseValue(b); err == nil {
		return v
	}
	return string(b)
}
