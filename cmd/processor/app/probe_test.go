package app

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamproc/processor/transform"
)

// probeRun runs `processor probe args...` through runCommand, as Main does.
func probeRun(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code, handled := runCommand(append([]string{"probe"}, args...), transform.Default, &out, &errb)
	if !handled {
		t.Fatalf("processor probe %q: not handled", args)
	}
	if out.Len() > 0 {
		t.Errorf("processor probe %q wrote to stdout: %q", args, out.String())
	}
	return code, errb.String()
}

// probeLine fails unless s is one line mentioning every want.
func probeLine(t *testing.T, s string, want ...string) {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") {
		t.Errorf("stderr %q: want one line", s)
	}
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("stderr %q: want it to mention %q", s, w)
		}
	}
}

func TestProbe(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/readyz":
			http.NotFound(w, r)
		case ready.Load():
			_, _ = w.Write([]byte("ok\n"))
		default:
			http.Error(w, "not ready: waiting for the group to assign partitions\nmore detail", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	t.Run("ready", func(t *testing.T) {
		if code, stderr := probeRun(t, "-url", srv.URL+"/readyz"); code != 0 || stderr != "" {
			t.Errorf("ready: exit %d, stderr %q; want 0 and nothing", code, stderr)
		}
	})
	t.Run("not ready", func(t *testing.T) {
		ready.Store(false)
		defer ready.Store(true)
		code, stderr := probeRun(t, "-url", srv.URL+"/readyz")
		if code != 1 {
			t.Errorf("not ready: exit %d, want 1", code)
		}
		probeLine(t, stderr, "not ready", "503", "waiting for the group to assign partitions")
	})
	t.Run("wrong path", func(t *testing.T) {
		code, stderr := probeRun(t, "-url", srv.URL+"/nothing")
		if code != 1 {
			t.Errorf("404: exit %d, want 1", code)
		}
		probeLine(t, stderr, "404")
	})
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		code, stderr := probeRun(t, "-url", "http://"+addr+"/readyz")
		if code != 1 {
			t.Errorf("unreachable: exit %d, want 1", code)
		}
		probeLine(t, stderr, addr, "refused")
	})
	t.Run("slow", func(t *testing.T) {
		hang := make(chan struct{})
		slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
		defer slow.Close()
		defer close(hang)
		start := time.Now()
		code, stderr := probeRun(t, "-url", slow.URL+"/readyz", "-timeout", "200ms")
		if code != 1 || time.Since(start) > 5*time.Second {
			t.Errorf("slow: exit %d after %s, want 1 within the timeout", code, time.Since(start))
		}
		probeLine(t, stderr, "did not answer within 200ms")
	})
	t.Run("PROCESSOR_HTTP_ADDR", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		t.Setenv("PROCESSOR_HTTP_ADDR", ":"+port)
		if code, stderr := probeRun(t); code != 0 {
			t.Errorf("PROCESSOR_HTTP_ADDR=:%s: exit %d, %q; want 0", port, code, stderr)
		}
	})
}

func TestProbeBadArguments(t *testing.T) {
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"-url", "localhost:8080/readyz"}, "-url"},
		{"", []string{"-timeout", "0s"}, "-timeout"},
		{"", []string{"-nope"}, "-nope"},
		{"", []string{"extra"}, "extra"},
		{"8080", nil, "PROCESSOR_HTTP_ADDR"},
		{":0", nil, "PROCESSOR_HTTP_ADDR"},
		{"host:http", nil, "PROCESSOR_HTTP_ADDR"},
	} {
		t.Run(strings.Join(append([]string{c.env}, c.args...), " "), func(t *testing.T) {
			t.Setenv("PROCESSOR_HTTP_ADDR", c.env)
			code, stderr := probeRun(t, c.args...)
			if code != exitConfig || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, %q; want %d naming %s", code, stderr, exitConfig, c.want)
			}
			if strings.Contains(stderr, "goroutine") {
				t.Errorf("a stack trace for a usage mistake: %q", stderr)
			}
		})
	}
	if code, stderr := probeRun(t, "-h"); code != 0 || !strings.Contains(stderr, "usage: processor probe") {
		t.Errorf("probe -h: exit %d, %q", code, stderr)
	}
}

func TestReadyzURL(t *testing.T) {
	for addr, want := range map[string]string{
		"":               "http://127.0.0.1:8080/readyz", // the default, :8080
		":8080":          "http://127.0.0.1:8080/readyz",
		"0.0.0.0:9000":   "http://127.0.0.1:9000/readyz",
		"[::]:9000":      "http://127.0.0.1:9000/readyz",
		"10.1.2.3:8081":  "http://10.1.2.3:8081/readyz",
		"localhost:8082": "http://localhost:8082/readyz",
		"[::1]:8083":     "http://[::1]:8083/readyz",
	} {
		t.Run(addr, func(t *testing.T) {
			t.Setenv("PROCESSOR_HTTP_ADDR", addr)
			got, err := readyzURL()
			if err != nil || got != want {
				t.Errorf("PROCESSOR_HTTP_ADDR=%q: %q, %v; want %q", addr, got, err, want)
			}
		})
	}
}
