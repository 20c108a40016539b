package pgsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The connection URL: parsed into the pool's configuration, and shown
// only with its password hidden.

// poolConfig parses the URL, applies the password and the sink's pool
// settings.
func poolConfig(o Options) (*pgxpool.Config, error) {
	badURL := func(want string) error {
		return settingError(SettingURL, redactURL(o.URL), want)
	}
	const urlWant = "a URL such as postgres://user:password@host:5432/database?sslmode=verify-full"
	if !strings.HasPrefix(o.URL, "postgres://") && !strings.HasPrefix(o.URL, "postgresql://") {
		return nil, badURL(urlWant)
	}
	if _, ok := splitURL(o.URL); !ok {
		return nil, badURL(urlWant + ", with the reserved characters of the password %-encoded (%2F for /, %3F for ?, %23 for #, %40 for @, ...): an @ after the first /, ? or # leaves it unclear where the password ends; %-encode an @ in the database name or a parameter as %40")
	}
	if _, err := url.Parse(o.URL); err != nil {
		return nil, badURL(urlWant + " (special characters in the password %-encoded)")
	}
	cfg, err := pgxpool.ParseConfig(o.URL)
	if err != nil {
		var pce *pgconn.ParseConfigError
		why := ""
		if errors.As(err, &pce) && pce.Unwrap() != nil {
			why = ": " + scrub(pce.Unwrap().Error(), o.URL)
		}
		return nil, badURL(urlWant + why)
	}
	if o.Password != "" {
		cfg.ConnConfig.Password = o.Password
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	// Everything the sink sends is UTF-8 (the values, the headers as
	// JSON, the dead letters' errors): the server converts it to the
	// database's encoding, and refuses what that lacks.
	cfg.ConnConfig.RuntimeParams["client_encoding"] = "UTF8"
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "processor"
	}
	if err := bound(cfg.ConnConfig); err != nil {
		return nil, badURL(urlWant + ": " + err.Error())
	}
	if o.PasswordFile != "" {
		cfg.BeforeConnect = rereadPassword(o.PasswordFile, o.Logger)
	}
	cfg.MaxConns = maxConns
	cfg.MinConns = 0
	cfg.HealthCheckPeriod = healthCheckPeriod
	return cfg, nil
}

// sessionBounds are the server settings every connection of the sink
// starts with, unless the URL sets them (as parameters of their own
// names, e.g. ?idle_in_transaction_session_timeout=30s): they bound how
// long an instance that stops between two of its statements (frozen,
// paused, cut off by the network) can hold its transaction, and with it
// the row locks of its partitions' offsets, which the partitions' new
// owner waits on. The server ends such a transaction after
// idle_in_transaction_session_timeout, and a connection whose other end
// stopped answering after tcp_keepalives_idle + interval x count
// (5 + 2x3 = 11 s), instead of the system's two hours.
var sessionBounds = [...]struct{ name, value string }{
	{"idle_in_transaction_session_timeout", "10s"},
	{"tcp_keepalives_idle", "5"},
	{"tcp_keepalives_interval", "2"},
	{"tcp_keepalives_count", "3"},
}

// clientKeepalives are libpq's keepalive parameters, which pgx would send
// to the server as settings (which it does not know): the sink applies
// them to its own TCP connections instead, as libpq does. The defaults
// match sessionBounds, so that each side notices a dead peer within
// seconds.
var clientKeepalives = map[string]int{"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3}

// bound applies sessionBounds and clientKeepalives to c.
func bound(c *pgx.ConnConfig) error {
	for _, b := range sessionBounds {
		if _, set := c.RuntimeParams[b.name]; !set {
			c.RuntimeParams[b.name] = b.value
		}
	}
	ka := maps.Clone(clientKeepalives)
	for name := range clientKeepalives {
		v, set := c.RuntimeParams[name]
		if !set {
			continue
		}
		delete(c.RuntimeParams, name)
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || (name == "keepalives" && n > 1) {
			return fmt.Errorf("%s=%s is not a number of seconds (keepalives: 0 or 1)", name, v)
		}
		ka[name] = n
	}
	d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: ka["keepalives"] == 1,
		Idle: time.Duration(ka["keepalives_idle"]) * time.Second, Interval: time.Duration(ka["keepalives_interval"]) * time.Second,
		Count: ka["keepalives_count"]}}
	if !d.KeepAliveConfig.Enable {
		d.KeepAlive = -1
	}
	c.DialFunc = d.DialContext
	return nil
}

// rereadPassword is the pool's BeforeConnect with a password file: every
// new connection reads the file again, so that a rotated password (a
// Secret updated in place) is used from the next connection on. A file
// that cannot be read, or is empty, leaves the last password, with a
// warning.
func rereadPassword(path string, log *slog.Logger) func(context.Context, *pgx.ConnConfig) error {
	var mu sync.Mutex
	last := "" // the last password read; "" for the one the pool started with
	return func(_ context.Context, c *pgx.ConnConfig) error {
		mu.Lock()
		defer mu.Unlock()
		pw, err := ReadPasswordFile(path)
		switch {
		case err == nil:
			last = pw
		case log != nil:
			log.Warn("cannot read the database password file again; using the last password", "err", err.Error())
		}
		if last != "" {
			c.Password = last // c is a copy of the pool's configuration
		}
		return nil
	}
}

// ReadPasswordFile returns the password in the file at path, without one
// trailing newline; an empty password is an error.
func ReadPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", errors.New("it is empty")
	}
	return pw, nil
}

// target is user@host:port/database of a connection configuration.
func target(c *pgx.ConnConfig) string {
	host := c.Host
	if !strings.HasPrefix(host, "/") {
		host = net.JoinHostPort(host, strconv.Itoa(int(c.Port)))
	} else {
		host += ":" + strconv.Itoa(int(c.Port))
	}
	return c.User + "@" + host + "/" + c.Database
}

// urlParts are the pieces of a connection URL that splitURL finds.
type urlParts struct {
	scheme    string
	userinfo  string // before the authority's @, "" when none
	hasUser   bool
	authority string // the hosts and ports, after the userinfo
	rest      string // the path, query and fragment
}

// splitURL splits a connection URL scheme://[userinfo@]hosts[/path][?query]
// without trusting it to be well formed. libpq (and pgx, which parses as
// libpq does) ends the userinfo at the first @ before any /, Go's net/url
// at the last @ before the first /, ? or #: ok is false unless the two
// agree and no @ comes later, since a password with an unescaped @, /, ?
// or # would otherwise show as a host, a port, a database name or a
// parameter.
func splitURL(s string) (urlParts, bool) {
	var p urlParts
	scheme, rest, found := strings.Cut(s, "://")
	if !found {
		return p, false
	}
	p.scheme = scheme
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.IndexByte(rest, '@')
	if at > end || strings.Count(rest, "@") > 1 {
		return p, false
	}
	p.authority, p.rest = rest[:end], rest[end:]
	if at >= 0 {
		p.userinfo, p.authority, p.hasUser = rest[:at], rest[at+1:end], true
	}
	return p, true
}

// redactURL returns the connection URL s fit to show: the password, in
// the userinfo or as a password parameter, replaced by xxxxx. A URL that
// splitURL cannot tell the password of shows its scheme alone. Parameters
// after a password parameter show only when their name is one libpq
// knows, since a password's unescaped & would make the rest of it look
// like parameters.
func redactURL(s string) string {
	p, ok := splitURL(s)
	if !ok {
		if p.scheme != "" && !strings.ContainsAny(p.scheme, ":/?#@") {
			return p.scheme + "://xxxxx"
		}
		return "xxxxx"
	}
	var b strings.Builder
	b.WriteString(p.scheme + "://")
	if p.hasUser {
		user, _, hasPassword := strings.Cut(p.userinfo, ":")
		b.WriteString(user)
		if hasPassword {
			b.WriteString(":xxxxx")
		}
		b.WriteByte('@')
	}
	b.WriteString(p.authority)
	path, query, hasQuery := strings.Cut(p.rest, "?")
	b.WriteString(path)
	if hasQuery {
		q, _ := redactQuery(query)
		b.WriteByte('?')
		b.WriteString(q)
	}
	return b.String()
}

// redactQuery replaces the value of every password parameter of a URL's
// query (and what may be the rest of it: the parameters after it whose
// name libpq does not know, or that hold a #) with xxxxx. It returns the
// pieces it hid too, for scrub.
func redactQuery(q string) (string, []string) {
	var out, hidden []string
	secret := false // a password parameter came before
	for _, kv := range strings.Split(q, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if name, err := url.QueryUnescape(k); err == nil {
			k = name
		}
		k = strings.ToLower(k)
		switch {
		case k == "password":
			out = append(out, "password=xxxxx")
			hidden = append(hidden, v)
			secret = true
		case secret && (!libpqParams[k] || strings.ContainsRune(kv, '#')):
			hidden = append(hidden, kv) // maybe the password's
		default:
			out = append(out, kv)
		}
	}
	return strings.Join(out, "&"), hidden
}

// libpqParams are the names of libpq's connection parameters (and pgx's
// pool settings) that may follow a password parameter in a URL.
var libpqParams = map[string]bool{
	"host": true, "hostaddr": true, "port": true, "dbname": true, "user": true, "passfile": true,
	"channel_binding": true, "connect_timeout": true, "client_encoding": true, "options": true,
	"application_name": true, "fallback_application_name": true, "keepalives": true,
	"keepalives_idle": true, "keepalives_interval": true, "keepalives_count": true,
	"tcp_user_timeout": true, "replication": true, "gssencmode": true, "sslmode": true,
	"requiressl": true, "sslcompression": true, "sslcert": true, "sslkey": true, "sslrootcert": true,
	"sslcrl": true, "sslcrldir": true, "sslsni": true, "requirepeer": true, "ssl_min_protocol_version": true,
	"ssl_max_protocol_version": true, "krbsrvname": true, "gsslib": true, "service": true,
	"target_session_attrs": true, "load_balance_hosts": true, "search_path": true, "timezone": true,
	"pool_max_conns": true, "pool_min_conns": true, "pool_max_conn_lifetime": true,
	"pool_max_conn_idle_time": true, "pool_health_check_period": true, "statement_cache_capacity": true,
	"default_query_exec_mode": true,
}

// scrub removes from msg, text about the URL u (a driver's error), every
// form of u's password: u itself becomes redactURL(u), and the password
// (as written and %-decoded) and anything redactQuery hides become xxxxx.
func scrub(msg, u string) string {
	msg = strings.ReplaceAll(msg, u, redactURL(u))
	var secrets []string
	if p, ok := splitURL(u); ok {
		if _, pw, has := strings.Cut(p.userinfo, ":"); has {
			secrets = append(secrets, pw)
		}
		if _, q, has := strings.Cut(p.rest, "?"); has {
			_, hidden := redactQuery(q)
			secrets = append(secrets, hidden...)
		}
	}
	for _, pw := range secrets {
		for _, part := range strings.FieldsFunc(pw, func(r rune) bool { return r == '=' || r == '#' }) {
			secrets = append(secrets, part)
		}
		if dec, err := url.PathUnescape(pw); err == nil && dec != pw {
			secrets = append(secrets, dec)
		}
		if dec, err := url.QueryUnescape(pw); err == nil && dec != pw {
			secrets = append(secrets, dec)
		}
	}
	// The longest first, so that a part does not leave the rest of a
	// longer one.
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, pw := range secrets {
		if pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}
