package binaries

// SASL OAUTHBEARER against the OAUTHBEARER listener of the local Apache
// Kafka (eval "$(integration/kafka/kafka.sh secure-env)": the
// PROCESSOR_TEST_OAUTH_* variables), which checks RS256 JWTs against the
// JWKS of kafka.sh's test key. Each test starts a token endpoint of its
// own (the client credentials grant, over real HTTP) that signs such JWTs
// with that key, and the processor fetches its tokens there as it would
// from an identity provider.

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/launch"
)

// issuer signs the JWTs that the OAUTHBEARER listener accepts.
type issuer struct {
	key                *rsa.PrivateKey
	kid, iss, aud, sub string
}

// sign returns a JWT (RS256) of is, issued now and valid for life.
func (is *issuer) sign(t testing.TB, life time.Duration) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now()
	signed := enc(map[string]string{"alg": "RS256", "typ": "JWT", "kid": is.kid}) + "." +
		enc(map[string]any{"iss": is.iss, "aud": is.aud, "sub": is.sub, "scope": "kafka", "iat": now.Unix(), "exp": now.Add(life).Unix()})
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, is.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// oauthListener is kafka.sh's OAUTHBEARER listener: its brokers, the CA of
// its certificate, and the issuer of the tokens it accepts.
type oauthListener struct {
	brokers []string
	caFile  string
	issuer  *issuer
}

// kafkaOAuth returns the listener of PROCESSOR_TEST_OAUTH_BROKERS. Without
// it the test is skipped, or fails in CI (CI set), where .ci/run must set
// it.
func kafkaOAuth(t *testing.T) *oauthListener {
	t.Helper()
	brokers := os.Getenv("PROCESSOR_TEST_OAUTH_BROKERS")
	if brokers == "" {
		msg := "PROCESSOR_TEST_OAUTH_BROKERS is not set: start integration/kafka/kafka.sh (it needs openssl for the OAUTHBEARER listener) and eval \"$(integration/kafka/kafka.sh secure-env)\""
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	need := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("PROCESSOR_TEST_OAUTH_BROKERS is set but %s is not: set both with eval \"$(integration/kafka/kafka.sh secure-env)\"", name)
		}
		return v
	}
	b, err := os.ReadFile(need("PROCESSOR_TEST_OAUTH_KEY_FILE"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("PROCESSOR_TEST_OAUTH_KEY_FILE holds no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	key, ok := k.(*rsa.PrivateKey)
	if err != nil || !ok {
		t.Fatalf("PROCESSOR_TEST_OAUTH_KEY_FILE: want an RSA key in PKCS#8 (%T, %v)", k, err)
	}
	return &oauthListener{brokers: strings.Split(brokers, ","), caFile: need("PROCESSOR_TEST_SECURE_CA_FILE"), issuer: &issuer{key: key,
		kid: need("PROCESSOR_TEST_OAUTH_KEY_ID"), iss: need("PROCESSOR_TEST_OAUTH_ISSUER"), aud: need("PROCESSOR_TEST_OAUTH_AUDIENCE"),
		sub: need("PROCESSOR_TEST_OAUTH_SUBJECT")}}
}

// tls is the TLS configuration of a client of l: the listener's CA.
func (l *oauthListener) tls(t *testing.T) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(l.caFile)
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{RootCAs: x509.NewCertPool()}
	if !tc.RootCAs.AppendCertsFromPEM(b) {
		t.Fatalf("%s holds no certificate", l.caFile)
	}
	return tc
}

// target is the listener for the test's own clients, which sign a token
// of an hour for each authentication themselves.
func (l *oauthListener) target(t *testing.T, name string) *itest.Target {
	t.Helper()
	mech := oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: l.issuer.sign(t, time.Hour)}, nil })
	return itest.NewTarget(t, name, l.brokers, kgo.DialTLSConfig(l.tls(t)), kgo.SASL(mech))
}

// tokenEndpoint is an OAuth 2.0 token endpoint for one client, over real
// HTTP: the client credentials grant (RFC 6749 section 4.4) with the
// client's id and secret in basic authentication, each answered with a
// fresh JWT of life.
type tokenEndpoint struct {
	*httptest.Server
	id, secret string
	life       time.Duration
	signer     *issuer

	mu     sync.Mutex
	issued []time.Time // when each token was issued
}

func newTokenEndpoint(t *testing.T, signer *issuer, life time.Duration) *tokenEndpoint {
	e := &tokenEndpoint{id: "orders-enricher", secret: newPassword(), life: life, signer: signer}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method != http.MethodPost || r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"unsupported_grant_type"}`))
		case !ok || id != e.id || secret != e.secret:
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"unknown client or wrong secret"}`))
		default:
			e.mu.Lock()
			e.issued = append(e.issued, time.Now())
			e.mu.Unlock()
			_, _ = fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":%d,"scope":%q}`,
				signer.sign(t, life), int(life.Seconds()), r.PostForm.Get("scope"))
		}
	}))
	t.Cleanup(e.Close)
	return e
}

// tokens returns when each token so far was issued.
func (e *tokenEndpoint) tokens() []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.issued...)
}

// settings are the processor's settings for l with tokens from e: TLS
// with the listener's CA, and OAUTHBEARER with e's client, its secret in
// a file (secretFile, written by the caller).
func (e *tokenEndpoint) settings(l *oauthListener, secretFile string) map[string]string {
	return map[string]string{"TLS_ENABLED": "true", "TLS_CA_FILE": l.caFile, "SASL_MECHANISM": config.OAuthBearer,
		"SASL_OAUTH_TOKEN_URL": e.URL + "/token", "SASL_OAUTH_CLIENT_ID": e.id, "SASL_OAUTH_CLIENT_SECRET_FILE": secretFile,
		"SASL_OAUTH_SCOPE": "kafka"}
}

// apply sets settings on cfg, as their variables would.
func apply(settings map[string]string) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.TLSEnabled, cfg.TLSCAFile = settings["TLS_ENABLED"] == "true", settings["TLS_CA_FILE"]
		cfg.SASLMechanism, cfg.SASLOAuthTokenURL = settings["SASL_MECHANISM"], settings["SASL_OAUTH_TOKEN_URL"]
		cfg.SASLOAuthClientID, cfg.SASLOAuthClientSecretFile = settings["SASL_OAUTH_CLIENT_ID"], settings["SASL_OAUTH_CLIENT_SECRET_FILE"]
		cfg.SASLOAuthScope = settings["SASL_OAUTH_SCOPE"]
	}
}

// env is settings as the binary's variables.
func env(settings map[string]string) []string {
	var out []string
	for k, v := range settings {
		out = append(out, config.EnvName(k)+"="+v)
	}
	return out
}

// tokenLife is the life of the endpoint's tokens: short, so that a run
// outlives several of them and the brokers (which end a session when its
// token expires, KIP-368) make every connection authenticate again.
const tokenLife = 8 * time.Second

// A processor on the OAUTHBEARER listener copies its input exactly once,
// through token refreshes: it runs past the expiry of its first token,
// having fetched new ones from the endpoint, and the input produced
// after that is copied too, in the same run.
func TestOAuthExactlyOnce(t *testing.T) {
	t.Parallel()
	l := kafkaOAuth(t)
	tg := l.target(t, "kafka-oauth")
	e := newTokenEndpoint(t, l.issuer, tokenLife)
	settings := e.settings(l, writeSecret(t, t.TempDir(), "client-secret", e.secret+"\n"))

	in := itest.Input{Topic: itest.Unique("oauth-in"), N: 4000, Keys: 50}
	out, group := itest.Unique("oauth-out"), itest.Unique("oauth-group")
	tg.NewTopics(t, 3, in.Topic, out)
	tg.Produce(t, in, 0, in.N/2)
	inst := tg.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-1", Topics: []string{in.Topic}, Out: out, Configure: apply(settings)})
	tg.WaitCaughtUp(t, group, in.Topic, inst)
	first := e.tokens()
	if len(first) == 0 {
		t.Fatal("the processor caught up without asking the endpoint for a token")
	}
	// Past the first token's expiry, with a newer token fetched.
	itest.WaitFor(t, 4*tokenLife, "the first token to expire and newer ones to be fetched", func() bool {
		got := e.tokens()
		return len(got) >= 2 && time.Since(first[0]) > tokenLife+2*time.Second
	})
	tg.Produce(t, in, in.N/2, in.N)
	tg.WaitCaughtUp(t, group, in.Topic, inst)
	inst.Stop(t)
	itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
	got := e.tokens()
	if len(got) < 2 {
		t.Errorf("%d tokens fetched, want a refresh", len(got))
	}
	for i := 1; i < len(got); i++ {
		if gap := got[i].Sub(got[i-1]); gap < tokenLife/2 {
			t.Errorf("token %d fetched %s after the one before, want the cached one used until about 80%% of its life (%s)", i+1, gap, tokenLife)
		}
	}
	t.Logf("%d tokens, the last %s after the first", len(got), got[len(got)-1].Sub(got[0]).Round(time.Millisecond))
}

// The binary on the OAUTHBEARER listener says at start which client and
// endpoint it uses, copies its input, and shows the client secret
// nowhere: not in its log (at debug, franz-go's included), nor on its
// HTTP endpoints.
func TestOAuthBinaryShowsNoSecret(t *testing.T) {
	t.Parallel()
	l := kafkaOAuth(t)
	tg := l.target(t, "kafka-oauth")
	e := newTokenEndpoint(t, l.issuer, tokenLife)
	settings := e.settings(l, writeSecret(t, t.TempDir(), "client-secret", e.secret))
	in := itest.Input{Topic: itest.Unique("oauth-bin-in"), N: 500, Keys: 10}
	out, group := itest.Unique("oauth-bin-out"), itest.Unique("oauth-bin-group")
	tg.NewTopics(t, 2, in.Topic, out)
	httpAddr := itest.FreeAddr(t)
	inst := secureInstance(&secured{Target: tg}, access{}, group, in.Topic, out)
	inst.Brokers, inst.Extra, inst.HTTPAddr, inst.LogLevel = l.brokers, env(settings), httpAddr, "debug"
	p := itest.RunBinary(t, group, inst)
	itest.WaitFor(t, 60*time.Second, "/readyz to answer 200", func() bool { code, _ := itest.HTTPGet(httpAddr, "/readyz"); return code == http.StatusOK })
	tg.Produce(t, in, 0, in.N)
	itest.WaitFor(t, 60*time.Second, "the input to be consumed", func() bool {
		_, m := itest.HTTPGet(httpAddr, "/metrics")
		return strings.Contains(m, "processor_records_consumed_total "+strconv.Itoa(in.N))
	})
	for _, path := range []string{"/", "/status", "/metrics", "/healthz", "/readyz"} {
		if _, body := itest.HTTPGet(httpAddr, path); strings.Contains(body, e.secret) {
			t.Errorf("%s shows the client secret", path)
		}
	}
	p.Terminate(t)
	logs := p.Logs.String()
	if strings.Contains(logs, e.secret) || strings.Contains(logs, url.QueryEscape(e.secret)) {
		t.Error("the log shows the client secret")
	}
	want := fmt.Sprintf("tls=true sasl_mechanism=OAUTHBEARER sasl_oauth_client_id=%s sasl_oauth_token_url=%s/token", e.id, e.URL)
	if !strings.Contains(logs, want) {
		t.Errorf("the log has no start line with %q", want)
	}
	if !strings.Contains(logs, "processor stopped cleanly") {
		t.Error("no clean stop")
	}
	itest.CheckExactlyOnce(t, in, tg.ReadAll(t, out, true))
}

// The listener ends a session when its token expires: a client that
// authenticates with one token and never fetches another is answered
// while the token lasts and cut off after it expires. (So the processor
// running on past its first token's expiry, above, is its refreshing at
// work.)
func TestOAuthListenerEndsExpiredSessions(t *testing.T) {
	t.Parallel()
	l := kafkaOAuth(t)
	const life = 4 * time.Second
	token := l.issuer.sign(t, life)
	issued := time.Now()
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.brokers...), kgo.DialTLSConfig(l.tls(t)), kgo.SASL(oauth.Auth{Token: token}.AsMechanism()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ask := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		return err
	}
	if err := ask(); err != nil {
		t.Fatalf("with a valid token: %v", err)
	}
	time.Sleep(time.Until(issued.Add(life + 2*time.Second)))
	if err := ask(); err == nil {
		t.Fatalf("answered %s after the token expired, want the session ended", time.Since(issued.Add(life)).Round(time.Millisecond))
	} else {
		t.Logf("after the token expired: %v", err)
	}
}

// The token endpoint refusing the client, or the brokers refusing its
// tokens, ends the binary with exit code 1 and one error line that says
// which, within the session timeout and without showing the secret.
func TestOAuthRefusalsExit1(t *testing.T) {
	t.Parallel()
	l := kafkaOAuth(t)
	foreignKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	foreign := *l.issuer
	foreign.key = foreignKey // a key the listener's JWKS does not hold
	itest.Binary(t)          // built before the clock starts
	for _, c := range []struct {
		name        string
		signer      *issuer
		wrongSecret bool
		want        string
	}{
		{name: "wrong secret", signer: l.issuer, wrongSecret: true, want: `client id \"orders-enricher\" or its secret refused by`},
		{name: "token of an unknown key", signer: &foreign, want: `the brokers refused the OAuth token of client \"orders-enricher\"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newTokenEndpoint(t, c.signer, time.Minute)
			secret := e.secret
			if c.wrongSecret {
				secret = newPassword()
			}
			group := itest.Unique("oauth-refused")
			inst := secureInstance(&secured{Target: itest.NewTarget(t, "kafka-oauth", l.brokers)}, access{}, group, "in", "out")
			inst.HTTPAddr = "127.0.0.1:0"
			inst.Extra = env(e.settings(l, writeSecret(t, t.TempDir(), "client-secret", secret)))
			start := time.Now()
			p := itest.RunBinary(t, group, inst)
			select {
			case <-p.Done:
			case <-time.After(inst.SessionTimeout + 20*time.Second):
				t.Fatalf("still running %s after start, want an exit within the session timeout", time.Since(start).Round(time.Second))
			}
			logs := p.Logs.String()
			var ee *exec.ExitError
			if !errors.As(p.Err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("exit %v, want code 1", p.Err)
			}
			if took := time.Since(start); took > inst.SessionTimeout {
				t.Errorf("exited after %s, want within the session timeout (%s)", took.Round(time.Millisecond), inst.SessionTimeout)
			}
			var errorLines []string
			for line := range strings.Lines(logs) {
				if strings.Contains(line, "level=ERROR") {
					errorLines = append(errorLines, line)
				}
			}
			if len(errorLines) != 1 || !strings.Contains(errorLines[0], c.want) {
				t.Errorf("error lines %q, want one saying %q", errorLines, c.want)
			}
			if strings.Contains(logs, secret) || strings.Contains(logs, e.secret) {
				t.Error("the log shows a client secret")
			}
			t.Logf("exit after %s: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(strings.Join(errorLines, "")))
		})
	}
}

// A missing or unreadable OAUTHBEARER setting is a configuration error:
// exit 2 and one line naming the variable, before anything connects, and
// never the secret.
func TestOAuthBadConfigExits2(t *testing.T) {
	t.Parallel()
	bin := itest.Binary(t)
	dir := t.TempDir()
	secret := newPassword()
	secretFile := writeSecret(t, dir, "client-secret", secret)
	empty := writeSecret(t, dir, "empty", "\n")
	base := launch.Instance{Brokers: []string{"127.0.0.1:1"}, Group: "g", InputTopics: []string{"in"}, OutputTopic: "out"}
	oauthVars := func(kv ...string) []string {
		m := map[string]string{"PROCESSOR_SASL_MECHANISM": "OAUTHBEARER", "PROCESSOR_SASL_OAUTH_TOKEN_URL": "https://idp.example.com/token",
			"PROCESSOR_SASL_OAUTH_CLIENT_ID": "orders-enricher", "PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE": secretFile}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(m, kv[i])
			} else {
				m[kv[i]] = kv[i+1]
			}
		}
		var out []string
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		return out
	}
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{oauthVars("PROCESSOR_SASL_OAUTH_TOKEN_URL", ""), []string{"PROCESSOR_SASL_OAUTH_TOKEN_URL is not set", "OAUTHBEARER needs one"}},
		{oauthVars("PROCESSOR_SASL_OAUTH_CLIENT_ID", ""), []string{"PROCESSOR_SASL_OAUTH_CLIENT_ID is not set"}},
		{oauthVars("PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE", ""), []string{"PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE is not set"}},
		{oauthVars("PROCESSOR_SASL_OAUTH_TOKEN_URL", "idp.example.com/token"), []string{`PROCESSOR_SASL_OAUTH_TOKEN_URL="idp.example.com/token" is invalid`}},
		{oauthVars("PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE", dir+"/missing"), []string{"PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE=", "no such file"}},
		{oauthVars("PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE", empty), []string{"PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE=", "it is empty"}},
		{oauthVars("PROCESSOR_SASL_PASSWORD", secret), []string{"PROCESSOR_SASL_PASSWORD is invalid (its value is not shown)", "OAUTHBEARER"}},
	} {
		inst := base
		inst.Extra = c.env
		msg := itest.RunBadConfig(t, bin, inst.Env()...)
		if strings.Contains(msg, secret) {
			t.Errorf("%v: stderr %q shows the secret", c.env, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: stderr %q lacks %q", c.env, msg, w)
			}
		}
	}
}

// A stateful chain on the OAUTHBEARER listener: every client the binary
// makes authenticates with the endpoint's tokens, the state restore's
// included. A second run with an empty state directory restores the
// dedupe store from its changelog over that listener, and so passes none
// of the ids the first run passed.
func TestOAuthStatefulRestore(t *testing.T) {
	t.Parallel()
	l := kafkaOAuth(t)
	tg := l.target(t, "kafka-oauth")
	e := newTokenEndpoint(t, l.issuer, time.Minute)
	secretFile := writeSecret(t, t.TempDir(), "client-secret", e.secret)
	ids := 300
	in := itest.Input{Topic: itest.Unique("oauth-dedupe-in"), N: 2 * ids, Keys: ids} // every id twice
	out, group := itest.Unique("oauth-dedupe-out"), itest.Unique("oauth-dedupe-group")
	tg.NewTopics(t, 2, in.Topic, out)
	run := func(from, to int) *itest.Proc {
		oauthEnv := func(inst *launch.Instance) { inst.Extra = append(inst.Extra, env(e.settings(l, secretFile))...) }
		p := tg.StartBinary(t, group, group+"-1", in.Topic, out, itest.Stateful(t.TempDir(), "key", "0", []string{"dedupe"}, nil), oauthEnv)
		tg.Produce(t, in, from, to)
		tg.WaitCaughtUp(t, group, in.Topic)
		p.Terminate(t)
		return p
	}
	run(0, ids)
	second := run(ids, 2*ids)
	if n, _ := itest.Restored(second); n < ids {
		t.Errorf("the second run restored %d changelog records, want at least %d", n, ids)
	}
	seen := map[string]bool{}
	for _, r := range tg.ReadAll(t, out, true) {
		if seen[string(r.Key)] {
			t.Fatalf("id %s passed twice", r.Key)
		}
		seen[string(r.Key)] = true
	}
	if len(seen) != ids {
		t.Errorf("%d ids passed, want %d", len(seen), ids)
	}
	if strings.Contains(second.Logs.String(), e.secret) {
		t.Error("the log shows the client secret")
	}
}
