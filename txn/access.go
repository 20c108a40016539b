package txn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Refusals that no retry can fix: the brokers and the client do not accept
// each other (TLS, SASL), or the user may not do what the session needs
// (ACLs). Init returns them at once as an *AccessError instead of retrying
// them as it retries a broker that cannot be reached.

// Access says which part of connecting was refused, and by whom.
type Access int

// The refusals of an AccessError.
const (
	// AccessCredentials: the brokers refused the SASL user name or
	// password (SASL_AUTHENTICATION_FAILED), or closed the connection in
	// the middle of SASL authentication saslDropLimit times in a row,
	// which is how kfake (the embedded broker) refuses them.
	AccessCredentials Access = iota + 1
	// AccessMechanism: the brokers do not take the SASL mechanism
	// (UNSUPPORTED_SASL_MECHANISM), or take no SASL at all on the
	// listener dialed (ILLEGAL_SASL_STATE).
	AccessMechanism
	// AccessDenied: authenticated, but not authorized (ACLs) to use the
	// transactional ID, the cluster, the group or the input topics
	// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
	// GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED).
	AccessDenied
	// AccessUntrusted: the client did not accept a broker's certificate:
	// signed by an authority it does not trust, not valid for the name
	// dialed, or expired.
	AccessUntrusted
	// AccessRejected: the broker ended the TLS handshake with an alert,
	// e.g. it requires a client certificate, or does not accept the one
	// given.
	AccessRejected
)

// AccessError is what Init returns when the brokers and the client do not
// accept each other, or the authenticated user is not authorized: see the
// Access constants. Err is what the client or the broker said; it never
// holds a password.
type AccessError struct {
	Kind Access
	// Resource is what AccessDenied refused, e.g. `transactional ID "x"`,
	// `group "g"` or `input topic "t"`; empty for the other kinds.
	Resource string
	Err      error
}

func (e *AccessError) Error() string {
	var what string
	switch e.Kind {
	case AccessCredentials:
		what = "authentication failed: the brokers refused the SASL user name or password"
	case AccessMechanism:
		what = "authentication failed: the brokers do not take this SASL mechanism on this listener"
	case AccessDenied:
		what = "not authorized to use " + e.Resource
	case AccessUntrusted:
		what = "the broker's TLS certificate is not trusted"
	case AccessRejected:
		what = "the broker refused the TLS handshake"
	default:
		what = "the brokers refused the connection"
	}
	return what + ": " + e.Err.Error()
}

// Unwrap returns what the client or the broker said.
func (e *AccessError) Unwrap() error { return e.Err }

// accessKind tells which refusal err is, or 0 when it is none (a retry may
// fix it).
func accessKind(err error) Access {
	var verify *tls.CertificateVerificationError
	var op *net.OpError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, errSASLDropped):
		return AccessCredentials
	case errors.Is(err, kerr.UnsupportedSaslMechanism), errors.Is(err, kerr.IllegalSaslState):
		return AccessMechanism
	case errors.Is(err, kerr.TransactionalIDAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed),
		errors.Is(err, kerr.GroupAuthorizationFailed), errors.Is(err, kerr.TopicAuthorizationFailed):
		return AccessDenied
	case errors.As(err, &verify):
		return AccessUntrusted
	case errors.As(err, &op) && op.Op == "remote error":
		// crypto/tls reports a TLS alert from the peer this way.
		return AccessRejected
	}
	return 0
}

// checkReadAccess asks the brokers whether the session's principal may
// describe its group and its input topics, which reading them needs: a
// missing ACL then stops the processor at once with an *AccessError,
// instead of failing every join and fetch (which franz-go retries
// forever). Other errors are left to the group client, which retries
// them; so are ACLs that allow describing but not reading, which only the
// join or the fetch finds.
func (s *Session) checkReadAccess(ctx context.Context) error {
	if _, err := kadm.NewClient(s.cl).FetchOffsets(ctx, s.opts.Group); errors.Is(err, kerr.GroupAuthorizationFailed) {
		return &AccessError{Kind: AccessDenied, Resource: fmt.Sprintf("group %q", s.opts.Group), Err: err}
	}
	// A metadata request of its own, as kadm's does not say which topic
	// was refused.
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range s.opts.Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); errors.Is(err, kerr.TopicAuthorizationFailed) && t.Topic != nil {
			return &AccessError{Kind: AccessDenied, Resource: fmt.Sprintf("input topic %q", *t.Topic), Err: err}
		}
	}
	return nil
}

// saslDropLimit is how many connections in a row the broker may close in
// the middle of SASL authentication before the credentials count as
// refused.
const saslDropLimit = 3

// errSASLDropped is the refusal of a broker that closes the connection
// during SASL authentication instead of answering SASL_AUTHENTICATION_FAILED.
var errSASLDropped = fmt.Errorf("the broker closed the connection during SASL authentication %d times in a row, which is how some brokers (such as the embedded one) refuse credentials", saslDropLimit)

// saslWatch is a client hook that notices a broker closing connections in
// the middle of SASL authentication. Apache Kafka answers wrong
// credentials with SASL_AUTHENTICATION_FAILED, which franz-go returns;
// kfake just closes the connection, which franz-go retries until the
// request's context ends. saslDropLimit such closes in a row, with no
// request answered after authentication in between, cancel the Init
// attempt that is armed with the cause errSASLDropped.
type saslWatch struct {
	drops  atomic.Int32
	mu     sync.Mutex
	cancel context.CancelCauseFunc // of the armed Init attempt; nil when none
}

// OnBrokerRead implements kgo.HookBrokerRead.
func (w *saslWatch) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	switch kmsg.Key(key) {
	case kmsg.SASLAuthenticate:
		if err != nil && errors.Is(err, io.EOF) && w.drops.Add(1) >= saslDropLimit {
			w.fire()
		}
	case kmsg.SASLHandshake, kmsg.ApiVersions:
	default:
		if err == nil { // authenticated, or no SASL at all
			w.drops.Store(0)
		}
	}
}

// arm makes cancel the one to call when the drops reach the limit; it
// calls it at once if they already have.
func (w *saslWatch) arm(cancel context.CancelCauseFunc) {
	w.mu.Lock()
	w.cancel = cancel
	w.mu.Unlock()
	if w.drops.Load() >= saslDropLimit {
		w.fire()
	}
}

// disarm forgets the cancel function of arm.
func (w *saslWatch) disarm() {
	w.mu.Lock()
	w.cancel = nil
	w.mu.Unlock()
}

func (w *saslWatch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel(errSASLDropped)
	}
}
