# The processor's commands. See README.md.
GO      ?= go
KAFKA   := bash integration/kafka/kafka.sh
PG      := bash integration/postgres/pg.sh
SR      := bash integration/registry/registry.sh
# The integration suite runs against kfake always, and against the brokers
# in PROCESSOR_TEST_BROKERS too when it is set (make test-kafka sets it).
TESTFLAGS ?=

.PHONY: deploy-tools chart build version run run-billing run-avro plugins test test-kafka test-cluster drill chaos chaos-kafka chaos-postgres chaos-avro chaos-stateful bench bench-micro fuzz mutate docs rules-test vet kafka-up kafka-down pg-up pg-down sr-up sr-down clean

# The version baked in (processor --version, the start log line,
# processor_build_info), by scripts/version.sh from the VERSION file and
# git: v0.4.0 when HEAD is the tag v0.4.0 and clean, v0.4.0-dev+<hash>
# otherwise (.dirty appended when tracked files are modified), v0.4.0-dev
# without git. make version prints it; make build VERSION=... overrides it.
VERSION := $(shell sh scripts/version.sh)
LDFLAGS := -X github.com/streamproc/processor/cmd/processor/app.Version=$(VERSION)

# -trimpath: no build machine paths in the binaries, so that a build is
# reproducible; deploy/Dockerfile builds the image's binary with the same
# flags (go test ./deploy/ compares them).
build:
	@test -n "$(VERSION)" || { echo "make build: no version: scripts/version.sh failed (its message is above)" >&2; exit 1; }
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

# The version make build bakes in, e.g. for the image:
#   docker build -f deploy/Dockerfile --build-arg VERSION=$(make -s version) --build-arg REVISION=$(git rev-parse HEAD) .
version:
	@test -n "$(VERSION)" || { echo "make version: scripts/version.sh failed (its message is above)" >&2; exit 1; }
	@echo $(VERSION)

# Starts the processor on the embedded broker (data under ./data/broker) and
# feeds it sample orders; Ctrl-C stops both cleanly. scripts/run.sh checks
# first that ports 9092 and 8080 are free (choose others with
# PROCESSOR_EMBEDDED_BROKER_ADDR and PROCESSOR_HTTP_ADDR, e.g.
# make run PROCESSOR_HTTP_ADDR=:8081), and stops loadgen when the processor
# exits, the processor when loadgen fails.
run: build
	@trap '' INT; \
	PROCESSOR_EMBEDDED_BROKER=true PROCESSOR_GROUP=demo PROCESSOR_INPUT_TOPICS=orders \
	PROCESSOR_OUTPUT_TOPIC=orders-processed PROCESSOR_LOG_FORMAT=text PROCESSOR_PROGRESS_INTERVAL=2s \
	bash scripts/run.sh "make run" 500

# The billing example (examples/billing/README.md): the processor on the
# embedded broker turns loadgen's orders into one row each of the table
# invoices, through the postgres sink in statement mode. It starts afresh
# each time: the local PostgreSQL (pg.sh) is started if needed, its schema
# billing is dropped and created again from schema.sql, and the broker's
# folder data/billing is removed. Ctrl-C stops both cleanly.
BILLING := examples/billing

run-billing: build
	@set -e; \
	bash scripts/run.sh --check "make run-billing"; \
	url=$$($(PG) up); \
	$(PG) psql -q -v ON_ERROR_STOP=1 -c 'SET client_min_messages = warning' -c 'DROP SCHEMA IF EXISTS billing CASCADE' -c 'CREATE SCHEMA billing' \
		-c 'SET search_path = billing' -f $(BILLING)/schema.sql; \
	rm -rf data/billing; \
	echo "make run-billing: invoices into PostgreSQL (schema billing), one per order."; \
	echo "  invoices:    $(PG) psql -c 'SELECT count(*), sum(total_cents) FROM billing.invoices'"; \
	echo "  audit:       $(PG) psql -qx -c 'SET search_path = billing' -f $(BILLING)/audit.sql"; \
	set -a; . ./$(BILLING)/billing.env; set +a; \
	trap '' INT; \
	PROCESSOR_EMBEDDED_BROKER=true PROCESSOR_EMBEDDED_BROKER_DIR=data/billing/broker \
	PROCESSOR_POSTGRES_URL="$$url&search_path=billing" \
	PROCESSOR_JQ_EXPR="$$(cat $(BILLING)/invoice.jq)" PROCESSOR_POSTGRES_STATEMENT="$$(cat $(BILLING)/invoice.sql)" \
	PROCESSOR_LOG_FORMAT=text PROCESSOR_PROGRESS_INTERVAL=2s \
	bash scripts/run.sh "make run-billing" 200

# The Avro example (examples/avro/README.md): orders in Avro in, the same
# orders enriched by a jq program out, in Avro with the evolved schema
# order-enriched.avsc, which the processor registers at start. The
# processor runs on the embedded broker and the embedded Schema Registry
# (PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR, default 127.0.0.1:8081, whose
# port must be free too); loadgen registers order.avsc and writes Avro
# orders, and a second loadgen prints the first three outputs decoded to
# JSON. It starts afresh each time: data/avro (the broker's log and the
# registry's schemas) is removed. Only Go is needed. Ctrl-C stops.
AVRO := examples/avro

run-avro: build
	@set -e; \
	PROCESSOR_EMBEDDED_SCHEMA_REGISTRY=true bash scripts/run.sh --check "make run-avro"; \
	rm -rf data/avro; \
	reg=http://$${PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_ADDR:-127.0.0.1:8081}; \
	broker=$${PROCESSOR_EMBEDDED_BROKER_ADDR:-127.0.0.1:9092}; \
	echo "make run-avro: Avro orders in 'orders', enriched Avro orders out in 'orders-enriched'."; \
	echo "  decoded:     bin/loadgen -brokers $$broker -topic orders-enriched -format avro -schema-registry $$reg -read 5"; \
	echo "  schemas:     curl -s $$reg/subjects; curl -s $$reg/subjects/orders-enriched-value/versions/latest"; \
	set -a; . ./$(AVRO)/avro.env; set +a; \
	trap '' INT; \
	PROCESSOR_EMBEDDED_BROKER=true PROCESSOR_EMBEDDED_BROKER_DIR=data/avro/broker \
	PROCESSOR_EMBEDDED_SCHEMA_REGISTRY=true PROCESSOR_EMBEDDED_SCHEMA_REGISTRY_DIR=data/avro/registry \
	PROCESSOR_OUTPUT_VALUE_SCHEMA_FILE=$(AVRO)/order-enriched.avsc PROCESSOR_JQ_EXPR="$$(cat $(AVRO)/enrich.jq)" \
	PROCESSOR_LOG_FORMAT=text PROCESSOR_PROGRESS_INTERVAL=2s \
	LOADGEN_ARGS="-format avro -schema-registry $$reg" \
	RUN_SHOW_ARGS="-topic orders-enriched -format avro -schema-registry $$reg -read 3" \
	bash scripts/run.sh "make run-avro" 200

# The example WebAssembly plugins: every examples/wasm/<name>/main.go
# becomes bin/plugins/<name>.wasm, a WASI reactor for PROCESSOR_WASM_MODULE.
PLUGINS := $(patsubst examples/wasm/%/main.go,%,$(wildcard examples/wasm/*/main.go))

plugins:
	@mkdir -p bin/plugins
	@for p in $(PLUGINS); do \
		echo "GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o bin/plugins/$$p.wasm ./examples/wasm/$$p"; \
		GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o bin/plugins/$$p.wasm ./examples/wasm/$$p || exit 1; \
	done

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

# -timeout bounds each package's test binary: 5 minutes, so a hung test
# fails with its goroutines' stacks soon, and a package whose tests take
# longer is split by subject (as integration/ is: the packages under it
# share internal/testkit/itest), never given a longer timeout.
test: vet
	$(GO) test -race -count=1 -timeout 5m $(TESTFLAGS) ./...

# The jq transform's differential fuzz target (FuzzJQDiff in
# transform/jq/diff_test.go): generated jq programs and values run through
# the transform's fast path and through plain gojq, which must agree byte
# for byte. It starts from the checked-in corpus (every divergence ever
# found; make test runs that corpus too) and runs for FUZZTIME executions. CI runs it
# after make test (.ci/run); a failure leaves its case under
# transform/jq/testdata/fuzz/FuzzJQDiff, to be fixed and checked in.
# The Avro codec's targets (schema/avro_diff_test.go) run
# after it for AVROFUZZTIME each: FuzzAvroDifferential holds our binary
# reader and writer to twmb/avro on random schemas and values, and
# FuzzAvroDecode feeds random payloads that twmb/avro must read as we do.
# The budgets are counts of executions, not durations: with a duration,
# Go before 1.27 may fail a target with a bare "context deadline
# exceeded" at the end of the window on a loaded machine, having found
# nothing (go.dev/issue/75804). A count has no deadline to race. On this
# project's 2-core machines they take about a minute and 20 s each.
# FUZZMINIMIZETIME bounds the shrinking of each input that reaches new
# code (and of a failing one) to that many executions. Go's default is
# 60 s per input, and those executions count against the budget without
# exploring: a single long input (a 2 KB value, say) took 37 s and
# 495,000 of FuzzJQDiff's 600,000 executions, the progress line showing
# 0 execs/sec meanwhile. CI starts from an empty cache, so the shrunk
# inputs are thrown away after the run anyway.
# The stateful built-ins' two differential targets run last for
# STATEFUZZTIME each (about 25 s and 6 s on a loaded machine):
# FuzzNumPath holds aggregate's int64 arithmetic to the math/big path,
# FuzzPick the member scan of FIELD and BY to the full parse.
FUZZTIME ?= 600000x
AVROFUZZTIME ?= 50000x
STATEFUZZTIME ?= 50000x
FUZZMINIMIZETIME ?= 10000x

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzJQDiff$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) ./transform/jq/
	$(GO) test -run '^$$' -fuzz '^FuzzAvroDifferential$$' -fuzztime $(AVROFUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) ./schema/
	$(GO) test -run '^$$' -fuzz '^FuzzAvroDecode$$' -fuzztime $(AVROFUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) ./schema/
	$(GO) test -run '^$$' -fuzz '^FuzzNumPath$$' -fuzztime $(STATEFUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) ./transform/aggregate/
	$(GO) test -run '^$$' -fuzz '^FuzzPick$$' -fuzztime $(STATEFUZZTIME) -fuzzminimizetime $(FUZZMINIMIZETIME) ./transform/internal/groupkey/

# Starts the local Apache Kafka broker (if needed) and runs the whole suite
# against it as well as against kfake.
test-kafka:
	PROCESSOR_TEST_BROKERS=$$($(KAFKA) up | tail -n 1) $(MAKE) test

# Starts the local three-node Apache Kafka cluster (if needed) and runs the
# broker-failure tests against it: SIGKILL of a node and its restart.
test-cluster:
	PROCESSOR_TEST_CLUSTER=$$($(KAFKA) cluster-up | tail -n 1) $(GO) test -count=1 -v -run 'TestCluster' ./integration/eos/

# The short drills of the integration suite, which make test leaves out
# (docs/testing.md): TestChaosShort (five short chaos runs on kfake, the
# http transform's among them, and one against PROCESSOR_TEST_BROKERS when
# it is set), TestChaosShortAvro
# (the same with Avro records through the drill's Schema Registry),
# TestChaosShortStateful (the stateful drill: a count by record key under
# both orderings, with SIGKILL, a wiped state directory, scaling and
# SIGTERM, judged by eoscheck -check aggregate; also over Java
# LongSerializer/IntegerSerializer keys, and orders counted per customer
# through the repartition topic, judged by eoscheck -group-by .customer),
# TestChaosShortJoin (the join drill: a table topic written while the
# faults land, judged by eoscheck -check join; about 40 s on kfake and
# Apache Kafka) and TestChaosPostgres (when
# PROCESSOR_TEST_POSTGRES_URL says PostgreSQL is installed), all in
# integration/chaos. Its timeout stays 30 minutes: the drills run for
# about 9 minutes by design (chaos runs of fixed length, one after another).
drill:
	PROCESSOR_TEST_DRILLS=1 $(GO) test -race -count=1 -timeout 30m $(TESTFLAGS) -run '^TestChaos(Short|ShortAvro|ShortStateful|ShortJoin|Postgres)$$' ./integration/chaos/

# The short drills (make drill), then the long fault drill on the
# embedded devbroker (kfake): 100,000 records,
# every 500th a marked hard one (notjson, which jq fails: a dead letter or
# skipped; nearlimit, 1.00-1.05 MB of JSON: an ordinary output), 20 faults,
# the jq transform with the dlq and skip policies mixed in one group; ends
# with eoscheck's anomaly table and the counts per poison class.
chaos: build drill
	./bin/chaos -embedded -records 100000 -iterations 20

# The same against the local three-node Apache Kafka cluster, whose nodes
# are SIGKILLed and restarted as the broker fault.
chaos-kafka: build
	./bin/chaos -cluster -brokers $$($(KAFKA) cluster-up | tail -n 1) -records 100000 -iterations 20

# The fault drill with Avro records (docs/faults.md, "Avro records") on
# the embedded devbroker (kfake) and the drill's in-process Schema
# Registry: 30,000 records at 1,000 a second in the Schema Registry wire
# format, the input's schema changed halfway (a field added with a
# default), 8 faults, every 500th input a marked hard one (notjson: values
# the decode stage fails; nearlimit: a 1 MB Avro record), the jq
# transform with the dlq and skip policies mixed; ends with eoscheck's
# table and the check of every visible output value against the output
# schema.
chaos-avro: build
	./bin/chaos -embedded -value-format avro -records 30000 -rate 1000 -iterations 8

# The stateful fault drill (docs/faults.md, "The stateful drill") on the
# embedded devbroker (kfake): 60,000 records at 1,500 a second, the chain
# jq,aggregate (a count by record key; the notjson poison class is
# dead-lettered or skipped by jq before it counts) under
# PROCESSOR_ORDERING=key, each instance with its own state directory kept
# across its restarts, 14 faults (kill, term, stop, scale, wipe: SIGKILL,
# the state directory deleted and a restart that rebuilds it from the
# changelogs, broker), 5% aborts; ends with eoscheck -check aggregate (every
# key's counts run 1, 2, 3, ... up to its inputs taken) and the restores
# the instances made.
chaos-stateful: build
	./bin/chaos -embedded -transforms jq,aggregate -policies dlq,skip -ordering key -records 60000 -rate 1500 -iterations 14

# The long fault drill into PostgreSQL (PROCESSOR_SINK=postgres) on the
# embedded devbroker (kfake) and the local PostgreSQL of pg.sh, started if
# it is not up (PROCESSOR_PG_PORT and PROCESSOR_PG_DIR choose another, as
# for pg-up): 100,000 records at 1,000 a second, 24 faults (the default
# ones of a drill into PostgreSQL in turn: kill, term, stop, scale,
# broker, pgrestart, which restarts PostgreSQL fast and immediate in turn,
# pgslow and pgfreeze), every 500th input a marked hard one
# (notjson, nearlimit, and jsonb: JSON that jsonb refuses, to be stored in
# value_bytes), the jq transform with the dlq and skip policies mixed; ends
# with eoscheck's audit of the run's tables and the counts per poison class.
chaos-postgres: build
	./bin/chaos -embedded -sink postgres -postgres-url "$$($(PG) up | tail -n 1)" -postgres-script integration/postgres/pg.sh \
		-records 100000 -rate 1000 -iterations 24

# The side-by-side benchmark (bench/run; docs/benchmarks.md): the bare
# franz-go copier, the processor (exactly once, at least once, a jq chain at
# 1 worker and at all cores, the jq chain on Avro in and out at all cores
# with a schema registry of its own, the stateful rows, the join and the
# http transform at 1, 8 and 32 in flight) and Kafka Streams 4.4.0
# (identity, count, sum, dedupe, join) drain the same input on the local
# Apache Kafka broker if it is up (make kafka-up), else on a kfake
# devbroker. BENCH=quick (default: 50,000 records per size, 2 rounds) or
# BENCH=full; more flags with BENCH_FLAGS, e.g. BENCH_FLAGS='-records
# 200000 -rounds 3 -systems copier,processor,kstreams' for fewer rows.
# BENCH_FLAGS=-restore adds the restore rows (a count over 1,000,000 keys
# killed after 10 s of updates and restarted, its state kept or wiped,
# beside Kafka Streams, once a round), BENCH_FLAGS=-crash a restart after
# SIGKILL to every row; both restart a static group member.
# Prints one Markdown table and writes it to bench/results/latest.md, with
# BENCH_NOTE (e.g. BENCH_NOTE='quiet machine') among its conditions.
BENCH       ?= quick
BENCH_FLAGS ?=

bench:
	$(GO) run ./bench/run -mode $(BENCH) $(BENCH_FLAGS)

# The Go micro-benchmarks (transforms, the schema codecs of ./schema,
# BenchmarkCopy against kfake).
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./...

# Mutation testing with gremlins (not run in CI; docs/testing.md has the
# figures): each package in MUTATE_PKGS is mutated and tested with its own
# tests only. It runs in a temporary copy of the files git tracks or would
# track, because gremlins copies the whole module for its workers (bin/,
# the local broker's data). -count=1: gremlins times each mutant against
# the first test run, which must not come from the test cache.
GREMLINS_VERSION ?= v0.6.0
MUTATE_PKGS      ?= config txn pipeline
MUTATE_WORKERS   ?= 1

mutate:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$$tmp" && \
	for p in $(MUTATE_PKGS); do \
		echo "== gremlins $(GREMLINS_VERSION) unleash ./$$p"; \
		(cd "$$tmp" && GOFLAGS="$(GOFLAGS) -count=1" $(GO) run github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION) \
			unleash --workers $(MUTATE_WORKERS) --output-statuses lt ./$$p) || exit 1; \
	done

# docs/configuration.md is generated from config's tags and the built-in
# transforms' declared settings, and the metrics table of
# docs/operations.md (between its two marker comments) from the registered
# collectors; cmd/processor's tests fail when either is stale.
docs:
	$(GO) run ./cmd/processor config -markdown > docs/configuration.md
	$(GO) run ./cmd/processor metrics -markdown > docs/.metrics.tmp
	awk -v table=docs/.metrics.tmp \
		'/^<!-- end of the metrics table -->/ { skip = 0 } !skip { print } \
		/^<!-- metrics table:/ { print ""; while ((getline l < table) > 0) print l; print ""; skip = 1 }' \
		docs/operations.md > docs/.operations.tmp
	mv docs/.operations.tmp docs/operations.md
	rm -f docs/.metrics.tmp
	$(MAKE) k8s-rules

# The PrometheusRule of deploy/k8s/components/monitoring and the Helm
# chart's copy of the rules (files/alerts.yml), made from
# deploy/prometheus/alerts.yml (the same rules); go test ./deploy/ fails
# when either is stale.
.PHONY: k8s-rules
k8s-rules:
	$(GO) test -count=1 -run '^(TestK8sPrometheusRuleMatchesAlerts|TestHelmRulesMatchAlerts)$$' ./deploy/ -update

# The tools the deploy tests render and validate the manifests with,
# into deploy/.cache (ignored by git), each at a pinned version and
# installed only when missing or of another version: helm and kustomize
# built from the Go module proxy (go install; helm's first build takes
# about 12 minutes on a 2-core machine with an empty module cache,
# kustomize's about 2), and kubernetes-validate from PyPI in a venv of
# its own, which ships the Kubernetes schemas (it validates offline).
# .ci/run calls it; go test ./deploy/ finds them there.
HELM_VERSION                ?= v3.22.0
KUSTOMIZE_VERSION           ?= v5.7.1
KUBERNETES_VALIDATE_VERSION ?= 1.37.0
DEPLOY_CACHE                := deploy/.cache

deploy-tools:
	@mkdir -p $(DEPLOY_CACHE)/bin
	@set -e; for t in helm:helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) kustomize:sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION); do \
		name=$${t%%:*}; pkg=$${t#*:}; mod=$${pkg%%@*}; ver=$${pkg#*@}; \
		case $$name in helm) mod=helm.sh/helm/v3;; kustomize) mod=sigs.k8s.io/kustomize/kustomize/v5;; esac; \
		if ! $(GO) version -m $(DEPLOY_CACHE)/bin/$$name 2>/dev/null | grep -Eq "^\s+mod\s+$$mod\s+$$ver\s"; then \
			echo "go install $$pkg"; GOBIN=$$PWD/$(DEPLOY_CACHE)/bin $(GO) install $$pkg; \
		fi; \
	done
	@kv=$(DEPLOY_CACHE)/kubernetes-validate; \
	if [ "$$($$kv/bin/kubernetes-validate --version 2>/dev/null)" != "$(KUBERNETES_VALIDATE_VERSION)" ]; then \
		echo "pip install kubernetes-validate==$(KUBERNETES_VALIDATE_VERSION) (venv $$kv)"; \
		rm -rf $$kv && python3 -m venv $$kv && $$kv/bin/pip install -q --disable-pip-version-check kubernetes-validate==$(KUBERNETES_VALIDATE_VERSION); \
	fi

# The Helm chart (deploy/helm/processor): helm lint, and helm template by
# default and with every option, validated with kubernetes-validate
# --strict against the Kubernetes versions the chart supports. go test
# ./deploy/ does the same and compares the chart with the kustomize base
# (TestHelm*, TestRenderedObjectsValidate).
CHART := deploy/helm/processor

chart: deploy-tools
	$(DEPLOY_CACHE)/bin/helm lint --strict $(CHART) --kube-version 1.29.0
	$(DEPLOY_CACHE)/bin/helm template orders-enricher $(CHART) --kube-version 1.29.0 > $(DEPLOY_CACHE)/chart-default.yaml
	$(DEPLOY_CACHE)/bin/helm template orders-enricher $(CHART) --kube-version 1.29.0 \
		--set monitoring.podMonitor.enabled=true,monitoring.prometheusRule.enabled=true,keda.enabled=true,state.persistence.enabled=true,httpToken.token=t \
		> $(DEPLOY_CACHE)/chart-all.yaml
	for v in 1.29.0 1.37.0; do \
		$(DEPLOY_CACHE)/kubernetes-validate/bin/kubernetes-validate --strict --quiet -k $$v $(DEPLOY_CACHE)/chart-default.yaml $(DEPLOY_CACHE)/chart-all.yaml || exit 1; \
	done

# The alerting rules: promtool's check and their unit tests (promtool:
# apt-get install prometheus). go test ./deploy/ runs them too, and checks
# the dashboard.
rules-test:
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts_test.yml

kafka-up:
	@$(KAFKA) up

kafka-down:
	@$(KAFKA) down
	@$(KAFKA) cluster-down

# The local PostgreSQL of the pgsink tests and the PostgreSQL sink
# (integration/postgres/pg.sh): 127.0.0.1:15432, data in /tmp/processor-pg.
# pg-up prints the URL last; the pgsink tests read it from
# PROCESSOR_TEST_POSTGRES_URL:
#   export PROCESSOR_TEST_POSTGRES_URL=$(make -s pg-up | tail -n 1)
pg-up:
	@$(PG) up

pg-down:
	@$(PG) down

# The local Schema Registry of the schema tests (integration/registry/registry.sh):
# Apicurio Registry's Confluent-compatible API on 127.0.0.1:18081, in memory
# (a restart forgets every schema), global compatibility BACKWARD; needs a
# Java 21+. sr-up prints the base URL last; the tests read it from
# PROCESSOR_TEST_SCHEMA_REGISTRY_URL:
#   export PROCESSOR_TEST_SCHEMA_REGISTRY_URL=$(make -s sr-up | tail -n 1)
sr-up:
	@$(SR) up

sr-down:
	@$(SR) down

clean:
	rm -rf bin data
