package config

import (
	"net/url"
	"strings"
)

// The settings of SASL OAUTHBEARER: PROCESSOR_SASL_OAUTH_*. The secret's
// file is read at start (cmd/processor/app), not here.

// OAuthBearer is the PROCESSOR_SASL_MECHANISM of OAuth 2.0 bearer tokens.
const OAuthBearer = "OAUTHBEARER"

// OAuthExtensions returns PROCESSOR_SASL_OAUTH_EXTENSIONS as a map: the
// SASL extensions sent with each token. Validate has checked the setting.
func (c *Config) OAuthExtensions() map[string]string {
	if len(c.SASLOAuthExtensions) == 0 {
		return nil
	}
	m := make(map[string]string, len(c.SASLOAuthExtensions))
	for _, kv := range c.SASLOAuthExtensions {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// oauthRules are Validate's checks of the OAUTHBEARER settings, made after
// rules (which have checked the mechanism's name).
var oauthRules = []rule{
	{field: "SASLMechanism", when: func(c *Config) bool { return oauthSASL(c) && c.EmbeddedBroker }, ok: func(*Config) bool { return false },
		form: fixed("PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 with PROCESSOR_EMBEDDED_BROKER=true (the embedded broker has no OAUTHBEARER)")},
	{field: "SASLUsername", when: oauthSASL, ok: func(c *Config) bool { return c.SASLUsername == "" }, form: notWithOAuth},
	{field: "SASLPassword", when: oauthSASL, ok: func(c *Config) bool { return c.SASLPassword == "" }, form: notWithOAuth},
	{field: "SASLPasswordFile", when: oauthSASL, ok: func(c *Config) bool { return c.SASLPasswordFile == "" }, form: notWithOAuth},
	{field: "SASLOAuthTokenURL", when: oauthSASL, unset: true, ok: func(c *Config) bool { return c.SASLOAuthTokenURL != "" }, form: oauthNeeds},
	{field: "SASLOAuthTokenURL", when: oauthSASL, ok: func(c *Config) bool { return httpURL(c.SASLOAuthTokenURL) }},
	{field: "SASLOAuthClientID", when: oauthSASL, unset: true, ok: func(c *Config) bool { return c.SASLOAuthClientID != "" }, form: oauthNeeds},
	{field: "SASLOAuthClientID", when: oauthSASL, ok: func(c *Config) bool { return printable(c.SASLOAuthClientID, 1024) }},
	{field: "SASLOAuthClientSecretFile", when: oauthSASL, unset: true, ok: func(c *Config) bool { return c.SASLOAuthClientSecretFile != "" },
		form: oauthNeeds},
	{field: "SASLOAuthCAFile", when: func(c *Config) bool { return oauthSASL(c) && c.SASLOAuthCAFile != "" },
		ok:   func(c *Config) bool { return strings.HasPrefix(c.SASLOAuthTokenURL, "https://") },
		form: fixed("unset with an http PROCESSOR_SASL_OAUTH_TOKEN_URL (a CA is for https), or an https token URL")},
	{field: "SASLOAuthScope", when: func(c *Config) bool { return c.SASLOAuthScope != "" }, ok: func(c *Config) bool { return printable(c.SASLOAuthScope, 4096) }},
	{field: "SASLOAuthAudience", when: func(c *Config) bool { return c.SASLOAuthAudience != "" },
		ok: func(c *Config) bool { return printable(c.SASLOAuthAudience, 4096) }},
	{field: "SASLOAuthExtensions", ok: func(c *Config) bool { return all(c.SASLOAuthExtensions, extension) },
		form: note(` ("auth" is reserved; values of printable ASCII)`)},

	// Without OAUTHBEARER, its settings would do nothing.
	{field: "SASLOAuthTokenURL", when: notOAuth, ok: func(c *Config) bool { return c.SASLOAuthTokenURL == "" }, form: needsOAuth},
	{field: "SASLOAuthClientID", when: notOAuth, ok: func(c *Config) bool { return c.SASLOAuthClientID == "" }, form: needsOAuth},
	{field: "SASLOAuthClientSecretFile", when: notOAuth, ok: func(c *Config) bool { return c.SASLOAuthClientSecretFile == "" }, form: needsOAuth},
	{field: "SASLOAuthScope", when: notOAuth, ok: func(c *Config) bool { return c.SASLOAuthScope == "" }, form: needsOAuth},
	{field: "SASLOAuthAudience", when: notOAuth, ok: func(c *Config) bool { return c.SASLOAuthAudience == "" }, form: needsOAuth},
	{field: "SASLOAuthCAFile", when: notOAuth, ok: func(c *Config) bool { return c.SASLOAuthCAFile == "" }, form: needsOAuth},
	{field: "SASLOAuthExtensions", when: notOAuth, ok: func(c *Config) bool { return len(c.SASLOAuthExtensions) == 0 }, form: needsOAuth},
}

func oauthSASL(c *Config) bool    { return c.SASLMechanism == OAuthBearer }
func notOAuth(c *Config) bool     { return c.SASLMechanism != OAuthBearer }
func passwordSASL(c *Config) bool { return hasSASL(c) && !oauthSASL(c) }

// oauthNeeds is the form of a required OAUTHBEARER setting left unset.
func oauthNeeds(_ *Config, desc string) string {
	return desc + " (PROCESSOR_SASL_MECHANISM=OAUTHBEARER needs one)"
}

// notWithOAuth is the form of a user or password set with OAUTHBEARER.
func notWithOAuth(*Config, string) string {
	return "unset with PROCESSOR_SASL_MECHANISM=OAUTHBEARER (its tokens come from PROCESSOR_SASL_OAUTH_TOKEN_URL for PROCESSOR_SASL_OAUTH_CLIENT_ID, so a user and password would do nothing)"
}

// needsOAuth is the form of an OAUTHBEARER setting made without it.
func needsOAuth(*Config, string) string {
	return "PROCESSOR_SASL_MECHANISM=OAUTHBEARER along with it, or the variable unset (without OAUTHBEARER it would do nothing)"
}

// httpURL reports whether s is an absolute http or https URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// extension reports whether kv is a SASL extension as Kafka takes one:
// key=value, the key letters only and not "auth", the value printable
// ASCII or spaces (RFC 7628 section 3.1).
func extension(kv string) bool {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" || k == "auth" || v == "" {
		return false
	}
	for _, r := range k {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return false
		}
	}
	for _, r := range v {
		if r != ' ' && r != '\t' && (r < 0x21 || r > 0x7e) {
			return false
		}
	}
	return true
}
