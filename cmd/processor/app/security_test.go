package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/transform"
	"github.com/streamproc/processor/txn"
)

const testPassword = "s3cret-Passw0rd-never-shown"

// pemFiles writes a self-signed certificate, its key and a second,
// unrelated key into dir and returns their paths.
func pemFiles(t *testing.T, dir string) (cert, key, otherKey string) {
	t.Helper()
	newKey := func() (*ecdsa.PrivateKey, []byte) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return k, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	k, keyPEM := newKey()
	_, otherPEM := newKey()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, otherKey = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "other.pem")
	for path, b := range map[string][]byte{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: keyPEM, otherKey: otherPEM} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key, otherKey
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadSecurity(t *testing.T) {
	dir := t.TempDir()
	cert, key, otherKey := pemFiles(t, dir)
	pw := writeFile(t, dir, "pw", testPassword+"\n")
	pwCRLF := writeFile(t, dir, "pw-crlf", testPassword+"\r\n")
	pwBare := writeFile(t, dir, "pw-bare", testPassword)
	pwTwo := writeFile(t, dir, "pw-two", testPassword+"\n\n")
	empty := writeFile(t, dir, "empty", "")
	onlyNewline := writeFile(t, dir, "newline", "\n")
	notPEM := writeFile(t, dir, "not.pem", "this is not PEM "+testPassword)
	missing := filepath.Join(dir, "missing")

	ok := []struct {
		name  string
		cfg   config.Config
		check func(s *security) bool
	}{
		{"nothing", config.Config{}, func(s *security) bool { return s.tls == nil && s.saslMechanism() == nil && len(s.connOpts()) == 0 }},
		{"TLS with the system's roots", config.Config{TLSEnabled: true}, func(s *security) bool {
			return s.tls.RootCAs == nil && s.tls.MinVersion == tls.VersionTLS12 && len(s.tls.Certificates) == 0 && len(s.connOpts()) == 1
		}},
		{"TLS with a CA, a client certificate and a server name", config.Config{TLSEnabled: true, TLSCAFile: cert, TLSCertFile: cert, TLSKeyFile: key,
			TLSServerName: "kafka.internal"}, func(s *security) bool {
			return s.tls.RootCAs != nil && len(s.tls.Certificates) == 1 && s.tls.ServerName == "kafka.internal"
		}},
		{"password from the variable", config.Config{SASLMechanism: "PLAIN", SASLUsername: "u", SASLPassword: testPassword},
			func(s *security) bool {
				return s.password.Reveal() == testPassword && s.saslMechanism().Name() == "PLAIN" && len(s.connOpts()) == 1
			}},
		{"password file with a newline", config.Config{SASLMechanism: "SCRAM-SHA-256", SASLUsername: "u", SASLPasswordFile: pw},
			func(s *security) bool {
				return s.password.Reveal() == testPassword && s.saslMechanism().Name() == "SCRAM-SHA-256"
			}},
		{"password file with CRLF", config.Config{SASLMechanism: "SCRAM-SHA-512", SASLUsername: "u", SASLPasswordFile: pwCRLF},
			func(s *security) bool {
				return s.password.Reveal() == testPassword && s.saslMechanism().Name() == "SCRAM-SHA-512"
			}},
		{"password file without a newline", config.Config{SASLMechanism: "PLAIN", SASLUsername: "u", SASLPasswordFile: pwBare},
			func(s *security) bool { return s.password.Reveal() == testPassword }},
		{"only one newline is dropped", config.Config{SASLMechanism: "PLAIN", SASLUsername: "u", SASLPasswordFile: pwTwo},
			func(s *security) bool { return s.password.Reveal() == testPassword+"\n" }},
		{"TLS and SASL", config.Config{TLSEnabled: true, SASLMechanism: "PLAIN", SASLUsername: "u", SASLPassword: testPassword},
			func(s *security) bool { return len(s.connOpts()) == 2 }},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			s, err := loadSecurity(&tc.cfg, nil)
			if err != nil {
				t.Fatalf("loadSecurity: %v", err)
			}
			if !tc.check(s) {
				t.Errorf("got %+v", s)
			}
			if shown := fmt.Sprintf("%v %+v %#v %s %v", s, s, s, s, s.logAttrs()); strings.Contains(shown, testPassword) {
				t.Errorf("security shows the password: %s", shown)
			}
		})
	}

	bad := []struct {
		name    string
		cfg     config.Config
		wantVar string
		want    string
	}{
		{"missing CA file", config.Config{TLSEnabled: true, TLSCAFile: missing}, "TLS_CA_FILE", "no such file"},
		{"CA file without PEM", config.Config{TLSEnabled: true, TLSCAFile: notPEM}, "TLS_CA_FILE", "holds no PEM certificate"},
		{"missing certificate", config.Config{TLSEnabled: true, TLSCertFile: missing, TLSKeyFile: key}, "TLS_CERT_FILE", "no such file"},
		{"certificate without PEM", config.Config{TLSEnabled: true, TLSCertFile: notPEM, TLSKeyFile: key}, "TLS_CERT_FILE", "holds no PEM certificate"},
		{"key in place of the certificate", config.Config{TLSEnabled: true, TLSCertFile: key, TLSKeyFile: key}, "TLS_CERT_FILE", "holds no PEM certificate"},
		{"missing key", config.Config{TLSEnabled: true, TLSCertFile: cert, TLSKeyFile: missing}, "TLS_KEY_FILE", "no such file"},
		{"key without PEM", config.Config{TLSEnabled: true, TLSCertFile: cert, TLSKeyFile: notPEM}, "TLS_KEY_FILE", "private key of the certificate"},
		{"key of another certificate", config.Config{TLSEnabled: true, TLSCertFile: cert, TLSKeyFile: otherKey}, "TLS_KEY_FILE", "does not match"},
		{"missing password file", config.Config{SASLMechanism: "PLAIN", SASLUsername: "u", SASLPasswordFile: missing}, "SASL_PASSWORD_FILE", "no such file"},
		{"empty password file", config.Config{SASLMechanism: "PLAIN", SASLUsername: "u", SASLPasswordFile: empty}, "SASL_PASSWORD_FILE", "it is empty"},
		{"password file of a newline", config.Config{SASLMechanism: "PLAIN", SASLUsername: "u", SASLPasswordFile: onlyNewline}, "SASL_PASSWORD_FILE", "it is empty"},
		{"password file is a directory", config.Config{SASLMechanism: "PLAIN", SASLUsername: "u", SASLPasswordFile: dir}, "SASL_PASSWORD_FILE", "is a directory"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadSecurity(&tc.cfg, nil)
			var cerr *settings.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("loadSecurity = %v, want a *settings.Error", err)
			}
			msg := err.Error()
			if cerr.Var != config.EnvName(tc.wantVar) || !strings.Contains(msg, tc.want) || strings.ContainsAny(msg, "\n") {
				t.Errorf("error %q: want one line naming %s and saying %q", msg, config.EnvName(tc.wantVar), tc.want)
			}
			if strings.Contains(msg, testPassword) {
				t.Errorf("error shows a file's contents: %q", msg)
			}
		})
	}
}

// Prepare refuses unreadable TLS and SASL files with the *settings.Error,
// before anything connects.
func TestPrepareReadsSecurityFiles(t *testing.T) {
	cfg := validConfig(t)
	cfg.SASLMechanism, cfg.SASLUsername, cfg.SASLPasswordFile = "PLAIN", "u", filepath.Join(t.TempDir(), "missing")
	chains, err := buildChains(transform.Default, cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer chains[0].Close()
	_, err = Prepare(cfg, chains, slog.New(slog.DiscardHandler), Overrides{})
	var cerr *settings.Error
	if !errors.As(err, &cerr) || cerr.Var != "PROCESSOR_SASL_PASSWORD_FILE" {
		t.Fatalf("Prepare = %v, want the *settings.Error of PROCESSOR_SASL_PASSWORD_FILE", err)
	}
}

// validConfig is a configuration that validates, with the defaults.
func validConfig(t *testing.T) *config.Config {
	t.Helper()
	cfg := config.Defaults()
	cfg.Brokers, cfg.Group, cfg.InputTopics, cfg.OutputTopic, cfg.TransactionalID = []string{"127.0.0.1:1"}, "g", []string{"in"}, "out", "tx"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Each refusal is one line that names the settings to check, and never the
// password.
func TestAccessMessage(t *testing.T) {
	sasl := &config.Config{SASLMechanism: "SCRAM-SHA-512", SASLUsername: "processor", SASLPassword: testPassword}
	saslFile := &config.Config{SASLMechanism: "SCRAM-SHA-512", SASLUsername: "processor", SASLPasswordFile: "/run/secrets/pw"}
	withCA := &config.Config{TLSEnabled: true, TLSCAFile: "/etc/ca.pem"}
	withCert := &config.Config{TLSEnabled: true, TLSCertFile: "/etc/client.pem", TLSKeyFile: "/etc/client.key"}
	unknownCA := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	alert := errors.New("remote error: tls: bad certificate")
	for _, tc := range []struct {
		name string
		err  *txn.AccessError
		cfg  *config.Config
		want []string
	}{
		{"credentials", &txn.AccessError{Kind: txn.AccessCredentials, Err: kerr.SaslAuthenticationFailed}, sasl,
			[]string{"authentication failed", `user "processor"`, "SCRAM-SHA-512", "PROCESSOR_SASL_USERNAME", "PROCESSOR_SASL_PASSWORD", "SASL_AUTHENTICATION_FAILED"}},
		{"credentials from a file", &txn.AccessError{Kind: txn.AccessCredentials, Err: kerr.SaslAuthenticationFailed}, saslFile,
			[]string{"PROCESSOR_SASL_PASSWORD_FILE (/run/secrets/pw)"}},
		{"mechanism", &txn.AccessError{Kind: txn.AccessMechanism, Err: kerr.UnsupportedSaslMechanism}, sasl,
			[]string{"PROCESSOR_SASL_MECHANISM=SCRAM-SHA-512", "PROCESSOR_BROKERS"}},
		{"SASL not expected", &txn.AccessError{Kind: txn.AccessMechanism, Err: kerr.IllegalSaslState}, &config.Config{},
			[]string{"do not expect SASL"}},
		{"authorization", &txn.AccessError{Kind: txn.AccessDenied, Resource: `transactional ID "tx-1"`, Err: kerr.TransactionalIDAuthorizationFailed}, sasl,
			[]string{"not authorized", `user "processor" to use transactional ID "tx-1"`, "docs/security.md"}},
		{"authorization of the certificate", &txn.AccessError{Kind: txn.AccessDenied, Resource: `group "g"`, Err: kerr.GroupAuthorizationFailed}, withCert,
			[]string{`the processor's principal to use group "g"`}},
		{"untrusted, system roots", &txn.AccessError{Kind: txn.AccessUntrusted, Err: unknownCA}, &config.Config{TLSEnabled: true},
			[]string{"not trusted", "set PROCESSOR_TLS_CA_FILE", "system's roots"}},
		{"untrusted, CA file", &txn.AccessError{Kind: txn.AccessUntrusted, Err: unknownCA}, withCA,
			[]string{"not trusted", "PROCESSOR_TLS_CA_FILE (/etc/ca.pem) does not hold"}},
		{"wrong name", &txn.AccessError{Kind: txn.AccessUntrusted, Err: &tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: "kafka"}}},
			withCA, []string{"not valid for the name", "PROCESSOR_TLS_SERVER_NAME"}},
		{"expired", &txn.AccessError{Kind: txn.AccessUntrusted, Err: &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Reason: x509.Expired}}},
			withCA, []string{"not valid (expired"}},
		{"rejected without a certificate", &txn.AccessError{Kind: txn.AccessRejected, Err: alert}, withCA,
			[]string{"refused the TLS handshake", "PROCESSOR_TLS_CERT_FILE and PROCESSOR_TLS_KEY_FILE", "bad certificate"}},
		{"rejected certificate", &txn.AccessError{Kind: txn.AccessRejected, Err: alert}, withCert,
			[]string{"does not accept the client certificate in PROCESSOR_TLS_CERT_FILE (/etc/client.pem)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := accessMessage(tc.err, tc.cfg)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, testPassword) || strings.Contains(msg, "\n") {
				t.Errorf("%q: want one line without the password", msg)
			}
		})
	}
}
