package app

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// The status page (/) and /status show topics, transactional and member
// IDs; PROCESSOR_HTTP_TOKEN_FILE keeps them from whoever reaches the port
// without the token. /metrics, /healthz and /readyz stay open: scrapers
// and probes carry no token, and `processor probe` reads /readyz.

// tokenRecheck is how often, at most, the token file is looked at again
// for a change (a stat; a read only when it changed). A rotated Kubernetes
// Secret is seen within this much after the kubelet updates the file.
const tokenRecheck = time.Second

// httpToken is the bearer token of PROCESSOR_HTTP_TOKEN_FILE: its SHA-256
// only, so that the comparison takes the same time whatever the lengths,
// and the token itself is kept nowhere a log or a dump could show it.
type httpToken struct {
	path string

	mu      sync.Mutex
	sum     [sha256.Size]byte
	mod     time.Time // of the file when it was read
	size    int64
	checked time.Time
}

// loadHTTPToken reads the token file at start: nil without one, a
// *settings.Error naming PROCESSOR_HTTP_TOKEN_FILE when it cannot be read or
// is empty.
func loadHTTPToken(path string) (*httpToken, error) {
	if path == "" {
		return nil, nil
	}
	t := &httpToken{path: path}
	if err := t.read(time.Now()); err != nil {
		return nil, err
	}
	return t, nil
}

// read reads the file and keeps its token's hash, its time and size.
func (t *httpToken) read(now time.Time) error {
	fi, err := os.Stat(t.path)
	if err != nil {
		return fileError("HTTP_TOKEN_FILE", t.path, "a readable file holding the bearer token", err)
	}
	tok, err := readPassword("HTTP_TOKEN_FILE", t.path, "the bearer token")
	if err != nil {
		return err
	}
	t.sum, t.mod, t.size, t.checked = sha256.Sum256([]byte(tok)), fi.ModTime(), fi.Size(), now
	return nil
}

// current is the token's hash, the file read again first when it has
// changed since (looked at no more than once per tokenRecheck). A file
// that is gone or empty for a moment, as while a Secret is updated, leaves
// the token as it was.
func (t *httpToken) current(now time.Time) [sha256.Size]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now.Sub(t.checked) >= tokenRecheck {
		t.checked = now
		if fi, err := os.Stat(t.path); err == nil && (!fi.ModTime().Equal(t.mod) || fi.Size() != t.size) {
			old := t.sum
			if t.read(now) != nil {
				t.sum = old
			}
		}
	}
	return t.sum
}

// allows says whether r carries the token: Authorization: Bearer <token>.
func (t *httpToken) allows(r *http.Request) bool {
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	want := t.current(time.Now())
	sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// guard serves h only to requests with the token, others 401 with a
// WWW-Authenticate challenge; without a token (nil) it is h.
func (t *httpToken) guard(h http.HandlerFunc) http.HandlerFunc {
	if t == nil {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if !t.allows(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="processor"`)
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "unauthorized: this page needs Authorization: Bearer <the token of PROCESSOR_HTTP_TOKEN_FILE>", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}
