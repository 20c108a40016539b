package app

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/settings"
)

// probeTimeout bounds one probe: connecting, the request and the answer.
// Below the 5 s a Compose or Kubernetes healthcheck allows by default.
const probeTimeout = 2 * time.Second

// probeUsage is the help of processor probe.
const probeUsage = `usage: processor probe [-url URL] [-timeout D]

GETs /readyz of the processor running on this host (the port of
PROCESSOR_HTTP_ADDR, default :8080) and exits 0 when it answers 200,
1 otherwise with one line on stderr saying why; 2 for a bad flag or
PROCESSOR_HTTP_ADDR. For container healthchecks, where the image has no
shell or HTTP client.`

// runProbe is `processor probe`: one GET of /readyz, exit 0 when the
// processor is ready, 1 when it is not or does not answer, 2 for a bad
// flag or PROCESSOR_HTTP_ADDR.
func runProbe(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	target := fs.String("url", "", "the URL to GET instead of http://127.0.0.1:<port of PROCESSOR_HTTP_ADDR>/readyz")
	timeout := fs.Duration("timeout", probeTimeout, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, probeUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "processor probe: %v\n%s\n", err, probeUsage)
		return exitConfig
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "processor probe: unexpected arguments %q\n%s\n", fs.Args(), probeUsage)
		return exitConfig
	}
	if *timeout <= 0 {
		fmt.Fprintf(stderr, "processor probe: -timeout %s: want a positive Go duration such as 2s\n", *timeout)
		return exitConfig
	}
	u := *target
	if u == "" {
		var err error
		if u, err = readyzURL(); err != nil {
			fmt.Fprintf(stderr, "processor probe: %v\n", err)
			return exitConfig
		}
	} else if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		fmt.Fprintf(stderr, "processor probe: -url %q: want an http:// or https:// URL such as http://127.0.0.1:8080/readyz\n", u)
		return exitConfig
	}
	if err := probe(u, *timeout); err != nil {
		fmt.Fprintf(stderr, "processor probe: not ready: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

// readyzURL returns the URL of /readyz on this host from
// PROCESSOR_HTTP_ADDR (read through config, its default when unset): the
// loopback address when the processor listens on every address, the
// host it names otherwise.
func readyzURL() (string, error) {
	var s struct{ HTTPAddr string }
	s.HTTPAddr, _ = config.Env(config.EnvName)("HTTP_ADDR")
	name := config.EnvName("HTTP_ADDR")
	if s.HTTPAddr == "" {
		for _, v := range config.Reference() {
			if v.Name == name {
				s.HTTPAddr = v.Default
			}
		}
	}
	host, port, err := net.SplitHostPort(s.HTTPAddr)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
		return "", &settings.Error{Var: name, Value: s.HTTPAddr, Want: settings.Say("host:port or :port with a port from 1 to 65535 (the processor's HTTP address, probed on this host)")}
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/readyz", nil
}

// probe GETs u within timeout: nil when it answers 200, else an error
// saying what it answered (the first line of the body: /readyz says what
// the processor waits for) or why it could not.
func probe(u string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	client := &http.Client{
		// Straight to the processor: no proxy from the environment, no
		// keep-alive, no redirect followed.
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s did not answer within %s", u, timeout)
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	line, _ := bufio.NewReader(io.LimitReader(resp.Body, 512)).ReadString('\n')
	if line = strings.TrimSpace(line); line != "" {
		return fmt.Errorf("%s answered %s: %s", u, resp.Status, line)
	}
	return fmt.Errorf("%s answered %s", u, resp.Status)
}
