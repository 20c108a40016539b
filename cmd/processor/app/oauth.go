package app

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/url"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/internal/oauthtoken"
	"github.com/streamproc/processor/settings"
)

// SASL OAUTHBEARER: PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE is read at
// start, and its secret lives in the token source (internal/oauthtoken)
// only, which hands every connection that authenticates (or
// re-authenticates, KIP-368) the current token, fetching a new one after
// about 80% of a token's lifetime.

// loadOAuth reads the client secret's file and makes the token source of
// cfg's OAUTHBEARER settings. Every error it returns is a *settings.Error.
func loadOAuth(cfg *config.Config, log *slog.Logger) (*oauthtoken.Source, error) {
	secret, err := readPassword("SASL_OAUTH_CLIENT_SECRET_FILE", cfg.SASLOAuthClientSecretFile, "the OAuth client secret")
	if err != nil {
		return nil, err
	}
	var tc *tls.Config
	if cfg.SASLOAuthCAFile != "" {
		if tc, err = tlsConfig(tlsFiles{prefix: "SASL_OAUTH_", ca: cfg.SASLOAuthCAFile}); err != nil {
			return nil, err
		}
	}
	src, err := oauthtoken.New(oauthtoken.Options{
		TokenURL:        cfg.SASLOAuthTokenURL,
		ClientID:        cfg.SASLOAuthClientID,
		ClientSecret:    settings.Secret(secret),
		Scope:           cfg.SASLOAuthScope,
		Audience:        cfg.SASLOAuthAudience,
		PostCredentials: cfg.SASLOAuthClientAuth == "post",
		TLS:             tc,
		Log:             log,
	})
	if err != nil { // Validate has checked the settings; this is a backstop
		return nil, &settings.Error{Var: config.EnvName("SASL_OAUTH_TOKEN_URL"), Value: redactURL(cfg.SASLOAuthTokenURL),
			Want: settings.Say("an http or https URL of an OAuth 2.0 token endpoint (" + err.Error() + ")")}
	}
	return src, nil
}

// oauthMechanism is franz-go's OAUTHBEARER with the tokens of src and the
// SASL extensions ext.
func oauthMechanism(src *oauthtoken.Source, ext map[string]string) sasl.Mechanism {
	return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
		tok, _, err := src.Token(ctx)
		if err != nil {
			return oauth.Auth{}, err
		}
		return oauth.Auth{Token: tok, Extensions: ext}, nil
	})
}

// checkOAuth fetches the first token before anything connects to the
// brokers. A token endpoint that refuses the request (the credentials,
// the scope) stops the processor at once, exit 1 with one line, as
// brokers refusing a password do; one that cannot be reached, or fails,
// is logged and left to the clients, which ask again as they retry
// connecting. ok is false when the processor must stop, with code.
func checkOAuth(ctx context.Context, sec *security, log *slog.Logger) (code int, ok bool) {
	if sec.oauth == nil {
		return exitOK, true
	}
	_, _, err := sec.oauth.Token(ctx)
	var refused *oauthtoken.RefusedError
	switch {
	case err == nil:
		return exitOK, true
	case ctx.Err() != nil:
		log.Info("stopped while starting")
		return exitOK, false
	case errors.As(err, &refused) && refused.Credentials:
		log.Error("stopping: authentication failed: " + err.Error() + ": check PROCESSOR_SASL_OAUTH_CLIENT_ID and the secret in the file in PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE")
		return exitRuntime, false
	case errors.As(err, &refused):
		log.Error("stopping: authentication failed: " + err.Error() + ": check PROCESSOR_SASL_OAUTH_SCOPE and PROCESSOR_SASL_OAUTH_AUDIENCE")
		return exitRuntime, false
	}
	log.Warn("no OAuth token yet; the Kafka clients ask again as they connect", "err", err.Error())
	return exitOK, true
}

// redactURL is u without a password it may hold.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return p.Redacted()
}
