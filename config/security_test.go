package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
)

// password is a value no message may quote.
const password = "hunter2-Sup3rSecret"

func TestLoadSecurityValid(t *testing.T) {
	testLoads(t, []loadCase{
		{"off by default", nil, func(c *config.Config) bool {
			return !c.TLSEnabled && c.SASLMechanism == "" && c.SASLPassword == "" && c.TLSCAFile == ""
		}},
		{"TLS with the system's roots", map[string]string{"TLS_ENABLED": "true"}, func(c *config.Config) bool { return c.TLSEnabled }},
		{"TLS with every setting", map[string]string{"TLS_ENABLED": "true", "TLS_CA_FILE": "/ca.pem", "TLS_CERT_FILE": "/c.pem",
			"TLS_KEY_FILE": "/c.key", "TLS_SERVER_NAME": "kafka.internal"}, func(c *config.Config) bool {
			return c.TLSCAFile == "/ca.pem" && c.TLSCertFile == "/c.pem" && c.TLSKeyFile == "/c.key" && c.TLSServerName == "kafka.internal"
		}},
		{"SCRAM-SHA-512 with a password", map[string]string{"SASL_MECHANISM": "SCRAM-SHA-512", "SASL_USERNAME": "u", "SASL_PASSWORD": password},
			func(c *config.Config) bool { return c.SASLPassword.Reveal() == password && c.SASLUsername == "u" }},
		{"SCRAM-SHA-256 with a password file", map[string]string{"SASL_MECHANISM": "SCRAM-SHA-256", "SASL_USERNAME": "u", "SASL_PASSWORD_FILE": "/run/pw"},
			func(c *config.Config) bool { return c.SASLPasswordFile == "/run/pw" && c.SASLPassword == "" }},
		{"PLAIN over TLS", map[string]string{"SASL_MECHANISM": "PLAIN", "SASL_USERNAME": "u", "SASL_PASSWORD": password, "TLS_ENABLED": "true"},
			func(c *config.Config) bool { return c.SASLMechanism == "PLAIN" && c.TLSEnabled }},
		{"SASL on the embedded broker", map[string]string{"EMBEDDED_BROKER": "true", "SASL_MECHANISM": "PLAIN", "SASL_USERNAME": "u", "SASL_PASSWORD": password},
			func(c *config.Config) bool { return c.EmbeddedBroker && c.SASLMechanism == "PLAIN" }},
		{"TLS explicitly off", map[string]string{"TLS_ENABLED": "false"}, func(c *config.Config) bool { return !c.TLSEnabled }},
	})
}

// Every mistake in the TLS and SASL settings is one line naming the
// variable (and the one it goes with), and never quotes the password.
func TestLoadSecurityErrors(t *testing.T) {
	sasl := func(kv ...string) map[string]string {
		m := map[string]string{"SASL_MECHANISM": "SCRAM-SHA-512", "SASL_USERNAME": "u", "SASL_PASSWORD": password}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name    string
		set     map[string]string
		unset   []string
		wantVar string
		// wantValue is quoted in the message, unless the error is about an
		// unset variable or a secret.
		wantValue string
		unsetErr  bool
		secret    bool
		// wantForm: parts the message must contain.
		wantForm []string
	}{
		{name: "CA file without TLS", set: map[string]string{"TLS_CA_FILE": "/ca.pem"}, wantVar: "TLS_CA_FILE", wantValue: "/ca.pem",
			wantForm: []string{"PROCESSOR_TLS_ENABLED=true"}},
		{name: "CA file with TLS off", set: map[string]string{"TLS_ENABLED": "false", "TLS_CA_FILE": "/ca.pem"}, wantVar: "TLS_CA_FILE", wantValue: "/ca.pem",
			wantForm: []string{"PROCESSOR_TLS_ENABLED=true"}},
		{name: "client certificate without TLS", set: map[string]string{"TLS_CERT_FILE": "/c.pem", "TLS_KEY_FILE": "/c.key"}, wantVar: "TLS_CERT_FILE",
			wantValue: "/c.pem", wantForm: []string{"PROCESSOR_TLS_ENABLED=true"}},
		{name: "key without TLS", set: map[string]string{"TLS_KEY_FILE": "/c.key"}, wantVar: "TLS_KEY_FILE", wantValue: "/c.key",
			wantForm: []string{"PROCESSOR_TLS_ENABLED=true"}},
		{name: "server name without TLS", set: map[string]string{"TLS_SERVER_NAME": "kafka"}, wantVar: "TLS_SERVER_NAME", wantValue: "kafka",
			wantForm: []string{"PROCESSOR_TLS_ENABLED=true"}},
		{name: "certificate without its key", set: map[string]string{"TLS_ENABLED": "true", "TLS_CERT_FILE": "/c.pem"}, wantVar: "TLS_KEY_FILE",
			unsetErr: true, wantForm: []string{"PROCESSOR_TLS_CERT_FILE needs its key"}},
		{name: "key without its certificate", set: map[string]string{"TLS_ENABLED": "true", "TLS_KEY_FILE": "/c.key"}, wantVar: "TLS_CERT_FILE",
			unsetErr: true, wantForm: []string{"PROCESSOR_TLS_KEY_FILE"}},
		{name: "TLS on the embedded broker", set: map[string]string{"EMBEDDED_BROKER": "true", "TLS_ENABLED": "true"}, unset: []string{"BROKERS"},
			wantVar: "TLS_ENABLED", wantValue: "true", wantForm: []string{"PROCESSOR_EMBEDDED_BROKER=true", "plaintext only"}},
		{name: "TLS_ENABLED not a bool", set: map[string]string{"TLS_ENABLED": "yes"}, wantVar: "TLS_ENABLED", wantValue: "yes",
			wantForm: []string{"true or false"}},

		{name: "unknown mechanism", set: sasl("SASL_MECHANISM", "GSSAPI"), wantVar: "SASL_MECHANISM", wantValue: "GSSAPI",
			wantForm: []string{"PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"}},
		{name: "lower-case mechanism", set: sasl("SASL_MECHANISM", "scram-sha-512"), wantVar: "SASL_MECHANISM", wantValue: "scram-sha-512",
			wantForm: []string{"SCRAM-SHA-512"}},
		{name: "mechanism without user", set: map[string]string{"SASL_MECHANISM": "SCRAM-SHA-512", "SASL_PASSWORD": password}, wantVar: "SASL_USERNAME", unsetErr: true,
			wantForm: []string{"PROCESSOR_SASL_MECHANISM needs one"}},
		{name: "mechanism without password", set: map[string]string{"SASL_MECHANISM": "PLAIN", "SASL_USERNAME": "u"}, wantVar: "SASL_PASSWORD",
			unsetErr: true, wantForm: []string{"PROCESSOR_SASL_PASSWORD_FILE"}},
		{name: "password and password file", set: sasl("SASL_PASSWORD_FILE", "/run/pw"), wantVar: "SASL_PASSWORD_FILE", wantValue: "/run/pw",
			wantForm: []string{"PROCESSOR_SASL_PASSWORD is set", "not both"}},
		{name: "user without mechanism", set: map[string]string{"SASL_USERNAME": "u"}, wantVar: "SASL_USERNAME", wantValue: "u",
			wantForm: []string{"PROCESSOR_SASL_MECHANISM"}},
		{name: "password without mechanism", set: map[string]string{"SASL_PASSWORD": password}, wantVar: "SASL_PASSWORD", secret: true,
			wantForm: []string{"PROCESSOR_SASL_MECHANISM"}},
		{name: "password file without mechanism", set: map[string]string{"SASL_PASSWORD_FILE": "/run/pw"}, wantVar: "SASL_PASSWORD_FILE", wantValue: "/run/pw",
			wantForm: []string{"PROCESSOR_SASL_MECHANISM"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.set, tt.unset...)
			c, err := config.Load("h")
			if err == nil {
				t.Fatalf("Load succeeded with %+v, want an error naming %s", c, config.EnvName(tt.wantVar))
			}
			var cerr *settings.Error
			if !errors.As(err, &cerr) || err != error(cerr) {
				t.Fatalf("error %v (%T) is not a *settings.Error", err, err)
			}
			msg := err.Error()
			wantVar := config.EnvName(tt.wantVar)
			if cerr.Var != wantVar || cerr.Unset != tt.unsetErr || cerr.Secret != tt.secret {
				t.Errorf("Var %q Unset %v Secret %v, want %q %v %v (%s)", cerr.Var, cerr.Unset, cerr.Secret, wantVar, tt.unsetErr, tt.secret, msg)
			}
			if strings.ContainsAny(msg, "\r\n") || !strings.Contains(msg, wantVar) {
				t.Errorf("message %q: want one line naming %s", msg, wantVar)
			}
			switch {
			case tt.unsetErr:
				if !strings.Contains(msg, "is not set") {
					t.Errorf("message %q does not say the variable is not set", msg)
				}
			case tt.secret:
				if cerr.Value != "" || !strings.Contains(msg, "not shown") {
					t.Errorf("secret error: Value %q, message %q", cerr.Value, msg)
				}
			default:
				if q := wantVar + "=" + strconv.Quote(tt.wantValue); !strings.Contains(msg, q) {
					t.Errorf("message %q does not quote the bad value as %s", msg, q)
				}
			}
			for _, f := range tt.wantForm {
				if !strings.Contains(msg, f) {
					t.Errorf("message %q lacks %q", msg, f)
				}
			}
			if strings.Contains(msg, password) || strings.Contains(fmt.Sprintf("%+v %#v", cerr, cerr), password) {
				t.Errorf("the error shows the password: %q", msg)
			}
		})
	}
}

// A Secret shows a placeholder wherever it is printed, logged or encoded.
func TestSecretIsNeverShown(t *testing.T) {
	setEnv(t, map[string]string{"SASL_MECHANISM": "PLAIN", "SASL_USERNAME": "u", "SASL_PASSWORD": password})
	c, err := config.Load("h")
	if err != nil {
		t.Fatal(err)
	}
	if c.SASLPassword.Reveal() != password {
		t.Fatalf("Reveal = %q", c.SASLPassword.Reveal())
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logged, nil))
	log.Info("config", "cfg", c, "password", c.SASLPassword)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "cfg", c, "password", c.SASLPassword)
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{
		"%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", c), "%#v": fmt.Sprintf("%#v", c), "%s": fmt.Sprintf("%s", c.SASLPassword),
		"%q": fmt.Sprintf("%q", c.SASLPassword), "Sprint": fmt.Sprint(c.SASLPassword), "json": string(js), "slog": logged.String(),
	} {
		if strings.Contains(s, password) {
			t.Errorf("%s shows the password: %s", name, s)
		}
		if !strings.Contains(s, "[redacted]") {
			t.Errorf("%s shows no placeholder: %s", name, s)
		}
	}
	if s := settings.Secret("").String(); s != "" {
		t.Errorf("an empty secret shows %q, want nothing", s)
	}
}

func TestSecretErrorMessage(t *testing.T) {
	e := &settings.Error{Var: "PROCESSOR_SASL_PASSWORD", Value: password, Secret: true, Want: settings.Say("w")}
	if got, want := e.Error(), "PROCESSOR_SASL_PASSWORD is invalid (its value is not shown): want w"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
