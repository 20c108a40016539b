package app

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/txn"
)

// tokenServer is a token endpoint over real HTTP that answers every
// request with status and body, counting them.
func tokenServer(t *testing.T, status int, body string) (url string, calls *atomic.Int32) {
	t.Helper()
	calls = new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		status, body := status, body
		if _, sec, ok := r.BasicAuth(); !ok || sec != testPassword {
			status, body = http.StatusUnauthorized, `{"error":"invalid_client"}`
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/token", calls
}

// oauthConfig is an OAUTHBEARER configuration with the client secret
// testPassword in a file.
func oauthConfig(t *testing.T, tokenURL string) *config.Config {
	t.Helper()
	cfg := validConfig(t)
	cfg.SASLMechanism, cfg.SASLOAuthTokenURL, cfg.SASLOAuthClientID = config.OAuthBearer, tokenURL, "orders-enricher"
	cfg.SASLOAuthClientSecretFile = writeFile(t, t.TempDir(), "secret", testPassword+"\n")
	cfg.SASLOAuthExtensions = []string{"logicalCluster=lkc-1"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// With OAUTHBEARER, every client gets franz-go's OAUTHBEARER with the
// source's tokens; the secret is read from its file, and shown nowhere.
func TestLoadSecurityOAuth(t *testing.T) {
	url, calls := tokenServer(t, 200, `{"access_token":"tok","token_type":"Bearer","expires_in":60}`)
	cfg := oauthConfig(t, url)
	s, err := loadSecurity(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.saslMechanism(); m == nil || m.Name() != "OAUTHBEARER" || len(s.connOpts()) != 1 {
		t.Fatalf("mechanism %v, %d options", m, len(s.connOpts()))
	}
	_, first, err := s.saslMechanism().Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	if want := "n,,\x01auth=Bearer tok\x01logicalCluster=lkc-1\x01\x01"; string(first) != want || calls.Load() != 1 {
		t.Errorf("first message %q after %d calls, want %q", first, calls.Load(), want)
	}
	attrs := fmt.Sprintln(s.logAttrs()...)
	if !strings.Contains(attrs, "sasl_oauth_client_id orders-enricher") || !strings.Contains(attrs, "sasl_oauth_token_url "+url) {
		t.Errorf("log attributes %s", attrs)
	}
	if shown := fmt.Sprintf("%v %+v %#v %s %v", s, s, s, s, s.logAttrs()); strings.Contains(shown, testPassword) {
		t.Errorf("security shows the secret: %s", shown)
	}

	for name, file := range map[string]string{"missing": filepath.Join(t.TempDir(), "missing"), "empty": writeFile(t, t.TempDir(), "e", "\n")} {
		cfg.SASLOAuthClientSecretFile = file
		_, err := loadSecurity(cfg, nil)
		var cerr *settings.Error
		if !errors.As(err, &cerr) || cerr.Var != "PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE" || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s secret file: %v, want one line about PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE", name, err)
		}
	}
}

// The first token is fetched before anything connects: an endpoint that
// refuses the credentials stops the processor, exit 1 with one line that
// names the settings and not the secret; one that fails otherwise, or is
// unreachable, is left to the clients' retries.
func TestCheckOAuth(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/token"
	dead.Close()
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		url      string // instead of the server's
		secret   string // in the file, instead of testPassword
		wantCode int
		wantOK   bool
		wantLog  string
	}{
		{name: "token", status: 200, body: `{"access_token":"tok","expires_in":60}`, wantOK: true},
		{name: "wrong secret", status: 200, secret: "wrong-" + testPassword, wantCode: exitRuntime,
			wantLog: `stopping: authentication failed: client id \"orders-enricher\" or its secret refused by URL: 401 Unauthorized (invalid_client): check PROCESSOR_SASL_OAUTH_CLIENT_ID and the secret in the file in PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE`},
		{name: "bad scope", status: 400, body: `{"error":"invalid_scope"}`, wantCode: exitRuntime,
			wantLog: `answered 400 Bad Request (invalid_scope): check PROCESSOR_SASL_OAUTH_SCOPE`},
		{name: "endpoint failing", status: 503, wantOK: true, wantLog: `no OAuth token yet; the Kafka clients ask again as they connect`},
		{name: "unreachable", url: deadURL, wantOK: true, wantLog: `is unreachable`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := tokenServer(t, tc.status, tc.body)
			if tc.url != "" {
				url = tc.url
			}
			cfg := oauthConfig(t, url)
			if tc.secret != "" {
				cfg.SASLOAuthClientSecretFile = writeFile(t, t.TempDir(), "secret", tc.secret)
			}
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			s, err := loadSecurity(cfg, log)
			if err != nil {
				t.Fatal(err)
			}
			code, ok := checkOAuth(context.Background(), s, log)
			if code != tc.wantCode || ok != tc.wantOK {
				t.Errorf("checkOAuth = %d, %v; want %d, %v", code, ok, tc.wantCode, tc.wantOK)
			}
			if want := strings.ReplaceAll(tc.wantLog, "URL", url); !strings.Contains(logs.String(), want) || strings.Count(logs.String(), "\n") > 1 {
				t.Errorf("log %q lacks %q (in one line)", logs.String(), want)
			}
			if strings.Contains(logs.String(), testPassword) {
				t.Errorf("the log shows the secret: %s", logs.String())
			}
		})
	}
}

// The brokers refusing the token names the client, the endpoint and what
// they check.
func TestAccessMessageOAuth(t *testing.T) {
	cfg := &config.Config{SASLMechanism: config.OAuthBearer, SASLOAuthClientID: "orders-enricher", SASLOAuthTokenURL: "https://u:pw@idp/token"}
	msg := accessMessage(&txn.AccessError{Kind: txn.AccessCredentials, Err: kerr.SaslAuthenticationFailed}, cfg)
	for _, want := range []string{`client "orders-enricher"`, "https://u:xxxxx@idp/token", "issuer, audience and signing key"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, ":pw@") {
		t.Errorf("%q shows the URL's password", msg)
	}
}

// PROCESSOR_SASL_OAUTH_CA_FILE is what the token endpoint's certificate
// is checked against: with the endpoint's CA the token comes, without it
// the certificate is not trusted, and a file without a certificate is the
// setting's configuration error.
func TestOAuthCAFile(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"access_token":"tok","token_type":"Bearer","expires_in":60}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := writeFile(t, dir, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	cfg := oauthConfig(t, srv.URL+"/token")
	for _, tc := range []struct {
		caFile, want string
	}{
		{ca, ""},
		{"", "certificate signed by unknown authority"},
	} {
		cfg.SASLOAuthCAFile = tc.caFile
		s, err := loadSecurity(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		tok, _, err := s.oauth.Token(context.Background())
		switch {
		case tc.want == "" && (err != nil || tok != "tok"):
			t.Errorf("with the CA: %q, %v", tok, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("without the CA: %q, %v; want an error saying %q", tok, err, tc.want)
		}
	}
	cfg.SASLOAuthCAFile = writeFile(t, dir, "not.pem", "not a certificate")
	_, err := loadSecurity(cfg, nil)
	var cerr *settings.Error
	if !errors.As(err, &cerr) || cerr.Var != "PROCESSOR_SASL_OAUTH_CA_FILE" {
		t.Errorf("a CA file without a certificate: %v, want the *settings.Error of PROCESSOR_SASL_OAUTH_CA_FILE", err)
	}
}
