package deploy

import (
	"maps"
	"path"
	"strings"
	"testing"

	"github.com/streamproc/processor/config"
)

// oauthHelmValues turn on the chart's OAUTHBEARER with the values the
// kustomize component has, and the component's Secret name.
var oauthHelmValues = []string{"--set", "fullnameOverride=processor,kafka.oauth.enabled=true,kafka.oauth.tokenURL=https://idp.example.com/oauth2/token," +
	"kafka.oauth.clientId=orders-enricher,kafka.oauth.existingSecret=processor-kafka-oauth"}

// oauthPod is what a rendering with OAUTHBEARER gives the processor: its
// SASL settings and where the client secret's file comes from.
type oauthPod struct {
	sasl   map[string]string // the PROCESSOR_SASL_* variables that are not empty
	secret string            // Secret/key of PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE's file
}

// checkOAuthPod checks the processor's settings in objs as the processor
// would (config.Load, with OAUTHBEARER), that no user or password is set,
// and that the client secret's file is a key of a mounted Secret; it
// returns what it found.
func checkOAuthPod(t *testing.T, objs []k8sObject) oauthPod {
	t.Helper()
	sts, spec, c := theStatefulSet(t, objs)
	e := podEnv(t, objs, sts, c)
	checkKnownVars(t, []envSet{e})
	checkConfigLoads(t, []envSet{e})
	got := oauthPod{sasl: map[string]string{}}
	for k, v := range e.vars {
		if strings.HasPrefix(k, config.EnvName("SASL_")) && v != "" {
			got.sasl[k] = v
		}
	}
	if m := got.sasl[config.EnvName("SASL_MECHANISM")]; m != config.OAuthBearer {
		t.Errorf("%s: PROCESSOR_SASL_MECHANISM=%q, want OAUTHBEARER", sts, m)
	}
	for _, v := range []string{"SASL_USERNAME", "SASL_PASSWORD", "SASL_PASSWORD_FILE"} {
		if got.sasl[config.EnvName(v)] != "" {
			t.Errorf("%s: %s is set with OAUTHBEARER", sts, config.EnvName(v))
		}
	}
	file := got.sasl[config.EnvName("SASL_OAUTH_CLIENT_SECRET_FILE")]
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Template.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			for _, it := range v.Secret.Items {
				if path.Join(m.MountPath, it.Path) == file {
					got.secret = v.Secret.SecretName + "/" + it.Key
				}
			}
		}
	}
	if got.secret == "" {
		t.Errorf("%s: PROCESSOR_SASL_OAUTH_CLIENT_SECRET_FILE=%q is no file of a mounted Secret", sts, file)
	}
	return got
}

// The kustomize component oauth and the chart's kafka.oauth give the
// processor the same valid OAUTHBEARER settings, without a user or a
// password, with the client secret from the same Secret's key.
func TestOAuthComponentMatchesHelm(t *testing.T) {
	k := checkOAuthPod(t, kustomizeBuild(t, overlay(t, []string{"oauth"}, "")))
	h := checkOAuthPod(t, helmTemplate(t, "orders-enricher", oauthHelmValues...))
	if !maps.Equal(k.sasl, h.sasl) || k.secret != h.secret {
		t.Errorf("the kustomize component gives %v from %s,\nthe chart %v from %s", k.sasl, k.secret, h.sasl, h.secret)
	}
	if k.secret != "processor-kafka-oauth/client-secret" {
		t.Errorf("the client secret comes from %s, want processor-kafka-oauth/client-secret (docs/deploy.md)", k.secret)
	}
}

// The chart makes the client secret's Secret from kafka.oauth.clientSecret
// (TestHelmRefuses: and refuses kafka.oauth without its token URL, client
// id or secret).
func TestHelmOAuthSecret(t *testing.T) {
	objs := helmTemplate(t, "orders-enricher", "--set", "fullnameOverride=processor,kafka.oauth.enabled=true,kafka.oauth.tokenURL=https://idp/token,"+
		"kafka.oauth.clientId=c,kafka.oauth.clientSecret=s3cret")
	got := checkOAuthPod(t, objs)
	sec, ok := findObject(objs, "Secret", strings.Split(got.secret, "/")[0])
	if !ok || !secretKeys(sec)["client-secret"] {
		t.Errorf("the chart made no Secret with the key client-secret (%s)", got.secret)
	}
}
