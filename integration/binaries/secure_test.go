package binaries

// Secured clusters: TLS (with and without client certificates) and SASL
// (PLAIN, SCRAM), against kfake clusters that each test starts and, when
// PROCESSOR_TEST_SECURE_BROKERS is set (eval "$(integration/kafka/kafka.sh
// secure-env)"), against the SASL_SSL and mutual TLS listeners of the
// local Apache Kafka broker. The processor gets its settings as a user
// would: PROCESSOR_TLS_* and PROCESSOR_SASL_* for the binary, the same
// config.Config fields for app.Prepare.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/launch"
	"github.com/streamproc/processor/internal/testkit/kafkatest"
	"github.com/streamproc/processor/settings"
)

// access is how a client reaches a secured cluster: the processor's TLS
// and SASL settings.
type access struct {
	tls                                   bool
	caFile, certFile, keyFile, serverName string
	mechanism, user                       string
	// password is the SASL password: in PROCESSOR_SASL_PASSWORD, unless
	// passwordFile (which holds it) is set.
	password, passwordFile string
}

// env is a's settings as the processor's variables.
func (a access) env() []string {
	var env []string
	add := func(name, v string) {
		if v != "" {
			env = append(env, config.EnvName(name)+"="+v)
		}
	}
	if a.tls {
		add("TLS_ENABLED", "true")
	}
	add("TLS_CA_FILE", a.caFile)
	add("TLS_CERT_FILE", a.certFile)
	add("TLS_KEY_FILE", a.keyFile)
	add("TLS_SERVER_NAME", a.serverName)
	add("SASL_MECHANISM", a.mechanism)
	add("SASL_USERNAME", a.user)
	if a.passwordFile != "" {
		add("SASL_PASSWORD_FILE", a.passwordFile)
	} else {
		add("SASL_PASSWORD", a.password)
	}
	return env
}

// apply sets a's settings on cfg, as the variables of env would.
func (a access) apply(cfg *config.Config) {
	cfg.TLSEnabled, cfg.TLSCAFile, cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSServerName = a.tls, a.caFile, a.certFile, a.keyFile, a.serverName
	cfg.SASLMechanism, cfg.SASLUsername = a.mechanism, a.user
	if a.passwordFile != "" {
		cfg.SASLPasswordFile = a.passwordFile
	} else {
		cfg.SASLPassword = settings.Secret(a.password)
	}
}

// opts are the kgo options of a test client with a's settings, built
// here, apart from the processor's own code.
func (a access) opts(t testing.TB) []kgo.Opt {
	t.Helper()
	var opts []kgo.Opt
	if a.tls {
		tc := &tls.Config{ServerName: a.serverName}
		if a.caFile != "" {
			b, err := os.ReadFile(a.caFile)
			if err != nil {
				t.Fatal(err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(b) {
				t.Fatalf("%s holds no certificate", a.caFile)
			}
		}
		if a.certFile != "" {
			c, err := tls.LoadX509KeyPair(a.certFile, a.keyFile)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{c}
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	switch a.mechanism {
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: a.user, Pass: a.password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: a.user, Pass: a.password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: a.user, Pass: a.password}.AsSha512Mechanism()))
	}
	return opts
}

// secured is a cluster that requires TLS or SASL, and the settings of a
// client it accepts; its target's own clients use them.
type secured struct {
	*itest.Target
	access access
	// reader is a user the cluster knows, without ACLs: it authenticates
	// and is refused everything (Kafka only; nil for kfake).
	reader *access
}

// newPassword returns a password no output could contain by chance.
func newPassword() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "pw-" + hex.EncodeToString(b)
}

// writeSecret writes content to a new file in dir, as a Secret is mounted.
func writeSecret(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeSecured starts a kfake cluster with SASL (mechanism, unless "") and
// TLS (if withTLS; requiring client certificates if mtls), and returns it
// with settings it accepts. The password goes in a file if inFile.
func fakeSecured(t testing.TB, name, mechanism string, inFile, withTLS, mtls bool) *secured {
	t.Helper()
	dir := t.TempDir()
	s := &secured{}
	opts := []kfake.Opt{kfake.NumBrokers(3), kfake.ClusterID("integration-secure")}
	if mechanism != "" {
		s.access.mechanism, s.access.user, s.access.password = mechanism, "processor", newPassword()
		if inFile {
			s.access.passwordFile = writeSecret(t, dir, "password", s.access.password+"\n")
		}
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(mechanism, s.access.user, s.access.password))
	}
	if withTLS {
		ca := newTestCA(t)
		server := &tls.Config{Certificates: []tls.Certificate{ca.issue(t, true)}, MinVersion: tls.VersionTLS12}
		if mtls {
			server.ClientAuth, server.ClientCAs = tls.RequireAndVerifyClientCert, ca.pool
			s.access.certFile, s.access.keyFile = ca.issueFiles(t, dir, "client")
		}
		s.access.tls, s.access.caFile = true, ca.write(t, dir, "ca.pem")
		opts = append(opts, kfake.TLS(server))
	}
	c := kafkatest.NewFake(t, opts...)
	c.Name, c.Conn = name, s.access.opts(t)
	s.Target = &itest.Target{Cluster: c}
	return s
}

// kafkaSecured returns the local Apache Kafka's secured listener of
// kafka.sh secure-env: SASL_SSL with mechanism (SCRAM-SHA-512 or PLAIN),
// or, for mechanism "", the mutual TLS listener. It returns nil when
// PROCESSOR_TEST_SECURE_BROKERS is unset, or for the mutual TLS listener
// when kafka.sh made no client certificate (it needs openssl for that).
func kafkaSecured(t testing.TB, mechanism string) *secured {
	t.Helper()
	brokers := os.Getenv("PROCESSOR_TEST_SECURE_BROKERS")
	if brokers == "" {
		return nil
	}
	need := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("PROCESSOR_TEST_SECURE_BROKERS is set but %s is not: set both with eval \"$(integration/kafka/kafka.sh secure-env)\"", name)
		}
		return v
	}
	readPassword := func(file string) string {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	ca := need("PROCESSOR_TEST_SECURE_CA_FILE")
	s := &secured{access: access{tls: true, caFile: ca}}
	if mechanism == "" {
		cert, key := os.Getenv("PROCESSOR_TEST_SECURE_CERT_FILE"), os.Getenv("PROCESSOR_TEST_SECURE_KEY_FILE")
		if cert == "" || key == "" {
			t.Log("kafka.sh made no client certificate (it needs openssl): the mutual TLS listener is not tried")
			return nil
		}
		brokers = need("PROCESSOR_TEST_SECURE_MTLS_BROKERS")
		s.access.certFile, s.access.keyFile = cert, key
	} else {
		pwFile := need("PROCESSOR_TEST_SECURE_PASSWORD_FILE")
		s.access.mechanism, s.access.user = mechanism, need("PROCESSOR_TEST_SECURE_USERNAME")
		s.access.password, s.access.passwordFile = readPassword(pwFile), pwFile
		readerFile := need("PROCESSOR_TEST_SECURE_READER_PASSWORD_FILE")
		s.reader = &access{tls: true, caFile: ca, mechanism: mechanism, user: need("PROCESSOR_TEST_SECURE_READER_USERNAME"),
			password: readPassword(readerFile), passwordFile: readerFile}
	}
	name := "kafka-" + strings.ToLower(mechanism) + "-tls"
	if mechanism == "" {
		name = "kafka-mtls"
	}
	s.Target = itest.NewTarget(t, name, strings.Split(brokers, ","), s.access.opts(t)...)
	return s
}

// forEachSecured runs fn against kfake secured each way the processor
// supports, and against the local Apache Kafka's secured listeners when
// they are configured.
func forEachSecured(t *testing.T, fn func(t *testing.T, s *secured)) {
	for _, c := range []struct {
		name        string
		mechanism   string
		inFile, tls bool
		mtls        bool
	}{
		{name: "kfake-scram-sha-256", mechanism: "SCRAM-SHA-256"},
		{name: "kfake-plain-password-file", mechanism: "PLAIN", inFile: true},
		{name: "kfake-scram-sha-512-tls", mechanism: "SCRAM-SHA-512", inFile: true, tls: true},
		{name: "kfake-mtls", tls: true, mtls: true},
	} {
		t.Run(c.name, func(t *testing.T) { fn(t, fakeSecured(t, c.name, c.mechanism, c.inFile, c.tls, c.mtls)) })
	}
	if os.Getenv("PROCESSOR_TEST_SECURE_BROKERS") == "" {
		return
	}
	for _, mechanism := range []string{"SCRAM-SHA-512", "PLAIN", ""} {
		name := "kafka-" + strings.ToLower(mechanism) + "-tls"
		if mechanism == "" {
			name = "kafka-mtls"
		}
		t.Run(name, func(t *testing.T) {
			s := kafkaSecured(t, mechanism)
			if s == nil {
				t.Skip("no client certificate for the mutual TLS listener")
			}
			fn(t, s)
		})
	}
}

// Over every kind of secured connection, a processor copies its input
// exactly once; so do the test's own clients, which create the topics and
// read the output through the same listener.
func TestSecureExactlyOnce(t *testing.T) {
	t.Parallel()
	forEachSecured(t, func(t *testing.T, s *secured) {
		in := itest.Input{Topic: itest.Unique("secure-in"), N: 3000, Keys: 60}
		out, group := itest.Unique("secure-out"), itest.Unique("secure-group")
		s.NewTopics(t, 3, in.Topic, out)
		s.Produce(t, in, 0, in.N)
		inst := s.Start(t, itest.InstanceOpts{Group: group, TxnID: group + "-1", Topics: []string{in.Topic}, Out: out, Configure: s.access.apply})
		s.WaitCaughtUp(t, group, in.Topic, inst)
		inst.Stop(t)
		itest.CheckExactlyOnce(t, in, s.ReadAll(t, out, true))
	})
}

// The ACLs docs/security.md lists are enough: a user that has only them
// (READ on the input topic and the group, WRITE on the output topic and
// the transactional ID) copies exactly once; without the group's, the
// processor stops at once saying so. Apache Kafka only: kfake's users are
// super users.
func TestSecureLeastACLs(t *testing.T) {
	t.Parallel()
	s := kafkaSecured(t, "SCRAM-SHA-512")
	if s == nil {
		t.Skip("PROCESSOR_TEST_SECURE_BROKERS is not set")
	}
	in := itest.Input{Topic: itest.Unique("acl-in"), N: 2000, Keys: 40}
	out, group := itest.Unique("acl-out"), itest.Unique("acl-group")
	txnID := group + "-1"
	s.NewTopics(t, 3, in.Topic, out)
	s.Produce(t, in, 0, in.N)
	principal := "User:" + s.reader.user
	adm := s.Admin(t)
	grant := func(b *kadm.ACLBuilder) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("creating ACL %+v: %v", r, r.Err)
			}
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := adm.DeleteACLs(ctx, b); err != nil {
				t.Errorf("deleting ACLs: %v", err)
			}
		})
	}
	grant(kadm.NewACLs().Allow(principal).AllowHosts().Topics(in.Topic).Operations(kadm.OpRead))
	grant(kadm.NewACLs().Allow(principal).AllowHosts().Topics(out).TransactionalIDs(txnID).Operations(kadm.OpWrite))

	// Without READ on the group.
	itest.Binary(t)
	start := time.Now()
	reader := secureInstance(s, *s.reader, group, in.Topic, out)
	reader.HTTPAddr = "127.0.0.1:0"
	p := itest.RunBinary(t, group, reader)
	select {
	case <-p.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("still running without READ on its group")
	}
	var ee *exec.ExitError
	if took := time.Since(start); !errors.As(p.Err, &ee) || ee.ExitCode() != 1 || took > 10*time.Second {
		t.Errorf("exit %v after %s, want code 1 within the session timeout (10s)", p.Err, took.Round(time.Millisecond))
	}
	if logs := p.Logs.String(); strings.Count(logs, "level=ERROR") != 1 || !strings.Contains(logs, `to use group \"`+group+`\"`) {
		t.Errorf("want one error line naming the group:\n%s", logs)
	}

	grant(kadm.NewACLs().Allow(principal).AllowHosts().Groups(group).Operations(kadm.OpRead))
	inst := s.Start(t, itest.InstanceOpts{Group: group, TxnID: txnID, Topics: []string{in.Topic}, Out: out, Configure: s.reader.apply})
	s.WaitCaughtUp(t, group, in.Topic, inst)
	inst.Stop(t)
	itest.CheckExactlyOnce(t, in, s.ReadAll(t, out, true))
}

// secureInstance is a binary on s reaching it with a, without an HTTP
// address.
func secureInstance(s *secured, a access, group string, in, out string) launch.Instance {
	return launch.Instance{
		Brokers:            s.Brokers,
		Group:              group,
		InputTopics:        []string{in},
		OutputTopic:        out,
		TransactionalID:    group + "-1",
		SessionTimeout:     10 * time.Second,
		TransactionTimeout: 8 * time.Second,
		CommitInterval:     200 * time.Millisecond,
		LogFormat:          "text",
		Extra:              a.env(),
	}
}

// The binary on a secured cluster says at start how it connects, copies
// its input, and shows the password nowhere: not in its log (at debug,
// franz-go's included), nor on /, /status, /metrics, /healthz or /readyz.
func TestSecureBinaryShowsNoSecret(t *testing.T) {
	t.Parallel()
	cases := []func(t *testing.T) *secured{
		func(t *testing.T) *secured {
			return fakeSecured(t, "kfake-scram-sha-256", "SCRAM-SHA-256", false, false, false)
		},
		func(t *testing.T) *secured {
			return fakeSecured(t, "kfake-plain-tls", "PLAIN", false, true, false)
		},
		func(t *testing.T) *secured { return kafkaSecured(t, "SCRAM-SHA-512") },
	}
	for _, mk := range cases {
		s := mk(t)
		if s == nil {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			a := s.access
			a.passwordFile = "" // in PROCESSOR_SASL_PASSWORD: the variable is the riskier place
			in := itest.Input{Topic: itest.Unique("secret-in"), N: 500, Keys: 10}
			out, group := itest.Unique("secret-out"), itest.Unique("secret-group")
			s.NewTopics(t, 2, in.Topic, out)
			httpAddr := itest.FreeAddr(t)
			inst := secureInstance(s, a, group, in.Topic, out)
			inst.HTTPAddr, inst.LogLevel = httpAddr, "debug"
			p := itest.RunBinary(t, group, inst)
			itest.WaitFor(t, 60*time.Second, "/readyz to answer 200", func() bool { code, _ := itest.HTTPGet(httpAddr, "/readyz"); return code == http.StatusOK })
			s.Produce(t, in, 0, in.N)
			itest.WaitFor(t, 60*time.Second, "the input to be consumed", func() bool {
				_, m := itest.HTTPGet(httpAddr, "/metrics")
				return strings.Contains(m, fmt.Sprintf("processor_records_consumed_total %d", in.N))
			})
			for _, path := range []string{"/", "/status", "/metrics", "/healthz", "/readyz"} {
				code, body := itest.HTTPGet(httpAddr, path)
				if code != http.StatusOK {
					t.Errorf("%s = %d", path, code)
				}
				if strings.Contains(body, a.password) {
					t.Errorf("%s shows the password", path)
				}
			}
			p.Terminate(t)
			logs := p.Logs.String()
			if strings.Contains(logs, a.password) {
				t.Error("the log shows the password")
			}
			start := ""
			for line := range strings.Lines(logs) {
				if strings.Contains(line, `msg="processor starting"`) {
					start = line
				}
			}
			want := fmt.Sprintf("tls=%v sasl_mechanism=%s sasl_username=%s", a.tls, a.mechanism, a.user)
			if !strings.Contains(start, want) {
				t.Errorf("start line %q lacks %q", start, want)
			}
			if !strings.Contains(logs, "processor stopped cleanly") {
				t.Error("no clean stop")
			}
			itest.CheckExactlyOnce(t, in, s.ReadAll(t, out, true))
		})
	}
}

// refusal is a binary run that the brokers and the processor must end at
// once: its settings, and what its one error line says.
type refusal struct {
	name   string
	access access
	want   string
	// secrets must not appear in the output: the passwords involved.
	secrets []string
}

// The brokers refusing the processor, or the processor refusing them,
// ends it with exit code 1 and one clear error line, within the session
// timeout, without retries and without showing a password.
func TestSecureRefusalsExit1(t *testing.T) {
	t.Parallel()
	var cases []func(t *testing.T) (*secured, []refusal)
	cases = append(cases, func(t *testing.T) (*secured, []refusal) {
		s := fakeSecured(t, "kfake-scram-sha-256", "SCRAM-SHA-256", false, false, false)
		wrong := s.access
		wrong.password = newPassword()
		unknown := s.access
		unknown.user = "nobody"
		return s, []refusal{
			{"wrong password", wrong, "authentication failed: the brokers refused user", []string{wrong.password, s.access.password}},
			{"unknown user", unknown, "authentication failed", []string{s.access.password}},
		}
	}, func(t *testing.T) (*secured, []refusal) {
		s := fakeSecured(t, "kfake-plain-password-file", "PLAIN", true, false, false)
		wrong := s.access
		wrong.password = newPassword()
		wrong.passwordFile = writeSecret(t, t.TempDir(), "wrong", wrong.password+"\n")
		return s, []refusal{{"wrong password in a file", wrong, "check PROCESSOR_SASL_USERNAME and the password in the file in PROCESSOR_SASL_PASSWORD_FILE", []string{wrong.password, s.access.password}}}
	}, func(t *testing.T) (*secured, []refusal) {
		s := fakeSecured(t, "kfake-mtls", "", false, true, true)
		other := newTestCA(t)
		dir := t.TempDir()
		untrusted := s.access
		untrusted.caFile = other.write(t, dir, "other-ca.pem")
		roots := s.access
		roots.caFile = ""
		noCert := s.access
		noCert.certFile, noCert.keyFile = "", ""
		foreign := s.access
		foreign.certFile, foreign.keyFile = other.issueFiles(t, dir, "foreign")
		wrongName := s.access
		wrongName.serverName = "kafka.example"
		return s, []refusal{
			{"untrusted CA", untrusted, "the broker's certificate is not trusted: PROCESSOR_TLS_CA_FILE", nil},
			{"system roots", roots, "the broker's certificate is not trusted: set PROCESSOR_TLS_CA_FILE", nil},
			{"wrong server name", wrongName, "not valid for the name dialed", nil},
			{"no client certificate", noCert, "the broker refused the TLS handshake", nil},
			{"client certificate of another CA", foreign, "does not accept the client certificate", nil},
		}
	})
	if os.Getenv("PROCESSOR_TEST_SECURE_BROKERS") != "" {
		cases = append(cases, func(t *testing.T) (*secured, []refusal) {
			s := kafkaSecured(t, "SCRAM-SHA-512")
			wrong := s.access
			wrong.password, wrong.passwordFile = newPassword(), ""
			sha256 := s.access
			sha256.mechanism = "SCRAM-SHA-256"
			roots := s.access
			roots.caFile = ""
			other := newTestCA(t)
			untrusted := s.access
			untrusted.caFile = other.write(t, t.TempDir(), "other-ca.pem")
			wrongName := s.access
			wrongName.serverName = "kafka.example"
			plainWrong := wrong
			plainWrong.mechanism = "PLAIN"
			return s, []refusal{
				{"wrong password", wrong, "authentication failed: the brokers refused user", []string{wrong.password, s.access.password}},
				{"PLAIN, wrong password", plainWrong, "authentication failed", []string{wrong.password, s.access.password}},
				{"mechanism not enabled", sha256, "do not take PROCESSOR_SASL_MECHANISM=SCRAM-SHA-256", []string{s.access.password}},
				{"user without ACLs", *s.reader, "not authorized: the brokers do not allow user", []string{s.reader.password}},
				{"system roots", roots, "the broker's certificate is not trusted: set PROCESSOR_TLS_CA_FILE", []string{s.access.password}},
				{"untrusted CA", untrusted, "the broker's certificate is not trusted: PROCESSOR_TLS_CA_FILE", []string{s.access.password}},
				{"wrong server name", wrongName, "not valid for the name dialed", []string{s.access.password}},
			}
		}, func(t *testing.T) (*secured, []refusal) {
			s := kafkaSecured(t, "")
			if s == nil {
				return nil, nil
			}
			noCert := s.access
			noCert.certFile, noCert.keyFile = "", ""
			foreign := s.access
			foreign.certFile, foreign.keyFile = newTestCA(t).issueFiles(t, t.TempDir(), "foreign")
			return s, []refusal{
				{"no client certificate", noCert, "the broker refused the TLS handshake", nil},
				{"client certificate of another CA", foreign, "does not accept the client certificate", nil},
			}
		})
	}
	itest.Binary(t) // built before the clock starts
	for _, mk := range cases {
		s, refusals := mk(t)
		for _, r := range refusals { // none when s is nil
			t.Run(s.Name+"/"+r.name, func(t *testing.T) {
				group := itest.Unique("refused")
				start := time.Now()
				inst := secureInstance(s, r.access, group, "in", "out")
				inst.HTTPAddr = "127.0.0.1:0"
				p := itest.RunBinary(t, group, inst)
				const sessionTimeout = 10 * time.Second
				select {
				case <-p.Done:
				case <-time.After(sessionTimeout + 20*time.Second):
					t.Fatalf("still running %s after start, want an exit within the session timeout (%s)", time.Since(start).Round(time.Second), sessionTimeout)
				}
				took := time.Since(start)
				logs := p.Logs.String()
				var ee *exec.ExitError
				if !errors.As(p.Err, &ee) || ee.ExitCode() != 1 {
					t.Errorf("exit %v, want code 1", p.Err)
				}
				if took > sessionTimeout {
					t.Errorf("exited after %s, want within the session timeout (%s)", took.Round(time.Millisecond), sessionTimeout)
				}
				var errorLines []string
				for line := range strings.Lines(logs) {
					if strings.Contains(line, "level=ERROR") {
						errorLines = append(errorLines, line)
					}
				}
				if len(errorLines) != 1 || !strings.Contains(errorLines[0], r.want) {
					t.Errorf("error lines %q, want one saying %q", errorLines, r.want)
				}
				// Besides it, the start line and the warning about PLAIN
				// without TLS: no retries, no per-connection noise.
				for line := range strings.Lines(logs) {
					if !strings.Contains(line, "level=ERROR") && !strings.Contains(line, `msg="processor starting"`) &&
						!strings.Contains(line, "PROCESSOR_SASL_MECHANISM=PLAIN without PROCESSOR_TLS_ENABLED=true") {
						t.Errorf("the log has more than the start line and the error: %s", line)
					}
				}
				for _, secret := range r.secrets {
					if strings.Contains(logs, secret) {
						t.Error("the log shows a password")
					}
				}
				t.Logf("exit after %s: %s", took.Round(time.Millisecond), strings.TrimSpace(strings.Join(errorLines, "")))
			})
		}
	}
}

// The embedded broker requires the processor's SASL user when
// PROCESSOR_SASL_MECHANISM is set: the processor and a client with that
// user work; a client without SASL is not let in.
func TestSecureEmbeddedBrokerSASL(t *testing.T) {
	t.Parallel()
	for _, mechanism := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mechanism, func(t *testing.T) {
			broker, httpAddr := itest.FreeAddr(t), itest.FreeAddr(t)
			a := access{mechanism: mechanism, user: "demo", password: newPassword()}
			a.passwordFile = writeSecret(t, t.TempDir(), "password", a.password+"\n")
			p := itest.RunBinary(t, "embedded-"+mechanism, launch.Instance{
				EmbeddedBroker:           broker,
				EmbeddedBrokerDir:        t.TempDir(),
				EmbeddedBrokerPartitions: 2,
				Group:                    "embedded-sasl",
				InputTopics:              []string{"orders"},
				OutputTopic:              "orders-out",
				HTTPAddr:                 httpAddr,
				LogFormat:                "text",
				LogLevel:                 "debug",
				Extra:                    a.env(),
			})
			itest.WaitFor(t, 30*time.Second, "/readyz to answer 200", func() bool { code, _ := itest.HTTPGet(httpAddr, "/readyz"); return code == http.StatusOK })
			tg := itest.NewTarget(t, "embedded", []string{broker}, a.opts(t)...)
			in := itest.Input{Topic: "orders", N: 200, Keys: 5}
			tg.Produce(t, in, 0, in.N)
			itest.WaitFor(t, 30*time.Second, "the input to be consumed", func() bool {
				_, m := itest.HTTPGet(httpAddr, "/metrics")
				return strings.Contains(m, fmt.Sprintf("processor_records_consumed_total %d", in.N))
			})
			itest.CheckExactlyOnce(t, in, tg.ReadAll(t, "orders-out", true))

			// Without SASL the broker answers nothing but ApiVersions.
			cl, err := kgo.NewClient(kgo.SeedBrokers(broker))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = kadm.NewClient(cl).ListTopics(ctx)
			cancel()
			cl.Close()
			if err == nil {
				t.Error("a client without SASL listed the embedded broker's topics")
			}

			p.Terminate(t)
			if logs := p.Logs.String(); strings.Contains(logs, a.password) || !strings.Contains(logs, "sasl_mechanism="+mechanism) {
				t.Errorf("the log shows the password, or not the mechanism:\n%s", logs)
			}
		})
	}
}

// Mistakes in the TLS and SASL settings, and files that cannot be read,
// exit 2 at once with one line naming the variable, never the password.
func TestSecureBadConfigExits2(t *testing.T) {
	t.Parallel()
	bin := itest.Binary(t)
	dir := t.TempDir()
	pw := newPassword()
	notPEM := writeSecret(t, dir, "not.pem", "not a certificate: "+pw)
	empty := writeSecret(t, dir, "empty", "")
	base := launch.Instance{Brokers: []string{"127.0.0.1:1"}, Group: "g", InputTopics: []string{"in"}, OutputTopic: "out"}
	for _, c := range []struct {
		env  []string
		want []string
	}{
		{[]string{"PROCESSOR_SASL_PASSWORD=" + pw}, []string{"PROCESSOR_SASL_PASSWORD is invalid (its value is not shown)", "PROCESSOR_SASL_MECHANISM"}},
		{[]string{"PROCESSOR_SASL_MECHANISM=SCRAM-SHA-512", "PROCESSOR_SASL_USERNAME=u"}, []string{"PROCESSOR_SASL_PASSWORD is not set", "PROCESSOR_SASL_PASSWORD_FILE"}},
		{[]string{"PROCESSOR_SASL_MECHANISM=SCRAM-SHA-512", "PROCESSOR_SASL_USERNAME=u", "PROCESSOR_SASL_PASSWORD=" + pw, "PROCESSOR_SASL_PASSWORD_FILE=" + empty},
			[]string{"PROCESSOR_SASL_PASSWORD_FILE=", "not both"}},
		{[]string{"PROCESSOR_SASL_MECHANISM=GSSAPI", "PROCESSOR_SASL_USERNAME=u", "PROCESSOR_SASL_PASSWORD=" + pw}, []string{`PROCESSOR_SASL_MECHANISM="GSSAPI" is invalid`}},
		{[]string{"PROCESSOR_SASL_MECHANISM=PLAIN", "PROCESSOR_SASL_USERNAME=u", "PROCESSOR_SASL_PASSWORD_FILE=" + filepath.Join(dir, "missing")},
			[]string{"PROCESSOR_SASL_PASSWORD_FILE=", "no such file"}},
		{[]string{"PROCESSOR_SASL_MECHANISM=PLAIN", "PROCESSOR_SASL_USERNAME=u", "PROCESSOR_SASL_PASSWORD_FILE=" + empty}, []string{"PROCESSOR_SASL_PASSWORD_FILE=", "it is empty"}},
		{[]string{"PROCESSOR_TLS_CA_FILE=" + notPEM}, []string{"PROCESSOR_TLS_CA_FILE=", "PROCESSOR_TLS_ENABLED=true"}},
		{[]string{"PROCESSOR_TLS_ENABLED=true", "PROCESSOR_TLS_CA_FILE=" + notPEM}, []string{"PROCESSOR_TLS_CA_FILE=", "holds no PEM certificate"}},
		{[]string{"PROCESSOR_TLS_ENABLED=true", "PROCESSOR_TLS_CERT_FILE=" + notPEM}, []string{"PROCESSOR_TLS_KEY_FILE is not set"}},
		{[]string{"PROCESSOR_TLS_ENABLED=true", "PROCESSOR_TLS_CERT_FILE=" + notPEM, "PROCESSOR_TLS_KEY_FILE=" + notPEM}, []string{"PROCESSOR_TLS_CERT_FILE=", "holds no PEM certificate"}},
	} {
		inst := base
		inst.Extra = c.env
		msg := itest.RunBadConfig(t, bin, inst.Env()...)
		if strings.Contains(msg, pw) {
			t.Errorf("%v: stderr %q, want one line without the password", c.env, msg)
		}
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v: stderr %q lacks %q", c.env, msg, w)
			}
		}
	}
}

// testCA is a certificate authority for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "integration test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue returns a certificate the CA signed: for 127.0.0.1 and localhost
// as a server, or as a client.
func (ca *testCA) issue(t testing.TB, server bool) tls.Certificate {
	t.Helper()
	der, key := ca.sign(t, server)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca *testCA) sign(t testing.TB, server bool) ([]byte, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "processor-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.Subject.CommonName = "localhost"
		tmpl.IPAddresses, tmpl.DNSNames = []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return der, key
}

// write writes the CA's certificate as PEM into dir/name.
func (ca *testCA) write(t testing.TB, dir, name string) string {
	t.Helper()
	return writeSecret(t, dir, name, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw})))
}

// issueFiles writes a client certificate the CA signed, and its key, as
// PEM files into dir, and returns their paths.
func (ca *testCA) issueFiles(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	der, key := ca.sign(t, false)
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = writeSecret(t, dir, name+".pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile = writeSecret(t, dir, name+".key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})))
	return certFile, keyFile
}
