package schema

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// ClientOptions configure NewClient.
type ClientOptions struct {
	// URLs are base URLs, e.g. http://127.0.0.1:18081/apis/ccompat/v7,
	// tried in turn when one cannot be reached.
	URLs []string
	// Username and Password are sent as HTTP basic auth when Username
	// is set.
	Username, Password string
	// TLS configures https; nil means plain HTTP or the system roots.
	TLS *tls.Config
	// Timeout bounds each request; 0 means 10s.
	Timeout time.Duration
}

// defaultTimeout is ClientOptions.Timeout when it is 0.
const defaultTimeout = 10 * time.Second

// client is the Registry over franz-go's sr.Client.
type client struct {
	cl      *sr.Client
	secrets []string // the password, and any in the URLs' user information
}

// NewClient returns a Registry backed by franz-go's sr.Client. Every
// error it returns is an *Error whose Fault classifies the transport
// error or HTTP status; no message contains the password.
func NewClient(o ClientOptions) (Registry, error) {
	if len(o.URLs) == 0 {
		return nil, faultf(FaultSchema, "schema registry: no URL: set at least one registry URL")
	}
	secrets := []string{o.Password}
	for _, u := range o.URLs {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, faultf(FaultSchema, "schema registry: URL %q is not an http or https URL", redactURL(u))
		}
		if pw, ok := p.User.Password(); ok {
			secrets = append(secrets, pw)
		}
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.TLS != nil {
		tr.TLSClientConfig = o.TLS.Clone()
	}
	opts := []sr.ClientOpt{
		sr.URLs(o.URLs...),
		sr.HTTPClient(&http.Client{Transport: tr, Timeout: timeout}),
		sr.UserAgent("streamproc-processor"),
	}
	if o.Username != "" {
		opts = append(opts, sr.BasicAuth(o.Username, o.Password))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, faultf(FaultSchema, "schema registry: %s", scrub(err.Error(), secrets))
	}
	return &client{cl: cl, secrets: secrets}, nil
}

// SchemaByID fetches GET /schemas/ids/{id}; a 404 is the record's fault
// (its header names an id the registry does not have).
func (c *client) SchemaByID(ctx context.Context, id int) (Schema, error) {
	s, err := c.cl.SchemaByID(ctx, id)
	if err != nil {
		return Schema{}, c.classify(err, FaultRecord, "schema id %d", id)
	}
	return fromSR(s), nil
}

// Latest fetches GET /subjects/{s}/versions/latest; a 404 is a schema
// fault (the configured subject has no version).
func (c *client) Latest(ctx context.Context, subject string) (Subject, error) {
	return c.version(ctx, subject, -1)
}

// SubjectVersion fetches GET /subjects/{s}/versions/{v}.
func (c *client) SubjectVersion(ctx context.Context, subject string, version int) (Subject, error) {
	return c.version(ctx, subject, version)
}

// version fetches one version, -1 for the latest.
func (c *client) version(ctx context.Context, subject string, version int) (Subject, error) {
	ss, err := c.cl.SchemaByVersion(ctx, subject, version)
	if err != nil {
		v := "latest"
		if version != -1 {
			v = fmt.Sprint(version)
		}
		return Subject{}, c.classify(err, FaultSchema, "subject %q version %s", subject, v)
	}
	return Subject{Subject: subject, Version: ss.Version, ID: ss.ID, Schema: fromSR(ss.Schema)}, nil
}

// Register posts s to /subjects/{s}/versions, which answers with the id
// (newer registries with the version too); when the version is missing
// it is looked up with POST /subjects/{s}.
func (c *client) Register(ctx context.Context, subject string, s Schema) (Subject, error) {
	body := toSR(s)
	var into struct {
		ID      int `json:"id"`
		Version int `json:"version"`
	}
	path := "/subjects/" + url.PathEscape(subject) + "/versions"
	if err := c.cl.Do(ctx, http.MethodPost, path, body, &into); err != nil {
		return Subject{}, c.classify(err, FaultSchema, "registering a schema under subject %q", subject)
	}
	if into.Version == 0 {
		ss, err := c.cl.LookupSchema(ctx, subject, body)
		if err != nil {
			return Subject{}, c.classify(err, FaultSchema, "looking up the schema registered under subject %q", subject)
		}
		into.Version = ss.Version
	}
	return Subject{Subject: subject, Version: into.Version, ID: into.ID, Schema: s}, nil
}

// errNotRegistryAPI marks a 404 that carries no registry error code: the
// URL answers, but not as a registry's API, so the answer says nothing
// about the schema asked for. Decoding a record it is never the record's
// fault, even when it answers for a reference of the record's schema.
var errNotRegistryAPI = errors.New("not a Schema Registry API")

// classify wraps err in an *Error: notFound is the fault of a 404, 401
// and 403 are credentials, 409 and 422 a schema fault, anything else
// (5xx, 429, transport errors, timeouts) the registry's.
func (c *client) classify(err error, notFound Fault, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		msg := scrub(err.Error(), c.secrets)
		if errors.Is(err, context.Canceled) {
			return &Error{Fault: FaultRegistry, Err: fmt.Errorf("schema registry: %s: canceled: %w", what, context.Canceled)}
		}
		return &Error{Fault: FaultRegistry, Err: fmt.Errorf("schema registry: %s: the registry could not be reached (%s); retrying later", what, msg)}
	}
	msg := scrub(re.Error(), c.secrets)
	switch {
	case re.StatusCode == http.StatusNotFound && re.ErrorCode/100 != http.StatusNotFound:
		// A 404 without a registry error code (40401, 40403...) comes
		// from a server or proxy that is not the registry's API.
		return &Error{Fault: FaultSchema, Err: fmt.Errorf("schema registry: %s: HTTP 404 without a registry error code (%s): check the registry URL (e.g. http://host:8081 or .../apis/ccompat/v7): %w", what, msg, errNotRegistryAPI)}
	case re.StatusCode == http.StatusNotFound && notFound == FaultRecord:
		return faultf(FaultRecord, "schema registry: %s: HTTP 404 (code %d: %s)", what, re.ErrorCode, msg)
	case re.StatusCode == http.StatusNotFound:
		return faultf(notFound, "schema registry: %s not found (HTTP 404, code %d: %s): register the subject or fix its name", what, re.ErrorCode, msg)
	case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
		return faultf(FaultCredentials, "schema registry: %s: HTTP %d (%s): check the registry username and password", what, re.StatusCode, msg)
	case re.StatusCode == http.StatusConflict || re.StatusCode == http.StatusUnprocessableEntity:
		return faultf(FaultSchema, "schema registry: %s: HTTP %d (%s): the schema is invalid or incompatible with the subject", what, re.StatusCode, msg)
	case re.StatusCode >= 400 && re.StatusCode < 500 && re.StatusCode != http.StatusTooManyRequests && re.StatusCode != http.StatusRequestTimeout:
		return faultf(FaultSchema, "schema registry: %s: HTTP %d (%s)", what, re.StatusCode, msg)
	default:
		return faultf(FaultRegistry, "schema registry: %s: HTTP %d (%s); retrying later", what, re.StatusCode, msg)
	}
}

// scrub removes the secrets from a message, should a URL or body echo
// one.
func scrub(msg string, secrets []string) string {
	for _, s := range secrets {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, "***")
		}
	}
	return msg
}

// redactURL drops the user information from a URL for messages.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		if i := strings.LastIndex(u, "@"); i >= 0 {
			return "***" + u[i:]
		}
		return u
	}
	p.User = url.User("***")
	return p.String()
}

// fromSR converts franz-go's schema to a Schema.
func fromSR(s sr.Schema) Schema {
	out := Schema{Type: formatOf(s.Type), Text: s.Schema}
	for _, r := range s.References {
		out.References = append(out.References, Reference{Name: r.Name, Subject: r.Subject, Version: r.Version})
	}
	return out
}

// toSR converts a Schema to franz-go's.
func toSR(s Schema) sr.Schema {
	out := sr.Schema{Schema: s.Text, Type: s.Type.RegistryType()}
	for _, r := range s.References {
		out.References = append(out.References, sr.SchemaReference{Name: r.Name, Subject: r.Subject, Version: r.Version})
	}
	return out
}
