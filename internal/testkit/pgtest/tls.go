package pgtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// CA is a certificate authority of one test's own, for a server's TLS.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is its certificate, PEM, in a file of the test's (a URL's
	// sslrootcert).
	File string
}

// NewCA makes a CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, File: filepath.Join(t.TempDir(), "ca.pem")}
	if err := os.WriteFile(ca.File, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return ca
}

// ServerCert returns a server certificate the CA signed for hosts (IP
// addresses or names), valid until notAfter, and its key: PEM.
func (ca *CA) ServerCert(t testing.TB, notAfter time.Time, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// UseCertificate has the server (started with ssl off, as pg.sh does)
// serve TLS with this certificate and key from now on: it writes them
// into its data folder, owned by the server's user, turns ssl on and
// reloads, and waits until a new connection gets the certificate. Called
// again, it replaces the certificate (a rotation); the connections open
// before keep theirs.
func (s *Server) UseCertificate(t testing.TB, certPEM, keyPEM []byte) {
	t.Helper()
	dir := filepath.Join(s.Dir(t), "data")
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("the server's data folder: %v", err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	n := time.Now().UnixNano()
	certFile, keyFile := filepath.Join(dir, "test-"+itoa(n)+".crt"), filepath.Join(dir, "test-"+itoa(n)+".key")
	for f, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(f, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"ALTER SYSTEM SET ssl = on", "ALTER SYSTEM SET ssl_cert_file = '" + certFile + "'",
		"ALTER SYSTEM SET ssl_key_file = '" + keyFile + "'", "SELECT pg_reload_conf()"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The reload is asynchronous: wait until the server's setting shows
	// the new certificate.
	for {
		var got string
		if err := conn.QueryRow(ctx, "SELECT setting FROM pg_settings WHERE name = 'ssl_cert_file'").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == certFile {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the server did not take the certificate %s", certFile)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func itoa(n int64) string { return big.NewInt(n).String() }
