package txn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/streamproc/processor/record"
)

func TestAccessKind(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("unable to initialize a producer ID: %w", err) }
	for _, tc := range []struct {
		err  error
		want Access
	}{
		{nil, 0},
		{io.EOF, 0},
		{context.DeadlineExceeded, 0},
		{wrap(kerr.NotEnoughReplicas), 0},
		{wrap(kerr.CoordinatorNotAvailable), 0},
		{wrap(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}), 0},
		{wrap(kerr.SaslAuthenticationFailed), AccessCredentials},
		{wrap(errSASLDropped), AccessCredentials},
		{wrap(kerr.UnsupportedSaslMechanism), AccessMechanism},
		{wrap(kerr.IllegalSaslState), AccessMechanism},
		{wrap(kerr.TransactionalIDAuthorizationFailed), AccessDenied},
		{wrap(kerr.ClusterAuthorizationFailed), AccessDenied},
		{wrap(kerr.GroupAuthorizationFailed), AccessDenied},
		{wrap(kerr.TopicAuthorizationFailed), AccessDenied},
		{wrap(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), AccessUntrusted},
		{wrap(&tls.CertificateVerificationError{Err: x509.HostnameError{Host: "kafka"}}), AccessUntrusted},
		{wrap(&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}), AccessRejected},
	} {
		if got := accessKind(tc.err); got != tc.want {
			t.Errorf("accessKind(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestAccessErrorMessage(t *testing.T) {
	for _, tc := range []struct {
		kind Access
		want string
	}{
		{AccessCredentials, "authentication failed: the brokers refused the SASL user name or password: "},
		{AccessMechanism, "authentication failed: the brokers do not take this SASL mechanism"},
		{AccessDenied, `not authorized to use transactional ID "tx-1": `},
		{AccessUntrusted, "the broker's TLS certificate is not trusted: "},
		{AccessRejected, "the broker refused the TLS handshake: "},
		{0, "the brokers refused the connection: "},
	} {
		e := &AccessError{Kind: tc.kind, Err: kerr.SaslAuthenticationFailed}
		if tc.kind == AccessDenied {
			e.Resource = `transactional ID "tx-1"`
		}
		if msg := e.Error(); !strings.HasPrefix(msg, tc.want) || !strings.HasSuffix(msg, kerr.SaslAuthenticationFailed.Error()) {
			t.Errorf("kind %d: %q, want it to start with %q and end with the cause", tc.kind, msg, tc.want)
		}
		if !errors.Is(e, kerr.SaslAuthenticationFailed) {
			t.Errorf("kind %d: does not unwrap to its cause", tc.kind)
		}
	}
}

// saslCluster is a one-broker kfake cluster that requires SCRAM-SHA-256 as
// user "u" with password "p".
func saslCluster(t *testing.T, extra ...kfake.Opt) *cluster {
	t.Helper()
	return newClusterOf(t, append([]kfake.Opt{kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "u", "p")}, extra...)...)
}

func scramOpts(user, pass string) []kgo.Opt {
	return []kgo.Opt{kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism())}
}

// initWithin runs Init and fails the test unless it returns within d.
func initWithin(t *testing.T, f *fixture, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err := f.Init(ctx)
	if took := time.Since(start); took > d {
		t.Errorf("Init returned after %s, want within %s: %v", took.Round(time.Millisecond), d, err)
	}
	return err
}

// ConnOpts reach every client of the session: the group client, before
// and after a rebuild, and the admin client.
func TestConnOptsReachEveryClient(t *testing.T) {
	t.Parallel()
	c := saslCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "out", 1)
	f := c.session(t, "g-sasl", "tx-sasl", []string{"in"}, func(o *Options) { o.ConnOpts = scramOpts("u", "p") })
	f.init(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	commit := func() {
		t.Helper()
		f.begin(t)
		f.Produce(ctx, &kgo.Record{Topic: "out", Value: []byte("x")}, record.Source{})
		if !f.end(t, 1, "") {
			t.Fatal("the transaction did not commit")
		}
	}
	commit()
	if err := f.rebuild(ctx); err != nil {
		t.Fatalf("rebuilding over SASL: %v", err)
	}
	commit()
	ends, err := f.EndOffsets(ctx, []string{"out"})
	if err != nil {
		t.Fatalf("EndOffsets (the admin client): %v", err)
	}
	if e := ends["out"][0]; e.LogEnd != 4 { // two records, two markers
		t.Errorf("end offsets of out: %+v, want a log end of 4", e)
	}
}

// Refused credentials are an *AccessError at once, whether the broker
// answers SASL_AUTHENTICATION_FAILED (as Apache Kafka does) or closes the
// connection (as kfake does); no retry warnings, no error-level lines from
// the client.
func TestInitRefusedCredentials(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		opts   []kgo.Opt
		answer bool // the broker answers SASL_AUTHENTICATION_FAILED
		want   error
	}{
		{name: "wrong password, connection closed", opts: scramOpts("u", "wrong"), want: errSASLDropped},
		{name: "unknown user, connection closed", opts: scramOpts("nobody", "p"), want: errSASLDropped},
		{name: "wrong password, answered", opts: scramOpts("u", "wrong"), answer: true, want: kerr.SaslAuthenticationFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := saslCluster(t)
			if tc.answer {
				c.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.SASLAuthenticate}, Err: kerr.SaslAuthenticationFailed, TopLevel: true, Count: -1})
			}
			f := c.session(t, "g", "tx-refused", []string{"in"}, func(o *Options) { o.ConnOpts = tc.opts })
			err := initWithin(t, f, 5*time.Second)
			var ae *AccessError
			if !errors.As(err, &ae) || ae.Kind != AccessCredentials || !errors.Is(err, tc.want) {
				t.Fatalf("Init = %v, want an *AccessError of refused credentials wrapping %v", err, tc.want)
			}
			if n := f.log.count("retrying"); n != 0 {
				t.Errorf("%d retry warnings", n)
			}
			if n := f.log.count("level=ERROR") + f.log.count("level=WARN"); n != 0 {
				t.Errorf("%d warnings or errors, want none (the caller reports the refusal):\n%s", n, f.log)
			}
			if f.Ready() {
				t.Error("Ready after a refused Init")
			}
		})
	}
}

// A mechanism the broker does not take is refused at once too.
func TestInitRefusedMechanism(t *testing.T) {
	t.Parallel()
	c := saslCluster(t)
	c.fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.SASLHandshake}, Err: kerr.UnsupportedSaslMechanism, TopLevel: true, Count: -1})
	f := c.session(t, "g", "tx-mech", []string{"in"}, func(o *Options) { o.ConnOpts = scramOpts("u", "p") })
	err := initWithin(t, f, 5*time.Second)
	var ae *AccessError
	if !errors.As(err, &ae) || ae.Kind != AccessMechanism {
		t.Fatalf("Init = %v, want an *AccessError of a refused mechanism", err)
	}
}

// Closes during SASL authentication interleaved with answered requests are
// not refused credentials: the count starts again.
func TestSASLWatchResetsOnAnswers(t *testing.T) {
	var w saslWatch
	fired := 0
	w.arm(func(error) { fired++ })
	for range 5 {
		w.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.SASLAuthenticate), 0, 0, 0, io.EOF)
		w.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.SASLAuthenticate), 0, 0, 0, nil)
		w.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.ApiVersions), 0, 0, 0, nil)
		w.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.Metadata), 0, 0, 0, nil)
	}
	// Other failures of the read are not counted.
	w.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.SASLAuthenticate), 0, 0, 0, context.DeadlineExceeded)
	w.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.SASLAuthenticate), 0, 0, 0, context.DeadlineExceeded)
	w.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.SASLAuthenticate), 0, 0, 0, context.DeadlineExceeded)
	if fired != 0 {
		t.Fatalf("fired %d times", fired)
	}
	for range saslDropLimit {
		w.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.SASLAuthenticate), 0, 0, 0, io.EOF)
	}
	if fired != 1 {
		t.Fatalf("fired %d times after %d closes in a row, want 1", fired, saslDropLimit)
	}
	w.disarm()
	w.OnBrokerRead(kgo.BrokerMetadata{}, int16(kmsg.SASLAuthenticate), 0, 0, 0, io.EOF)
	if fired != 1 {
		t.Fatal("fired while disarmed")
	}
	w.arm(func(error) { fired++ }) // already past the limit: at once
	if fired != 2 {
		t.Fatalf("arming past the limit fired %d times in all, want 2", fired)
	}
}

// testCA is a certificate authority for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "txn test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
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

// issue returns a certificate the CA signed, for 127.0.0.1 as a server, or
// as a client.
func (ca *testCA) issue(t *testing.T, server bool) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.Subject.CommonName = "127.0.0.1"
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// A principal that may not describe its group or an input topic is
// refused at Init, not left to fail every join and fetch.
func TestInitRefusedReadAccess(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.createTopic(t, "in", 1)
	c.createTopic(t, "other", 1)
	for _, tc := range []struct {
		name  string
		fault kfake.Fault
		want  string
	}{
		{"group", kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetFetch}, Group: "g-denied", Err: kerr.GroupAuthorizationFailed, Count: -1}, `group "g-denied"`},
		{"topic", kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: "in", Err: kerr.TopicAuthorizationFailed, Count: -1}, `input topic "in"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := c.fake.Fault(tc.fault)
			defer h.Remove()
			f := c.session(t, "g-denied", "tx-denied-"+tc.name, []string{"other", "in"}, nil)
			err := initWithin(t, f, 10*time.Second)
			var ae *AccessError
			if !errors.As(err, &ae) || ae.Kind != AccessDenied || ae.Resource != tc.want {
				t.Fatalf("Init = %v, want an *AccessError denying %s", err, tc.want)
			}
			if !strings.Contains(err.Error(), "not authorized to use "+tc.want) {
				t.Errorf("message %q", err)
			}
			if n := f.log.count("level=ERROR"); n != 0 {
				t.Errorf("%d error-level lines, want none:\n%s", n, f.log)
			}
		})
	}
}

// Over TLS: a broker certificate the client does not trust, or a broker
// that wants a client certificate it was not given, is an *AccessError at
// once; the right settings work.
func TestInitTLS(t *testing.T) {
	t.Parallel()
	ca, other := newTestCA(t), newTestCA(t)
	c := newClusterOf(t, kfake.NumBrokers(1), kfake.TLS(&tls.Config{
		Certificates: []tls.Certificate{ca.issue(t, true)},
		ClientAuth:   tls.RequireAndVerifyClientCert, ClientCAs: ca.pool,
	}))
	client := ca.issue(t, false)
	for _, tc := range []struct {
		name string
		tls  *tls.Config
		want Access // 0: Init succeeds
	}{
		{"trusted, with a client certificate", &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{client}}, 0},
		{"untrusted broker", &tls.Config{RootCAs: other.pool, Certificates: []tls.Certificate{client}}, AccessUntrusted},
		{"wrong server name", &tls.Config{RootCAs: ca.pool, ServerName: "kafka.example", Certificates: []tls.Certificate{client}}, AccessUntrusted},
		{"no client certificate", &tls.Config{RootCAs: ca.pool}, AccessRejected},
		{"client certificate of another CA", &tls.Config{RootCAs: ca.pool, Certificates: []tls.Certificate{other.issue(t, false)}}, AccessRejected},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := c.session(t, "g-tls", "tx-tls", []string{"in"}, func(o *Options) { o.ConnOpts = []kgo.Opt{kgo.DialTLSConfig(tc.tls)} })
			err := initWithin(t, f, 5*time.Second)
			var ae *AccessError
			switch {
			case tc.want == 0 && err != nil:
				t.Fatalf("Init: %v", err)
			case tc.want != 0 && (!errors.As(err, &ae) || ae.Kind != tc.want):
				t.Fatalf("Init = %v, want an *AccessError of kind %d", err, tc.want)
			case tc.want != 0 && f.log.count("level=ERROR")+f.log.count("level=WARN") != 0:
				t.Errorf("warnings or errors, want none:\n%s", f.log)
			}
		})
	}
}

// The client's warnings and errors about a refused connection are logged
// at debug: the caller reports the refusal, once, as the error.
func TestKgoLoggerDemotesRefusals(t *testing.T) {
	k, lb := kgoLoggerAt(slog.LevelDebug)
	k.Log(kgo.LogLevelError, "unable to initialize sasl", "broker", 1, "err", fmt.Errorf("x: %w", kerr.SaslAuthenticationFailed))
	k.Log(kgo.LogLevelWarn, "unable to open connection to broker", "err", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}})
	k.Log(kgo.LogLevelError, "other", "err", kerr.NotEnoughReplicas)
	k.Log(kgo.LogLevelWarn, "another", "err", io.EOF)
	lb.checkHas(t,
		`level=DEBUG msg="kafka client: unable to initialize sasl"`,
		`level=DEBUG msg="kafka client: unable to open connection to broker"`,
		`level=ERROR msg="kafka client: other"`,
		`level=WARN msg="kafka client: another"`,
	)
}
