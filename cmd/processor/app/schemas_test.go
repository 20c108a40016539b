package app

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/srserver"
	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/settings"
)

// schemaEnv sets the smallest valid environment with Avro values and the
// given registry settings, and loads it.
func schemaEnv(t *testing.T, vars map[string]string) *config.Config {
	t.Helper()
	for k, v := range map[string]string{"BROKERS": "127.0.0.1:1", "GROUP": "g", "INPUT_TOPICS": "in", "OUTPUT_TOPIC": "out", "VALUE_FORMAT": "avro"} {
		t.Setenv(config.EnvName(k), v)
	}
	for k, v := range vars {
		t.Setenv(config.EnvName(k), v)
	}
	cfg, err := config.Load("h")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Over https the registry client trusts PROCESSOR_SCHEMA_REGISTRY_TLS_CA_FILE
// and sends the basic-auth user and the password file's password; without
// the CA the certificate is refused, as a failure of the registry (no
// record's fault), not a configuration error.
func TestSchemaRegistryTLSAndPassword(t *testing.T) {
	reg, err := srserver.New(srserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var sawUser, sawPass string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawUser, sawPass, _ = r.BasicAuth()
		reg.Handler().ServeHTTP(w, r)
	}))
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := schemaEnv(t, map[string]string{"SCHEMA_REGISTRY_URL": srv.URL, "SCHEMA_REGISTRY_TLS_CA_FILE": ca,
		"SCHEMA_REGISTRY_USERNAME": "proc", "SCHEMA_REGISTRY_PASSWORD_FILE": pw})
	s, err := loadSchemas(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.client.Register(ctx, "out-value", schema.Schema{Type: schema.Avro, Text: `"string"`})
	if err != nil || got.ID == 0 {
		t.Fatalf("Register over https = %+v, %v", got, err)
	}
	if sawUser != "proc" || sawPass != "s3cret" {
		t.Errorf("the registry saw user %q password %q, want proc and the file's password without its newline", sawUser, sawPass)
	}

	noCA := schemaEnv(t, map[string]string{"SCHEMA_REGISTRY_URL": srv.URL, "SCHEMA_REGISTRY_TLS_CA_FILE": "", "SCHEMA_REGISTRY_USERNAME": "", "SCHEMA_REGISTRY_PASSWORD_FILE": ""})
	s, err = loadSchemas(noCA)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.client.Latest(ctx, "out-value")
	if f := schema.FaultOf(err); err == nil || f == schema.FaultRecord || f == schema.FaultSchema {
		t.Errorf("an untrusted certificate: %v (fault %q); want a registry failure", err, f)
	}
}

// Files the registry settings name are read at start: a missing CA file,
// password file or schema file is a *settings.Error naming its variable,
// and never shows a password.
func TestLoadSchemasFileErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.avsc")
	if err := os.WriteFile(empty, []byte("  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		vars    map[string]string
		wantVar string
	}{
		"CA file":      {map[string]string{"SCHEMA_REGISTRY_URL": "https://r:8081", "SCHEMA_REGISTRY_TLS_CA_FILE": filepath.Join(dir, "none.pem")}, "SCHEMA_REGISTRY_TLS_CA_FILE"},
		"password":     {map[string]string{"SCHEMA_REGISTRY_URL": "http://r:8081", "SCHEMA_REGISTRY_USERNAME": "u", "SCHEMA_REGISTRY_PASSWORD_FILE": filepath.Join(dir, "none")}, "SCHEMA_REGISTRY_PASSWORD_FILE"},
		"schema file":  {map[string]string{"SCHEMA_REGISTRY_URL": "http://r:8081", "OUTPUT_VALUE_SCHEMA_FILE": filepath.Join(dir, "none.avsc")}, "OUTPUT_VALUE_SCHEMA_FILE"},
		"empty schema": {map[string]string{"SCHEMA_REGISTRY_URL": "http://r:8081", "OUTPUT_VALUE_SCHEMA_FILE": empty}, "OUTPUT_VALUE_SCHEMA_FILE"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadSchemas(schemaEnv(t, tc.vars))
			var ce *settings.Error
			if !errors.As(err, &ce) || ce.Var != config.EnvName(tc.wantVar) || strings.Contains(err.Error(), "\n") {
				t.Errorf("loadSchemas = %v; want one line naming %s", err, config.EnvName(tc.wantVar))
			}
		})
	}
	if s, err := loadSchemas(schemaEnv(t, map[string]string{"VALUE_FORMAT": "raw"})); s != nil || err != nil {
		t.Errorf("all formats raw: loadSchemas = %v, %v; want nothing to load", s, err)
	}
}

// /status names the formats other than raw, and nothing when all are.
func TestStatusFormats(t *testing.T) {
	got := formats(schemaEnv(t, map[string]string{"SCHEMA_REGISTRY_URL": "http://r:8081", "OUTPUT_KEY_FORMAT": "json_schema"}))
	if len(got) != 3 || got["value"] != "avro" || got["output_value"] != "avro" || got["output_key"] != "json_schema" {
		t.Errorf("formats = %v", got)
	}
	if got := formats(schemaEnv(t, map[string]string{"VALUE_FORMAT": "raw", "OUTPUT_KEY_FORMAT": "", "SCHEMA_REGISTRY_URL": ""})); got != nil {
		t.Errorf("all raw: formats = %v, want none", got)
	}
}
