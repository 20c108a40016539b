package oauthtoken

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// secret has the characters that basic authentication must form-encode.
const (
	clientID = "orders enricher"
	secret   = "s3cr:t+/=%&x"
)

// endpoint is a token endpoint over real HTTP that checks each request as
// RFC 6749 says and answers with answer(n) for its n-th request (from 1).
type endpoint struct {
	*httptest.Server
	calls  atomic.Int32
	post   bool // the credentials come in the body
	form   atomic.Value
	answer func(n int) (status int, body string)
	t      *testing.T
}

func newEndpoint(t *testing.T, answer func(n int) (int, string)) *endpoint {
	e := &endpoint{answer: answer, t: t}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.Close)
	return e
}

func (e *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	n := int(e.calls.Add(1))
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.PostForm.Get("grant_type") != "client_credentials" ||
		r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		e.t.Errorf("request %d: %s %v %v (%v)", n, r.Method, r.Header, r.PostForm, err)
	}
	e.form.Store(r.PostForm)
	id, sec, ok := r.BasicAuth()
	if e.post {
		id, sec, ok = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret"), !ok
	} else {
		id, _ = url.QueryUnescape(id)
		sec, _ = url.QueryUnescape(sec)
	}
	if !ok || id != clientID || sec != secret {
		e.t.Errorf("request %d: credentials %q %q (basic: %v)", n, id, sec, !e.post)
	}
	status, body := e.answer(n)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// ok is the answer of a token "tok-N" valid for secs seconds.
func ok(n int, secs int) (int, string) {
	return http.StatusOK, fmt.Sprintf(`{"access_token":"tok-%d","token_type":"Bearer","expires_in":%d}`, n, secs)
}

// clock is a settable time for Options.now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newSource(t *testing.T, e *endpoint, c *clock, jitter float64) *Source {
	t.Helper()
	s, err := New(Options{TokenURL: e.URL + "/token", ClientID: clientID, ClientSecret: secret, Scope: "kafka.read kafka.write",
		Audience: "cluster-1", PostCredentials: e.post, now: c.now, jitter: func() float64 { return jitter }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func get(t *testing.T, s *Source) string {
	t.Helper()
	v, _, err := s.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A token is fetched once, with the scope and audience, and handed out
// until its refresh time: between 75% and 85% of its lifetime, as the
// jitter says; from then on the next call fetches a new one.
func TestRefreshTiming(t *testing.T) {
	for _, jitter := range []float64{0, 0.5, 0.999} {
		for _, post := range []bool{false, true} {
			t.Run(fmt.Sprintf("jitter=%v,post=%v", jitter, post), func(t *testing.T) {
				e := newEndpoint(t, func(n int) (int, string) { return ok(n, 100) })
				e.post = post
				c := &clock{t: time.Unix(1_700_000_000, 0)}
				s := newSource(t, e, c, jitter)
				if got := get(t, s); got != "tok-1" {
					t.Fatalf("token %q", got)
				}
				f := e.form.Load().(url.Values)
				if f.Get("scope") != "kafka.read kafka.write" || f.Get("audience") != "cluster-1" {
					t.Errorf("form %v", f)
				}
				refresh := time.Duration((0.75 + 0.10*jitter) * float64(100*time.Second))
				c.add(refresh - time.Millisecond)
				if got := get(t, s); got != "tok-1" || e.calls.Load() != 1 {
					t.Fatalf("before the refresh time: %q after %d calls", got, e.calls.Load())
				}
				c.add(time.Millisecond)
				if got := get(t, s); got != "tok-2" || s.Fetches() != 2 {
					t.Fatalf("at the refresh time: %q after %d fetches", got, s.Fetches())
				}
			})
		}
	}
}

// Callers at once with no token cause one fetch, and all get its token.
func TestConcurrentCallersFetchOnce(t *testing.T) {
	e := newEndpoint(t, func(n int) (int, string) { time.Sleep(50 * time.Millisecond); return ok(n, 60) })
	s := newSource(t, e, &clock{t: time.Now()}, 0.5)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if got := get(t, s); got != "tok-1" {
				t.Errorf("token %q", got)
			}
		})
	}
	wg.Wait()
	if n := e.calls.Load(); n != 1 {
		t.Errorf("%d fetches", n)
	}
}

// A refresh that fails leaves the current token in use until it expires
// (retrying at most once a second); after that the failure is the error.
func TestFailedRefreshKeepsValidToken(t *testing.T) {
	e := newEndpoint(t, func(n int) (int, string) {
		if n == 1 {
			return ok(n, 10)
		}
		return http.StatusServiceUnavailable, `{"error":"temporarily_unavailable"}`
	})
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	s := newSource(t, e, c, 0)
	get(t, s)
	c.add(8 * time.Second)
	if got := get(t, s); got != "tok-1" || e.calls.Load() != 2 {
		t.Fatalf("after a failed refresh: %q, %d calls", got, e.calls.Load())
	}
	c.add(500 * time.Millisecond)
	get(t, s)
	if n := e.calls.Load(); n != 2 {
		t.Errorf("retried within a second: %d calls", n)
	}
	c.add(2 * time.Second) // expired
	_, _, err := s.Token(context.Background())
	if err == nil || !strings.Contains(err.Error(), "answered 503 Service Unavailable (temporarily_unavailable)") {
		t.Fatalf("err %v", err)
	}
}

// The endpoint's refusals and failures are errors that say what happened
// and where, and never show the secret, even one the endpoint echoes.
func TestErrors(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	for _, c := range []struct {
		name   string
		status int
		body   string
		url    string
		want   string
		// refused: a *RefusedError; credentials: about the client's.
		refused, credentials bool
	}{
		{name: "401", status: 401, body: `{"error":"invalid_client","error_description":"bad secret ` + secret + `"}`,
			want: `client id "orders enricher" or its secret refused by URL: 401 Unauthorized (invalid_client: bad secret [redacted])`, refused: true, credentials: true},
		{name: "400 invalid_client", status: 400, body: `{"error":"invalid_client"}`,
			want: `client id "orders enricher" or its secret refused by URL: 400 Bad Request (invalid_client)`, refused: true, credentials: true},
		{name: "400 invalid_scope", status: 400, body: `{"error":"invalid_scope","error_description":"no\nsuch scope"}`,
			want: `the OAuth token endpoint URL answered 400 Bad Request (invalid_scope: no such scope)`, refused: true},
		{name: "500 not json", status: 500, body: `<html>` + secret, want: `the OAuth token endpoint URL answered 500 Internal Server Error`},
		{name: "not json", status: 200, body: `<html>`, want: `answered 200 OK with no JSON token`},
		{name: "no token", status: 200, body: `{"token_type":"bearer","expires_in":60}`, want: `answered without an access_token`},
		{name: "mac", status: 200, body: `{"access_token":"x","token_type":"mac","expires_in":60}`, want: `a token of type "mac", not a bearer token`},
		{name: "no expiry", status: 200, body: `{"access_token":"opaque","token_type":"bearer"}`,
			want: `gave no expires_in, and its token is not a JWT with an exp claim`},
		{name: "expired jwt", status: 200, body: `{"access_token":"` + jwt(1000) + `"}`, want: `gave a token that has already expired (at 1970-01-01T00:16:40Z)`},
		{name: "unreachable", url: deadURL, want: `the OAuth token endpoint URL is unreachable: dial tcp`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEndpoint(t, func(int) (int, string) { return c.status, c.body })
			u := e.URL + "/token"
			if c.url != "" {
				u = c.url + "/token"
			}
			s, err := New(Options{TokenURL: u, ClientID: clientID, ClientSecret: secret})
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = s.Token(context.Background())
			want := strings.ReplaceAll(c.want, "URL", u)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err %v, want %q", err, want)
			}
			var refused *RefusedError
			if errors.As(err, &refused) != c.refused || c.refused && refused.Credentials != c.credentials {
				t.Errorf("%T %+v: want refused %v, credentials %v", err, refused, c.refused, c.credentials)
			}
			for _, leak := range []string{secret, url.QueryEscape(secret)} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("the error shows the secret: %v", err)
				}
			}
		})
	}
}

// jwt is an unsigned JWT whose exp claim is exp.
func jwt(exp int64) string {
	enc := base64.RawURLEncoding.EncodeToString
	claims, _ := json.Marshal(map[string]any{"sub": "x", "exp": exp})
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(claims) + ".sig"
}

// Without expires_in, a JWT's exp claim dates the token; expires_in may
// also come as a string.
func TestExpiryFromJWTOrString(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for name, body := range map[string]string{
		"jwt":    `{"access_token":"` + jwt(now.Unix()+40) + `","token_type":"bearer"}`,
		"string": `{"access_token":"opaque","token_type":"bearer","expires_in":"40"}`,
	} {
		t.Run(name, func(t *testing.T) {
			e := newEndpoint(t, func(int) (int, string) { return 200, body })
			s := newSource(t, e, &clock{t: now}, 0)
			_, exp, err := s.Token(context.Background())
			if err != nil || !exp.Equal(now.Add(40*time.Second)) {
				t.Fatalf("expiry %v, err %v", exp, err)
			}
		})
	}
}

// New refuses incomplete options without showing the secret.
func TestNewRefuses(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{TokenURL: "idp.example.com/token", ClientID: "a", ClientSecret: secret}, "is not an absolute http or https URL"},
		{Options{TokenURL: "ftp://idp/token", ClientID: "a", ClientSecret: secret}, "is not an absolute http or https URL"},
		{Options{TokenURL: "https://u:pw@idp/token", ClientID: "", ClientSecret: secret}, "no client id"},
		{Options{TokenURL: "https://u:" + secret + "@idp/token", ClientID: "a", ClientSecret: secret}, "does not parse"},
		{Options{TokenURL: "https://idp/token", ClientID: "a"}, "no client secret"},
	} {
		_, err := New(c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("%+v: %v, want %q", c.o.TokenURL, err, c.want)
		}
	}
}
