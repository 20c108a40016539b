package app

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/oauthtoken"
	"github.com/streamproc/processor/settings"
	"github.com/streamproc/processor/txn"
)

// How the processor's Kafka clients reach secured brokers: the files of
// PROCESSOR_TLS_* and PROCESSOR_SASL_PASSWORD_FILE (or
// PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE) are read here, at start, and
// become kgo options (txn.Options.ConnOpts); txn never reads a file or a
// variable. The password and the client secret are never logged: they
// live in security only.

// security is what the TLS and SASL settings come to once their files are
// read.
type security struct {
	tls       *tls.Config // nil: plaintext
	mechanism string      // "": no SASL
	user      string
	password  settings.Secret
	// oauth hands out the tokens of OAUTHBEARER; nil for other mechanisms.
	oauth      *oauthtoken.Source
	extensions map[string]string // OAUTHBEARER's SASL extensions
	clientID   string            // the OAuth client's
	tokenURL   string            // the token endpoint's, without a password
}

// String describes s without the password: fmt prints an unexported field
// as it is, without calling its String method, so security needs its own.
func (s *security) String() string { return fmt.Sprint(s.logAttrs()...) }

// GoString is String, for %#v.
func (s *security) GoString() string { return s.String() }

// loadSecurity reads and checks the files that cfg's TLS and SASL settings
// name. Every error it returns is a *settings.Error naming the variable, and
// none shows the password or the client secret. log, when not nil,
// receives the OAUTHBEARER token source's lines.
func loadSecurity(cfg *config.Config, log *slog.Logger) (*security, error) {
	s := &security{mechanism: cfg.SASLMechanism, user: cfg.SASLUsername, password: cfg.SASLPassword}
	if cfg.TLSEnabled {
		tc, err := tlsConfig(brokerTLS(cfg))
		if err != nil {
			return nil, err
		}
		s.tls = tc
	}
	if cfg.SASLMechanism == config.OAuthBearer {
		src, err := loadOAuth(cfg, log)
		if err != nil {
			return nil, err
		}
		s.oauth, s.extensions, s.clientID, s.tokenURL = src, cfg.OAuthExtensions(), cfg.SASLOAuthClientID, redactURL(cfg.SASLOAuthTokenURL)
	}
	if cfg.SASLMechanism != "" && cfg.SASLPasswordFile != "" {
		pw, err := readPassword("SASL_PASSWORD_FILE", cfg.SASLPasswordFile, "the SASL password")
		if err != nil {
			return nil, err
		}
		s.password = settings.Secret(pw)
	}
	return s, nil
}

// tlsFiles are the TLS settings of one kind of connection: the brokers'
// (PROCESSOR_TLS_*) or the Schema Registry's (PROCESSOR_SCHEMA_REGISTRY_TLS_*).
type tlsFiles struct {
	prefix                    string // of the variables' tags, e.g. "TLS_"
	ca, cert, key, serverName string
}

// brokerTLS are the brokers' TLS settings.
func brokerTLS(cfg *config.Config) tlsFiles {
	return tlsFiles{prefix: "TLS_", ca: cfg.TLSCAFile, cert: cfg.TLSCertFile, key: cfg.TLSKeyFile, serverName: cfg.TLSServerName}
}

// tlsConfig builds a client's TLS configuration: TLS 1.2 or later, the
// system's roots or the CA file's, a client certificate for mutual TLS,
// and the name to verify. franz-go (and net/http) verify each server's
// certificate against its host unless ServerName is set.
func tlsConfig(f tlsFiles) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.serverName}
	if f.ca != "" {
		b, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fileError(f.prefix+"CA_FILE", f.ca, "a readable PEM file of CA certificates", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fileError(f.prefix+"CA_FILE", f.ca, "a PEM file of CA certificates", errors.New("it holds no PEM certificate"))
		}
		tc.RootCAs = pool
	}
	if f.cert != "" {
		certPEM, err := os.ReadFile(f.cert)
		if err != nil {
			return nil, fileError(f.prefix+"CERT_FILE", f.cert, "a readable PEM client certificate", err)
		}
		if err := checkCertificatePEM(certPEM); err != nil {
			return nil, fileError(f.prefix+"CERT_FILE", f.cert, "a PEM client certificate", err)
		}
		keyPEM, err := os.ReadFile(f.key)
		if err != nil {
			return nil, fileError(f.prefix+"KEY_FILE", f.key, "a readable PEM private key", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fileError(f.prefix+"KEY_FILE", f.key, "the PEM private key of the certificate in "+config.EnvName(f.prefix+"CERT_FILE"), err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// checkCertificatePEM fails unless b starts, after any other PEM blocks,
// with a certificate that parses.
func checkCertificatePEM(b []byte) error {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		switch {
		case block == nil:
			return errors.New("it holds no PEM certificate")
		case block.Type != "CERTIFICATE":
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Errorf("its certificate does not parse: %w", err)
		}
		return nil
	}
}

// readPassword reads a password file, dropping one trailing newline (as
// echo and most editors write one).
func readPassword(tag, path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fileError(tag, path, "a readable file holding "+what, err)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", fileError(tag, path, "a file holding "+what, errors.New("it is empty"))
	}
	return pw, nil
}

// fileError is the *settings.Error of a file setting: the variable, its
// path, what was wanted and what went wrong (which never quotes the
// file's contents).
func fileError(tag, path, want string, err error) *settings.Error {
	return &settings.Error{Var: config.EnvName(tag), Value: path, Want: settings.Say(want + " (" + err.Error() + ")")}
}

// saslMechanism is franz-go's SASL mechanism for the settings, or nil for
// no SASL.
func (s *security) saslMechanism() sasl.Mechanism {
	pass := s.password.Reveal()
	switch s.mechanism {
	case "PLAIN":
		return plain.Auth{User: s.user, Pass: pass}.AsMechanism()
	case "SCRAM-SHA-256":
		return scram.Auth{User: s.user, Pass: pass}.AsSha256Mechanism()
	case "SCRAM-SHA-512":
		return scram.Auth{User: s.user, Pass: pass}.AsSha512Mechanism()
	case config.OAuthBearer:
		return oauthMechanism(s.oauth, s.extensions)
	}
	return nil
}

// connOpts are the kgo options of every client that talks to the brokers.
func (s *security) connOpts() []kgo.Opt {
	var opts []kgo.Opt
	if s.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(s.tls))
	}
	if m := s.saslMechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts
}

// logAttrs are what the start line says about security: never the
// password, nor a file's contents.
func (s *security) logAttrs() []any {
	return append([]any{"tls", s.tls != nil}, s.saslAttrs()...)
}

// saslAttrs are the SASL part of logAttrs: none without SASL.
func (s *security) saslAttrs() []any {
	switch s.mechanism {
	case "":
		return nil
	case config.OAuthBearer:
		return []any{"sasl_mechanism", s.mechanism, "sasl_oauth_client_id", s.clientID, "sasl_oauth_token_url", s.tokenURL}
	}
	return []any{"sasl_mechanism", s.mechanism, "sasl_username", s.user}
}

// accessMessage is the one line that says why the brokers and the
// processor did not accept each other, and which settings to check.
func accessMessage(e *txn.AccessError, cfg *config.Config) string {
	password := "PROCESSOR_SASL_PASSWORD"
	if cfg.SASLPasswordFile != "" {
		password = "the file in PROCESSOR_SASL_PASSWORD_FILE (" + cfg.SASLPasswordFile + ")"
	}
	principal := "the processor's principal"
	if cfg.SASLMechanism != "" && cfg.SASLMechanism != config.OAuthBearer {
		principal = fmt.Sprintf("user %q", cfg.SASLUsername)
	}
	var verify *tls.CertificateVerificationError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch e.Kind {
	case txn.AccessCredentials:
		if cfg.SASLMechanism == config.OAuthBearer {
			return fmt.Sprintf("authentication failed: the brokers refused the OAuth token of client %q from %s: check that they trust its issuer, audience and signing key, and that its subject is a principal they know (%v)",
				cfg.SASLOAuthClientID, redactURL(cfg.SASLOAuthTokenURL), e.Err)
		}
		return fmt.Sprintf("authentication failed: the brokers refused user %q with %s: check PROCESSOR_SASL_USERNAME and the password in %s (%v)",
			cfg.SASLUsername, cfg.SASLMechanism, password, e.Err)
	case txn.AccessMechanism:
		if cfg.SASLMechanism == "" {
			return fmt.Sprintf("authentication failed: the brokers do not expect SASL here (%v)", e.Err)
		}
		return fmt.Sprintf("authentication failed: the brokers at PROCESSOR_BROKERS do not take PROCESSOR_SASL_MECHANISM=%s: set a mechanism they enable, or point PROCESSOR_BROKERS at their SASL listener (%v)",
			cfg.SASLMechanism, e.Err)
	case txn.AccessDenied:
		return fmt.Sprintf("not authorized: the brokers do not allow %s to use %s: grant it the ACLs that docs/security.md lists (%v)",
			principal, e.Resource, e.Err)
	case txn.AccessUntrusted:
		switch {
		case errors.As(e.Err, &verify) && errors.As(verify.Err, &hostname):
			return fmt.Sprintf("the broker's certificate is not valid for the name dialed: set PROCESSOR_TLS_SERVER_NAME to a name it is valid for, or use that name in PROCESSOR_BROKERS (%v)", e.Err)
		case errors.As(e.Err, &invalid):
			return fmt.Sprintf("the broker's certificate is not valid (expired, or not for a server): renew it on the broker (%v)", e.Err)
		case cfg.TLSCAFile != "":
			return fmt.Sprintf("the broker's certificate is not trusted: PROCESSOR_TLS_CA_FILE (%s) does not hold the CA that signed it (%v)", cfg.TLSCAFile, e.Err)
		}
		return fmt.Sprintf("the broker's certificate is not trusted: set PROCESSOR_TLS_CA_FILE to the CA that signed it (the system's roots do not include it) (%v)", e.Err)
	case txn.AccessRejected:
		if cfg.TLSCertFile != "" {
			return fmt.Sprintf("the broker refused the TLS handshake: it does not accept the client certificate in PROCESSOR_TLS_CERT_FILE (%s): use one signed by a CA it trusts (%v)", cfg.TLSCertFile, e.Err)
		}
		return fmt.Sprintf("the broker refused the TLS handshake: if it requires a client certificate (mutual TLS), set PROCESSOR_TLS_CERT_FILE and PROCESSOR_TLS_KEY_FILE (%v)", e.Err)
	}
	return e.Error()
}
