// Package oauthtoken fetches OAuth 2.0 access tokens with the client
// credentials grant (RFC 6749 section 4.4) from a token endpoint, for SASL
// OAUTHBEARER, and keeps the current token until shortly before it
// expires: Token returns it to every connection that authenticates, and
// fetches a new one once most of its lifetime (about 80%, with jitter so
// that many instances do not ask at once) has passed.
//
// The client secret is never logged and never part of an error; nor is a
// token. The package reads no variable and no file: its caller passes the
// settings in Options.
package oauthtoken

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/streamproc/processor/settings"
)

// Options are the settings of a Source.
type Options struct {
	// TokenURL is the token endpoint, an http or https URL.
	TokenURL string
	// ClientID and ClientSecret are the client's credentials.
	ClientID     string
	ClientSecret settings.Secret
	// Scope, when not empty, is the space-separated scope asked for.
	Scope string
	// Audience, when not empty, is sent as the audience parameter, which
	// some providers (Auth0, Okta custom servers) require to issue a JWT
	// for a given resource.
	Audience string
	// PostCredentials sends the credentials in the request body
	// (client_secret_post) instead of HTTP basic authentication
	// (client_secret_basic, the default every provider must accept).
	PostCredentials bool
	// TLS, when not nil, is the TLS configuration of https requests;
	// nil uses the system's roots.
	TLS *tls.Config
	// Timeout bounds one request to the endpoint; 0 is 10 seconds.
	Timeout time.Duration
	// Log receives a debug line per token fetched and a warning per
	// failed refresh that the current token outlives; nil logs nothing.
	Log *slog.Logger

	// now and jitter replace the clock and the random fraction in tests.
	now    func() time.Time
	jitter func() float64
}

// The share of a token's lifetime after which it is refreshed: 80%, give
// or take 5%.
const (
	refreshShare  = 0.75
	refreshJitter = 0.10
)

// retryAfter is how long a failed refresh waits before the next try,
// while the current token is still valid.
const retryAfter = time.Second

// Source hands out the current access token, fetching a new one when it
// is due. Its methods are safe for concurrent use.
type Source struct {
	o      Options
	client *http.Client
	// sem is held by the one caller that fetches; others wait on it (or
	// on their context) and then find the new token.
	sem chan struct{}

	mu    sync.Mutex
	tok   *token
	retry time.Time // no refresh attempt before this, after a failure
	calls int
}

// token is one access token and its times.
type token struct {
	value     string
	refreshAt time.Time // fetch a new one from then on
	expiry    time.Time // the endpoint's expires_in, or the JWT's exp
}

// New returns a Source for o. It fails when o lacks the URL, the client
// id or the secret, or when the URL is not an absolute http or https URL.
func New(o Options) (*Source, error) {
	u, err := url.Parse(o.TokenURL)
	switch {
	case err != nil:
		return nil, errors.New("the token URL does not parse as a URL") // its error would quote it, password and all
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("the token URL %s is not an absolute http or https URL", u.Redacted())
	case o.ClientID == "":
		return nil, errors.New("no client id")
	case o.ClientSecret == "":
		return nil, errors.New("no client secret")
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.jitter == nil {
		o.jitter = rand.Float64
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.TLS != nil {
		tr.TLSClientConfig = o.TLS.Clone()
	}
	return &Source{o: o, client: &http.Client{Transport: tr, Timeout: o.Timeout}, sem: make(chan struct{}, 1)}, nil
}

// Token returns the current access token and when it expires, fetching a
// new one first when none is cached or the cached one is due for refresh.
// When a refresh fails while the cached token is still valid, the cached
// one is returned (and the failure logged), and the next call after a
// second tries again; when there is no valid token, the error is returned.
func (s *Source) Token(ctx context.Context) (string, time.Time, error) {
	cur, due := s.current()
	switch {
	case cur != nil && !due:
		return cur.value, cur.expiry, nil
	case cur != nil: // valid but due: one caller refreshes, the others use it meanwhile
		select {
		case s.sem <- struct{}{}:
		default:
			return cur.value, cur.expiry, nil
		}
	default:
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			return "", time.Time{}, fmt.Errorf("waiting for an OAuth token from %s: %w", s.redactedURL(), ctx.Err())
		}
	}
	defer func() { <-s.sem }()
	if cur, due := s.current(); cur != nil && !due { // another caller fetched it meanwhile
		return cur.value, cur.expiry, nil
	}
	t, err := s.fetch(ctx)
	now := s.o.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if err != nil {
		if old := s.tok; old != nil && now.Before(old.expiry) {
			s.retry = now.Add(retryAfter)
			s.logWarn("refreshing the OAuth token failed; the current one is used until it expires",
				"expires_in", old.expiry.Sub(now).Round(time.Second).String(), "err", err.Error())
			return old.value, old.expiry, nil
		}
		return "", time.Time{}, err
	}
	s.tok, s.retry = t, time.Time{}
	if s.o.Log != nil {
		s.o.Log.Debug("OAuth token fetched", "token_url", s.redactedURL(),
			"expires_in", t.expiry.Sub(now).Round(time.Second).String(), "refresh_in", t.refreshAt.Sub(now).Round(time.Second).String())
	}
	return t.value, t.expiry, nil
}

// current returns the cached token, nil when there is none or it has
// expired, and whether it is due for refresh (past its refresh time, and
// no failed refresh asks to wait).
func (s *Source) current() (t *token, due bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.o.now()
	if s.tok == nil || !now.Before(s.tok.expiry) {
		return nil, true
	}
	return s.tok, !now.Before(s.tok.refreshAt) && !now.Before(s.retry)
}

// Fetches is how many times the endpoint was asked for a token (failed
// attempts included).
func (s *Source) Fetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// logWarn logs a warning, if there is a logger.
func (s *Source) logWarn(msg string, args ...any) {
	if s.o.Log != nil {
		s.o.Log.Warn(msg, append([]any{"token_url", s.redactedURL()}, args...)...)
	}
}

// redactedURL is the token URL without a password it may hold.
func (s *Source) redactedURL() string {
	u, err := url.Parse(s.o.TokenURL)
	if err != nil {
		return "the token URL"
	}
	return u.Redacted()
}

// refreshTime is when a token fetched at now, valid until expiry, is due
// for refresh: after 75% to 85% of its lifetime.
func (s *Source) refreshTime(now, expiry time.Time) time.Time {
	life := expiry.Sub(now)
	return now.Add(time.Duration(float64(life) * (refreshShare + refreshJitter*s.o.jitter())))
}
