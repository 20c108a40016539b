package config_test

import (
	"errors"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
)

// oauthEnv is a complete OAUTHBEARER setting, by tag, with kv over it.
func oauthEnv(kv ...string) map[string]string {
	m := map[string]string{"SASL_MECHANISM": "OAUTHBEARER", "SASL_OAUTH_TOKEN_URL": "https://idp.example.com/oauth2/token",
		"SASL_OAUTH_CLIENT_ID": "orders-enricher", "SASL_OAUTH_CLIENT_SECRET_FILE": "/run/secret", "TLS_ENABLED": "true"}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestLoadOAuthValid(t *testing.T) {
	testLoads(t, []loadCase{
		{"the required settings", oauthEnv(), func(c *config.Config) bool {
			return c.SASLMechanism == config.OAuthBearer && c.SASLOAuthTokenURL == "https://idp.example.com/oauth2/token" &&
				c.SASLOAuthClientID == "orders-enricher" && c.SASLOAuthClientSecretFile == "/run/secret" && c.SASLOAuthClientAuth == "basic" &&
				c.OAuthExtensions() == nil
		}},
		{"every setting", oauthEnv("SASL_OAUTH_SCOPE", "kafka.read kafka.write", "SASL_OAUTH_AUDIENCE", "https://kafka.example.com",
			"SASL_OAUTH_CLIENT_AUTH", "post", "SASL_OAUTH_EXTENSIONS", "logicalCluster=lkc-1,identityPoolId=pool-2"), func(c *config.Config) bool {
			return c.SASLOAuthScope == "kafka.read kafka.write" && c.SASLOAuthAudience == "https://kafka.example.com" && c.SASLOAuthClientAuth == "post" &&
				maps.Equal(c.OAuthExtensions(), map[string]string{"logicalCluster": "lkc-1", "identityPoolId": "pool-2"})
		}},
		{"an http token URL", oauthEnv("SASL_OAUTH_TOKEN_URL", "http://127.0.0.1:8080/token"), func(c *config.Config) bool {
			return c.SASLOAuthTokenURL == "http://127.0.0.1:8080/token"
		}},
		{"the endpoint's CA", oauthEnv("SASL_OAUTH_CA_FILE", "/etc/oauth/ca.pem"), func(c *config.Config) bool {
			return c.SASLOAuthCAFile == "/etc/oauth/ca.pem"
		}},
	})
}

// Every mistake in the OAUTHBEARER settings is one line naming the
// variable and the form it wants.
func TestLoadOAuthErrors(t *testing.T) {
	for _, tt := range []struct {
		name      string
		set       map[string]string
		unset     []string
		wantVar   string
		wantValue string // "" for an unset variable, or a secret
		wantForm  string
	}{
		{name: "no token URL", set: oauthEnv("SASL_OAUTH_TOKEN_URL", ""), wantVar: "SASL_OAUTH_TOKEN_URL",
			wantForm: "(PROCESSOR_SASL_MECHANISM=OAUTHBEARER needs one)"},
		{name: "no client id", set: oauthEnv("SASL_OAUTH_CLIENT_ID", ""), wantVar: "SASL_OAUTH_CLIENT_ID", wantForm: "OAUTHBEARER needs one"},
		{name: "no secret file", set: oauthEnv("SASL_OAUTH_CLIENT_SECRET_FILE", ""), wantVar: "SASL_OAUTH_CLIENT_SECRET_FILE", wantForm: "OAUTHBEARER needs one"},
		{name: "token URL without scheme", set: oauthEnv("SASL_OAUTH_TOKEN_URL", "idp.example.com/token"), wantVar: "SASL_OAUTH_TOKEN_URL",
			wantValue: "idp.example.com/token", wantForm: "an http or https URL"},
		{name: "token URL not http", set: oauthEnv("SASL_OAUTH_TOKEN_URL", "ftp://idp/token"), wantVar: "SASL_OAUTH_TOKEN_URL",
			wantValue: "ftp://idp/token", wantForm: "an http or https URL"},
		{name: "client auth", set: oauthEnv("SASL_OAUTH_CLIENT_AUTH", "jwt"), wantVar: "SASL_OAUTH_CLIENT_AUTH", wantValue: "jwt", wantForm: "basic or post"},
		{name: "extension without value", set: oauthEnv("SASL_OAUTH_EXTENSIONS", "logicalCluster"), wantVar: "SASL_OAUTH_EXTENSIONS",
			wantValue: "logicalCluster", wantForm: "key=value"},
		{name: "extension auth", set: oauthEnv("SASL_OAUTH_EXTENSIONS", "auth=x"), wantVar: "SASL_OAUTH_EXTENSIONS", wantValue: "auth=x", wantForm: `"auth" is reserved`},
		{name: "extension key not letters", set: oauthEnv("SASL_OAUTH_EXTENSIONS", "pool_id=x"), wantVar: "SASL_OAUTH_EXTENSIONS", wantValue: "pool_id=x",
			wantForm: "keys of letters only"},
		{name: "user with OAUTHBEARER", set: oauthEnv("SASL_USERNAME", "u"), wantVar: "SASL_USERNAME", wantValue: "u", wantForm: "unset with PROCESSOR_SASL_MECHANISM=OAUTHBEARER"},
		{name: "password with OAUTHBEARER", set: oauthEnv("SASL_PASSWORD", password), wantVar: "SASL_PASSWORD", wantForm: "unset with PROCESSOR_SASL_MECHANISM=OAUTHBEARER"},
		{name: "password file with OAUTHBEARER", set: oauthEnv("SASL_PASSWORD_FILE", "/pw"), wantVar: "SASL_PASSWORD_FILE", wantValue: "/pw",
			wantForm: "unset with PROCESSOR_SASL_MECHANISM=OAUTHBEARER"},
		{name: "embedded broker", set: oauthEnv("EMBEDDED_BROKER", "true", "TLS_ENABLED", "false"), unset: []string{"BROKERS"}, wantVar: "SASL_MECHANISM",
			wantValue: "OAUTHBEARER", wantForm: "the embedded broker has no OAUTHBEARER"},
		{name: "token URL without OAUTHBEARER", set: map[string]string{"SASL_OAUTH_TOKEN_URL": "https://idp/token"}, wantVar: "SASL_OAUTH_TOKEN_URL",
			wantValue: "https://idp/token", wantForm: "PROCESSOR_SASL_MECHANISM=OAUTHBEARER along with it"},
		{name: "secret file with SCRAM", set: map[string]string{"SASL_MECHANISM": "SCRAM-SHA-512", "SASL_USERNAME": "u", "SASL_PASSWORD": password,
			"SASL_OAUTH_CLIENT_SECRET_FILE": "/run/secret"}, wantVar: "SASL_OAUTH_CLIENT_SECRET_FILE", wantValue: "/run/secret",
			wantForm: "PROCESSOR_SASL_MECHANISM=OAUTHBEARER along with it"},
		{name: "CA file with an http token URL", set: oauthEnv("SASL_OAUTH_TOKEN_URL", "http://idp/token", "SASL_OAUTH_CA_FILE", "/ca.pem"),
			wantVar: "SASL_OAUTH_CA_FILE", wantValue: "/ca.pem", wantForm: "a CA is for https"},
		{name: "CA file without OAUTHBEARER", set: map[string]string{"SASL_OAUTH_CA_FILE": "/ca.pem"}, wantVar: "SASL_OAUTH_CA_FILE", wantValue: "/ca.pem",
			wantForm: "PROCESSOR_SASL_MECHANISM=OAUTHBEARER along with it"},
		{name: "scope without OAUTHBEARER", set: map[string]string{"SASL_OAUTH_SCOPE": "kafka"}, wantVar: "SASL_OAUTH_SCOPE", wantValue: "kafka",
			wantForm: "without OAUTHBEARER it would do nothing"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.set, tt.unset...)
			c, err := config.Load("h")
			var cerr *settings.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("Load = %+v, %v: want a *settings.Error", c, err)
			}
			msg, wantVar := err.Error(), config.EnvName(tt.wantVar)
			if cerr.Var != wantVar || strings.ContainsAny(msg, "\r\n") {
				t.Errorf("message %q: want one line about %s", msg, wantVar)
			}
			switch {
			case tt.wantValue != "":
				if q := wantVar + "=" + strconv.Quote(tt.wantValue); !strings.Contains(msg, q) {
					t.Errorf("message %q does not quote %s", msg, q)
				}
			case cerr.Secret:
				if strings.Contains(msg, password) {
					t.Errorf("message %q shows the password", msg)
				}
			case !cerr.Unset:
				t.Errorf("message %q: want %s reported unset", msg, wantVar)
			}
			if !strings.Contains(msg, tt.wantForm) {
				t.Errorf("message %q lacks %q", msg, tt.wantForm)
			}
		})
	}
}
