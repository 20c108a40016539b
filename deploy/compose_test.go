package deploy

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/streamproc/processor/cmd/processor/app"
	"github.com/streamproc/processor/config"
	"github.com/streamproc/processor/transform"
)

const (
	composeFile    = "compose.yaml"
	promConfigFile = "prometheus/prometheus.yml"
	kafkaPomFile   = "../integration/kafka/pom.xml"
	loadgenMain    = "../cmd/loadgen/main.go"
	// The broker address the processors use inside the Compose network.
	composeBrokers = "kafka:9092"
	// The oldest Apache Kafka image the stack may use.
	minKafkaVersion = "4.1.0"
)

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string            `yaml:"context"`
		Dockerfile string            `yaml:"dockerfile"`
		Target     string            `yaml:"target"`
		Args       map[string]string `yaml:"args"`
	} `yaml:"build"`
	Hostname    string            `yaml:"hostname"`
	Environment map[string]string `yaml:"environment"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Ports       []string `yaml:"ports"`
	Volumes     []string `yaml:"volumes"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		StartPeriod string   `yaml:"start_period"`
		Retries     int      `yaml:"retries"`
	} `yaml:"healthcheck"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

type composeProject struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

func loadCompose(t *testing.T) composeProject {
	t.Helper()
	var c composeProject
	if err := yaml.Unmarshal([]byte(readFile(t, composeFile)), &c); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	if len(c.Services) == 0 {
		t.Fatalf("%s: no services", composeFile)
	}
	return c
}

// processors returns the services that run the processor (those with
// PROCESSOR_* variables), sorted by name.
func (c composeProject) processors() []string {
	var out []string
	for name, s := range c.Services {
		for k := range s.Environment {
			if strings.HasPrefix(k, config.Prefix+"_") {
				out = append(out, name)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// env returns a service's environment as an envSet.
func (c composeProject) env(name string) envSet {
	e := newEnvSet(composeFile + " service " + name)
	for k, v := range c.Services[name].Environment {
		e.set(k, v, e.where)
	}
	return e
}

func (c composeProject) sortedNames() []string {
	var names []string
	for n := range c.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// mounts returns a service's bind mounts: host path (relative to deploy/)
// to container path.
func mounts(s composeService) map[string]string {
	out := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && (strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/")) {
			out[parts[0]] = parts[1]
		}
	}
	return out
}

// semver compares dotted version numbers: -1, 0 or 1.
func semver(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		var x, y int
		if i < len(pa) {
			x, _ = strconv.Atoi(pa[i])
		}
		if i < len(pb) {
			y, _ = strconv.Atoi(pb[i])
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

func TestComposeProcessorVariablesExist(t *testing.T) {
	c := loadCompose(t)
	var sets []envSet
	for _, name := range c.processors() {
		sets = append(sets, c.env(name))
	}
	checkKnownVars(t, sets)
	checkConfigLoads(t, sets)
}

func TestComposeProcessors(t *testing.T) {
	c := loadCompose(t)
	df := parseDockerfile(t, dockerfileFile)
	procs := c.processors()
	if len(procs) != 2 {
		t.Fatalf("%s: services with PROCESSOR_* variables: %v, want two processor instances", composeFile, procs)
	}
	seen := map[string]map[string]string{} // variable -> value -> service
	for _, name := range procs {
		s := c.Services[name]
		e := c.env(name)
		where := e.where

		// Built from deploy/Dockerfile, a target whose entrypoint is the
		// processor.
		if s.Build == nil || path.Clean(path.Join("deploy", s.Build.Context, s.Build.Dockerfile)) != "deploy/Dockerfile" && path.Clean(path.Join(s.Build.Context, s.Build.Dockerfile)) != "../deploy/Dockerfile" {
			t.Errorf("%s: not built from deploy/Dockerfile with the repository as context: %+v", where, s.Build)
		} else if st := df.stage(s.Build.Target); st == nil {
			t.Errorf("%s: build target %q is no stage of %s", where, s.Build.Target, dockerfileFile)
		} else if ep := df.entrypoint(t, st); !slices.Equal(ep, []string{"/processor"}) {
			t.Errorf("%s: build target %q runs %q, not the processor", where, s.Build.Target, ep)
		}

		if got := e.get(config.EnvName("BROKERS")); got != composeBrokers {
			t.Errorf("%s: PROCESSOR_BROKERS=%q, want %s", where, got, composeBrokers)
		}
		for _, v := range []string{"GROUP", "TRANSACTIONAL_ID", "INSTANCE_ID", "INPUT_TOPICS", "OUTPUT_TOPIC"} {
			name := config.EnvName(v)
			val := e.vars[name]
			if val == "" {
				t.Errorf("%s: %s is not set", where, name)
			}
			if seen[name] == nil {
				seen[name] = map[string]string{}
			}
			seen[name][val] = s.Hostname
		}

		// Stopping must not SIGKILL the processor mid-commit.
		grace, err := time.ParseDuration(s.StopGracePeriod)
		if bound := cleanStopBound(transactionTimeout(t, e)); err != nil || grace <= bound {
			t.Errorf("%s: stop_grace_period %q, want longer than a clean stop can take with PROCESSOR_TRANSACTION_TIMEOUT=%s: %s",
				where, s.StopGracePeriod, e.get(config.EnvName("TRANSACTION_TIMEOUT")), bound)
		}
		if dep := s.DependsOn["topics"]; dep.Condition != "service_completed_successfully" {
			t.Errorf("%s: must depend on service topics with condition service_completed_successfully (the processor creates no topics)", where)
		}
		if s.Hostname != name {
			t.Errorf("%s: hostname %q, want %q, the name Prometheus scrapes it by", where, s.Hostname, name)
		}

		// A WebAssembly module the image holds.
		if module, ok := e.vars[app.PluginVar(transform.Entry{Name: "wasm"}.Plugin(), "MODULE")]; ok {
			dir, plugins := pluginsDir(t, df)
			name := strings.TrimSuffix(path.Base(module), ".wasm")
			if s.Build == nil || s.Build.Target != "with-plugins" || path.Dir(module) != dir || !slices.Contains(plugins, name) {
				t.Errorf("%s: PROCESSOR_WASM_MODULE=%s: the with-plugins target holds %s/<name>.wasm for %v", where, module, dir, plugins)
			}
		}
	}
	for _, v := range []string{"GROUP", "INPUT_TOPICS", "OUTPUT_TOPIC"} {
		if vals := seen[config.EnvName(v)]; len(vals) != 1 {
			t.Errorf("%s: the instances have different %s: %v; one group processes one set of topics", composeFile, config.EnvName(v), vals)
		}
	}
	for _, v := range []string{"TRANSACTIONAL_ID", "INSTANCE_ID"} {
		if vals := seen[config.EnvName(v)]; len(vals) != len(procs) {
			t.Errorf("%s: %s must be unique per instance: %v", composeFile, config.EnvName(v), vals)
		}
	}
}

// TestComposeProcessorHealthcheck: each processor service is healthy when
// processor probe, run inside its container (the image has no shell or
// HTTP client), finds /readyz ready on the port of its
// PROCESSOR_HTTP_ADDR, within a timeout above the probe's own.
func TestComposeProcessorHealthcheck(t *testing.T) {
	c := loadCompose(t)
	df := parseDockerfile(t, dockerfileFile)
	for _, name := range c.processors() {
		s := c.Services[name]
		hc := s.Healthcheck
		if hc == nil {
			t.Errorf("%s: service %s has no healthcheck; want [CMD /processor probe]", composeFile, name)
			continue
		}
		binary := "/processor"
		if s.Build != nil && df.stage(s.Build.Target) != nil {
			binary = df.entrypoint(t, df.stage(s.Build.Target))[0]
		}
		if want := []string{"CMD", binary, "probe"}; !slices.Equal(hc.Test, want) {
			t.Errorf("%s: service %s: healthcheck test %q, want %q (exec form: no shell in the image)", composeFile, name, hc.Test, want)
		}
		if port := httpPort(t, c.env(name)); port == 0 {
			t.Errorf("%s: service %s: PROCESSOR_HTTP_ADDR has no port to probe", composeFile, name)
		}
		if d, err := time.ParseDuration(hc.Timeout); err != nil || d <= 2*time.Second {
			t.Errorf("%s: service %s: healthcheck timeout %q, want a duration above processor probe's 2s", composeFile, name, hc.Timeout)
		}
		if d, err := time.ParseDuration(hc.StartPeriod); err != nil || d < 30*time.Second {
			t.Errorf("%s: service %s: healthcheck start_period %q, want at least 30s: joining the group takes a while", composeFile, name, hc.StartPeriod)
		}
	}
	// TestImageBinary runs processor probe, built as the image builds it,
	// against a processor before it runs and once it is ready.
}

func TestComposeKafka(t *testing.T) {
	c := loadCompose(t)
	kafka, ok := c.Services["kafka"]
	if !ok {
		t.Fatalf("%s: no service kafka (PROCESSOR_BROKERS=%s)", composeFile, composeBrokers)
	}
	image, tag, _ := strings.Cut(kafka.Image, ":")
	if image != "apache/kafka" {
		t.Errorf("%s: kafka runs %s, want the official apache/kafka image", composeFile, kafka.Image)
	}
	if semver(tag, minKafkaVersion) < 0 {
		t.Errorf("%s: apache/kafka:%s, want %s or later", composeFile, tag, minKafkaVersion)
	}
	if m := regexp.MustCompile(`<kafka.version>([^<]+)</kafka.version>`).FindStringSubmatch(readFile(t, kafkaPomFile)); m == nil {
		t.Errorf("%s: no kafka.version", kafkaPomFile)
	} else if m[1] != tag {
		t.Errorf("%s: apache/kafka:%s, but the integration suite runs against Kafka %s (%s): keep them equal", composeFile, tag, m[1], kafkaPomFile)
	}
	env := kafka.Environment
	if env["KAFKA_PROCESS_ROLES"] != "broker,controller" {
		t.Errorf("%s: kafka: KAFKA_PROCESS_ROLES=%q, want broker,controller (one KRaft node)", composeFile, env["KAFKA_PROCESS_ROLES"])
	}
	if !strings.Contains(","+env["KAFKA_ADVERTISED_LISTENERS"]+",", "://"+composeBrokers+",") {
		t.Errorf("%s: kafka advertises %q; the processors connect to %s", composeFile, env["KAFKA_ADVERTISED_LISTENERS"], composeBrokers)
	}
	// One broker: internal topics with one replica, or transactions and
	// groups cannot start.
	for _, k := range []string{"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"} {
		if env[k] != "1" {
			t.Errorf("%s: kafka: %s=%q, want 1 on a single node", composeFile, k, env[k])
		}
	}
	if kafka.Healthcheck == nil {
		t.Errorf("%s: kafka has no healthcheck; the topics service waits for it", composeFile)
	}

	// The topics service creates every topic the processors need.
	topics, ok := c.Services["topics"]
	if !ok {
		t.Fatalf("%s: no service topics", composeFile)
	}
	if topics.Image != kafka.Image {
		t.Errorf("%s: topics runs %s, want the broker's image %s (its kafka-topics.sh)", composeFile, topics.Image, kafka.Image)
	}
	if topics.DependsOn["kafka"].Condition != "service_healthy" {
		t.Errorf("%s: topics must wait for kafka to be healthy", composeFile)
	}
	script := strings.Join(append(slices.Clone(topics.Entrypoint), topics.Command...), " ")
	created := map[string]bool{}
	for _, m := range regexp.MustCompile(`/opt/kafka/bin/kafka-topics\.sh\s[^\n]*--create[^\n]*`).FindAllString(script, -1) {
		if !strings.Contains(m, "--bootstrap-server "+composeBrokers) {
			t.Errorf("%s: topics: %q does not use --bootstrap-server %s", composeFile, m, composeBrokers)
		}
		if t := regexp.MustCompile(`--topic\s+(\S+)`).FindStringSubmatch(m); t != nil {
			created[t[1]] = true
		}
	}
	for _, name := range c.processors() {
		e := c.env(name)
		need := strings.Split(e.get(config.EnvName("INPUT_TOPICS")), ",")
		need = append(need, e.get(config.EnvName("OUTPUT_TOPIC")))
		if dlq := e.get(config.EnvName("DLQ_TOPIC")); dlq != "" {
			need = append(need, dlq)
		}
		for _, topic := range need {
			if !created[topic] {
				t.Errorf("%s: topics does not create %s, which %s uses (created: %v)", composeFile, topic, name, created)
			}
		}
	}
}

func TestComposeLoadgen(t *testing.T) {
	c := loadCompose(t)
	df := parseDockerfile(t, dockerfileFile)
	lg, ok := c.Services["loadgen"]
	if !ok {
		t.Fatalf("%s: no service loadgen", composeFile)
	}
	if lg.Build == nil || df.stage(lg.Build.Target) == nil {
		t.Fatalf("%s: loadgen is not built from a stage of %s: %+v", composeFile, dockerfileFile, lg.Build)
	}
	if ep := df.entrypoint(t, df.stage(lg.Build.Target)); !slices.Equal(ep, []string{"/loadgen"}) {
		t.Errorf("%s: loadgen's target %s runs %q, want /loadgen", composeFile, lg.Build.Target, ep)
	}
	// Its flags are cmd/loadgen's.
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`flag\.\w+\((?:&[\w.]+, )?"([\w-]+)"`).FindAllStringSubmatch(readFile(t, loadgenMain), -1) {
		defined[m[1]] = true
	}
	flags := map[string]string{}
	for i := 0; i < len(lg.Command); i++ {
		a := lg.Command[i]
		if !strings.HasPrefix(a, "-") {
			t.Errorf("%s: loadgen argument %q is not a flag", composeFile, a)
			continue
		}
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !ok && i+1 < len(lg.Command) {
			i++
			value = lg.Command[i]
		}
		if !defined[name] {
			t.Errorf("%s: loadgen has no flag -%s (%s defines %v)", composeFile, name, loadgenMain, defined)
		}
		flags[name] = value
	}
	if flags["brokers"] != composeBrokers {
		t.Errorf("%s: loadgen -brokers %q, want %s", composeFile, flags["brokers"], composeBrokers)
	}
	for _, name := range c.processors() {
		if in := strings.Split(c.env(name).get(config.EnvName("INPUT_TOPICS")), ","); !slices.Contains(in, flags["topic"]) {
			t.Errorf("%s: loadgen writes to %q, not to an input topic of %s (%v)", composeFile, flags["topic"], name, in)
		}
	}
	if lg.DependsOn["topics"].Condition != "service_completed_successfully" {
		t.Errorf("%s: loadgen must wait for the topics service to complete", composeFile)
	}
}

type promConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

func TestComposePrometheusAndGrafana(t *testing.T) {
	c := loadCompose(t)
	paths := servedPaths(t)

	prom, ok := c.Services["prometheus"]
	if !ok {
		t.Fatalf("%s: no service prometheus", composeFile)
	}
	if !strings.HasPrefix(prom.Image, "prom/prometheus:") {
		t.Errorf("%s: prometheus runs %s, want prom/prometheus", composeFile, prom.Image)
	}
	pm := mounts(prom)
	configAt := pm["./"+promConfigFile]
	if configAt != "/etc/prometheus/prometheus.yml" {
		t.Errorf("%s: prometheus mounts ./%s at %q, want /etc/prometheus/prometheus.yml (the image's --config.file)", composeFile, promConfigFile, configAt)
	}
	var pc promConfig
	if err := yaml.Unmarshal([]byte(readFile(t, promConfigFile)), &pc); err != nil {
		t.Fatalf("%s: %v", promConfigFile, err)
	}
	// Each rule file resolves, beside the config, to a mounted file of
	// this repository: alerts.yml among them.
	rulesMounted := false
	for _, rf := range pc.RuleFiles {
		inContainer := rf
		if !path.IsAbs(rf) {
			inContainer = path.Join(path.Dir(configAt), rf)
		}
		found := false
		for host, ctr := range pm {
			if ctr != inContainer {
				continue
			}
			found = true
			if path.Clean(host) == rulesFile {
				rulesMounted = true
			}
			// The same layout in the repository, so that promtool check
			// config finds the rules there too.
			if !path.IsAbs(rf) && path.Clean(host) != path.Join(path.Dir(promConfigFile), rf) {
				t.Errorf("%s: rule file %s is mounted from %s, not from beside the config", composeFile, rf, host)
			}
		}
		if !found {
			t.Errorf("%s: rule file %s (%s in the container) is not mounted", promConfigFile, rf, inContainer)
		}
	}
	if !rulesMounted {
		t.Errorf("%s and %s do not load %s", composeFile, promConfigFile, rulesFile)
	}
	// It scrapes every processor instance, as one job, on its HTTP port.
	var want, got []string
	for _, name := range c.processors() {
		want = append(want, fmt.Sprintf("%s:%d", name, httpPort(t, c.env(name))))
	}
	jobs := 0
	for _, sc := range pc.ScrapeConfigs {
		var targets []string
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
		if slices.ContainsFunc(targets, func(s string) bool { return strings.HasPrefix(s, "processor") }) {
			jobs++
			got = append(got, targets...)
			if p := cmpOr(sc.MetricsPath, "/metrics"); !paths[p] {
				t.Errorf("%s: job %s scrapes %s, which the processor does not serve", promConfigFile, sc.JobName, p)
			}
		}
	}
	sort.Strings(got)
	if jobs != 1 || !slices.Equal(got, want) {
		t.Errorf("%s: scrapes %v in %d jobs, want %v in one job (the dashboard and alerts group by job and instance)", promConfigFile, got, jobs, want)
	}

	graf, ok := c.Services["grafana"]
	if !ok {
		t.Fatalf("%s: no service grafana", composeFile)
	}
	if !strings.HasPrefix(graf.Image, "grafana/grafana:") {
		t.Errorf("%s: grafana runs %s, want grafana/grafana", composeFile, graf.Image)
	}
	gm := mounts(graf)
	dashAt := gm["./"+dashboardFile]
	if dashAt == "" {
		t.Fatalf("%s: grafana does not mount ./%s", composeFile, dashboardFile)
	}
	if home := graf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "" && home != dashAt {
		t.Errorf("%s: grafana's home dashboard %s is not the mounted %s", composeFile, home, dashAt)
	}
	var ds struct {
		Datasources []struct {
			Type      string `yaml:"type"`
			URL       string `yaml:"url"`
			IsDefault bool   `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	var prov struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	for host, ctr := range gm {
		if !strings.HasPrefix(ctr, "/etc/grafana/provisioning/") {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(host, "*.yml"))
		more, _ := filepath.Glob(filepath.Join(host, "*.yaml"))
		for _, f := range append(files, more...) {
			text := []byte(readFile(t, f))
			var err error
			switch path.Base(ctr) {
			case "datasources":
				err = yaml.Unmarshal(text, &ds)
			case "dashboards":
				err = yaml.Unmarshal(text, &prov)
			}
			if err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
	promDS := false
	for _, d := range ds.Datasources {
		if d.Type == "prometheus" && d.URL == "http://prometheus:9090" && d.IsDefault {
			promDS = true
		}
	}
	if !promDS {
		t.Errorf("grafana provisioning: no default prometheus data source at http://prometheus:9090: %+v", ds.Datasources)
	}
	provided := false
	for _, p := range prov.Providers {
		if p.Type == "file" && p.Options.Path == path.Dir(dashAt) {
			provided = true
		}
	}
	if !provided {
		t.Errorf("grafana provisioning: no file provider for %s, where %s mounts the dashboard: %+v", path.Dir(dashAt), composeFile, prov.Providers)
	}
}

func cmpOr(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// TestComposeWiring checks what docker compose would refuse or trip on:
// missing mount sources, dependencies on unknown services or on a health
// that is never checked, a host port published twice, named volumes not
// declared.
func TestComposeWiring(t *testing.T) {
	c := loadCompose(t)
	published := map[string]string{}
	for _, name := range c.sortedNames() {
		s := c.Services[name]
		if s.Image == "" && s.Build == nil {
			t.Errorf("%s: service %s has neither image nor build", composeFile, name)
		}
		for host := range mounts(s) {
			if _, err := os.Stat(host); err != nil {
				t.Errorf("%s: service %s mounts %s: %v", composeFile, name, host, err)
			}
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				if _, ok := c.Volumes[src]; !ok {
					t.Errorf("%s: service %s uses volume %s, which is not declared under volumes", composeFile, name, src)
				}
			}
		}
		for dep, d := range s.DependsOn {
			target, ok := c.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s: service %s depends on unknown service %s", composeFile, name, dep)
			case d.Condition == "service_healthy" && target.Healthcheck == nil:
				t.Errorf("%s: service %s waits for %s to be healthy, which has no healthcheck", composeFile, name, dep)
			case !slices.Contains([]string{"service_started", "service_healthy", "service_completed_successfully"}, d.Condition):
				t.Errorf("%s: service %s: depends_on %s condition %q", composeFile, name, dep, d.Condition)
			}
		}
		for _, p := range s.Ports {
			host, _, _ := strings.Cut(p, ":")
			if prev, dup := published[host]; dup {
				t.Errorf("%s: host port %s published by %s and %s", composeFile, host, prev, name)
			}
			published[host] = name
		}
	}
}
