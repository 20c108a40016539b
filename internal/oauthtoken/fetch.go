package oauthtoken

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// maxBody bounds what is read of the endpoint's answer.
const maxBody = 1 << 20

// response is the endpoint's answer: a token (RFC 6749 section 5.1) or an
// error (section 5.2).
type response struct {
	AccessToken string          `json:"access_token"`
	TokenType   string          `json:"token_type"`
	ExpiresIn   json.RawMessage `json:"expires_in"` // a number, or a string of one from some providers
	Error       string          `json:"error"`
	Description string          `json:"error_description"`
}

// fetch asks the endpoint for a new token.
func (s *Source) fetch(ctx context.Context) (*token, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if s.o.Scope != "" {
		form.Set("scope", s.o.Scope)
	}
	if s.o.Audience != "" {
		form.Set("audience", s.o.Audience)
	}
	if s.o.PostCredentials {
		form.Set("client_id", s.o.ClientID)
		form.Set("client_secret", s.o.ClientSecret.Reveal())
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("requesting an OAuth token from %s: %w", s.redactedURL(), err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if !s.o.PostCredentials {
		// RFC 6749 section 2.3.1: both form-encoded, then basic authentication.
		req.SetBasicAuth(url.QueryEscape(s.o.ClientID), url.QueryEscape(s.o.ClientSecret.Reveal()))
	}
	sent := s.o.now()
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // its message repeats the URL
			err = ue.Err
		}
		return nil, fmt.Errorf("the OAuth token endpoint %s is unreachable: %w", s.redactedURL(), err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of the OAuth token endpoint %s: %w", s.redactedURL(), err)
	}
	var r response
	jsonErr := json.Unmarshal(body, &r)
	if resp.StatusCode != http.StatusOK {
		return nil, s.refused(resp.Status, resp.StatusCode, &r)
	}
	if jsonErr != nil {
		return nil, fmt.Errorf("the OAuth token endpoint %s answered %s with no JSON token (%s)", s.redactedURL(), resp.Status, shorten(jsonErr.Error()))
	}
	return s.parse(&r, sent)
}

// RefusedError is an answer of 400 to 499 from the token endpoint: it
// refused the credentials, the scope or the audience, and asking again
// with the same settings meets the same answer.
type RefusedError struct {
	// Status is the HTTP status, e.g. "401 Unauthorized".
	Status string
	// Credentials: the endpoint refused the client id or its secret
	// (401, or error invalid_client).
	Credentials bool
	msg         string
}

func (e *RefusedError) Error() string { return e.msg }

// refused is the error of an answer other than 200 OK: a *RefusedError
// for 400 to 499.
func (s *Source) refused(status string, code int, r *response) error {
	detail := ""
	if r.Error != "" {
		detail = " (" + s.scrub(r.Error)
		if r.Description != "" {
			detail += ": " + s.scrub(r.Description)
		}
		detail += ")"
	}
	if code == http.StatusUnauthorized || r.Error == "invalid_client" {
		return &RefusedError{Status: status, Credentials: true,
			msg: fmt.Sprintf("client id %q or its secret refused by %s: %s%s", s.o.ClientID, s.redactedURL(), status, detail)}
	}
	msg := fmt.Sprintf("the OAuth token endpoint %s answered %s%s", s.redactedURL(), status, detail)
	if code >= 400 && code < 500 {
		return &RefusedError{Status: status, msg: msg}
	}
	return errors.New(msg)
}

// parse checks a 200 answer and dates its token: expires_in counts from
// when the request was sent; without it, the token's own exp claim (a
// JWT's) says when it expires.
func (s *Source) parse(r *response, sent time.Time) (*token, error) {
	if r.AccessToken == "" {
		return nil, fmt.Errorf("the OAuth token endpoint %s answered without an access_token", s.redactedURL())
	}
	if r.TokenType != "" && !strings.EqualFold(r.TokenType, "bearer") {
		return nil, fmt.Errorf("the OAuth token endpoint %s gave a token of type %q, not a bearer token", s.redactedURL(), shorten(r.TokenType))
	}
	var expiry time.Time
	if secs, ok := expiresIn(r.ExpiresIn); ok {
		expiry = sent.Add(time.Duration(secs * float64(time.Second)))
	} else if exp, ok := jwtExpiry(r.AccessToken); ok {
		expiry = exp
	} else {
		return nil, fmt.Errorf("the OAuth token endpoint %s gave no expires_in, and its token is not a JWT with an exp claim", s.redactedURL())
	}
	now := s.o.now()
	if !now.Before(expiry) {
		return nil, fmt.Errorf("the OAuth token endpoint %s gave a token that has already expired (at %s)", s.redactedURL(), expiry.UTC().Format(time.RFC3339))
	}
	return &token{value: r.AccessToken, expiry: expiry, refreshAt: s.refreshTime(now, expiry)}, nil
}

// expiresIn reads expires_in: a positive number of seconds, or a string
// holding one.
func expiresIn(raw json.RawMessage) (float64, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		raw = json.RawMessage(str)
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	return v, err == nil && v > 0 && v < 1e9
}

// jwtExpiry reads the exp claim of a JWT, without checking its signature:
// only to know when to refresh it.
func jwtExpiry(tok string) (time.Time, bool) {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(b, &claims) != nil || claims.Exp == nil || *claims.Exp <= 0 {
		return time.Time{}, false
	}
	return time.Unix(int64(*claims.Exp), 0), true
}

// scrub makes text from the endpoint fit one line of an error: short,
// without control characters, and without the client secret should the
// endpoint echo it.
func (s *Source) scrub(text string) string {
	if sec := s.o.ClientSecret.Reveal(); sec != "" {
		text = strings.ReplaceAll(text, sec, "[redacted]")
	}
	return shorten(text)
}

// shorten keeps the first 200 characters of text, control characters
// replaced by spaces.
func shorten(text string) string {
	text = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, text)
	if r := []rune(text); len(r) > 200 {
		text = string(r[:200]) + "..."
	}
	return text
}
