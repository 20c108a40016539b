package pgsink

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"
)

// reservedChars are RFC 3986's reserved characters, each of which a
// password may hold (a base64 one holds / and +, a generated one any).
const reservedChars = ":/?#[]@!$&'()*+,;="

// passwordURLs are connection URLs to a port nothing listens on, each
// with a password made of secretA, one reserved character (as written,
// and %-escaped) and secretB: in the userinfo and as a password
// parameter.
func passwordURLs() map[string]string {
	const secretA, secretB = "s3cretA", "s3cretB"
	out := map[string]string{}
	for _, c := range reservedChars {
		for _, pw := range []string{secretA + string(c) + secretB, secretA + url.QueryEscape(string(c)) + secretB, secretA + "%25" + string(c) + secretB} {
			out["userinfo "+pw] = "postgres://u:" + pw + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=2"
			out["userinfo, bad port "+pw] = "postgres://u:" + pw + "@127.0.0.1:notaport/db"
			out["parameter "+pw] = "postgres://u@127.0.0.1:1/db?sslmode=disable&password=" + pw + "&connect_timeout=2"
			out["parameter, bad timeout "+pw] = "postgres://u@127.0.0.1:1/db?password=" + pw + "&connect_timeout=soon"
		}
	}
	return out
}

// Open's errors never show the password, whatever reserved characters it
// holds, escaped or not, in the userinfo or as a parameter: the URL is
// echoed with xxxxx in its place, or not at all when it cannot be told
// where the password ends.
func TestOpenNeverShowsThePassword(t *testing.T) {
	for name, u := range passwordURLs() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := Open(ctx, Options{URL: u, Group: "g"})
		cancel()
		if err == nil {
			t.Errorf("%s: Open(%s) succeeded", name, u)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "s3cret") || strings.Contains(msg, "3cretB") {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}
}

// redactURL keeps what is not secret when the URL says unambiguously
// where the password is, and shows only the scheme when it does not.
func TestRedactURLShapes(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h:5432/db":                        "postgres://u:xxxxx@h:5432/db",
		"postgres://u:se@cret@h/db":                            "postgres://xxxxx",
		"postgres://u:se%40cret@h/db":                          "postgres://u:xxxxx@h/db",
		"postgres://u:se:cr!$&'()*+,;=et@h/db?sslmode=require": "postgres://u:xxxxx@h/db?sslmode=require",
		"postgres://u@h/db?password=secret&sslmode=x":          "postgres://u@h/db?password=xxxxx&sslmode=x",
		"postgres://u@h/db?sslmode=x&PassWord=se/c?r#et":       "postgres://u@h/db?sslmode=x&password=xxxxx",
		"postgres://u@h/db?pass%77ord=secret":                  "postgres://u@h/db?password=xxxxx",
		"postgres://u@h/db?password=sec&ret&connect_timeout=5": "postgres://u@h/db?password=xxxxx&connect_timeout=5",
		"postgres://u@h/db?password=sec&sslmode=x#ret":         "postgres://u@h/db?password=xxxxx",
		"postgres://h/db":                                      "postgres://h/db",
		"postgres://u:secret@h:notaport/db":                    "postgres://u:xxxxx@h:notaport/db",
		"postgres://u:sec/ret@h/db":                            "postgres://xxxxx",
		"postgres://u:sec?ret@h/db":                            "postgres://xxxxx",
		"postgres://u:sec#ret@h/db":                            "postgres://xxxxx",
		"postgres://u@h/db?password=sec@ret":                   "postgres://xxxxx",
		"postgres://u:pw@h/db?application_name=a@b":            "postgres://xxxxx",
		"host=h password=secret":                               "xxxxx",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
