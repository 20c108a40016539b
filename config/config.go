// Package config holds the processor's core settings: its own PROCESSOR_*
// environment variables, declared as a plugin's are (package settings),
// their defaults, the validation that runs before anything connects to
// Kafka, and the variable reference. A plugin's settings are not here:
// each plugin declares its own, and the processor's wiring
// (cmd/processor/app) binds them to variables. Env is the one reader of
// the environment, which the wiring reads the core's settings and the
// plugins' with; other packages below cmd/ never read it: they receive a
// validated Config, or a plugin its filled settings.
package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/streamproc/processor/internal/bytesize"
	"github.com/streamproc/processor/schema"
	"github.com/streamproc/processor/settings"
)

// Prefix is the prefix of every environment variable the processor reads.
const Prefix = "PROCESSOR"

// Config is the processor's whole configuration, declared as a plugin's
// settings are (package settings): each field's setting tag names its
// environment variable (Prefix + "_" + tag), default its default, form the
// expected form, which error messages quote, doc what the setting does, in
// one line, and choices the only values it takes. Reference lists them;
// Validate checks the values and the relations between them.
type Config struct {
	Brokers            []string `setting:"BROKERS" form:"comma-separated host:port seed brokers, e.g. kafka-1:9092,kafka-2:9092" doc:"the Kafka brokers the processor first connects to; required unless PROCESSOR_EMBEDDED_BROKER is true"`
	EmbeddedBroker     bool     `setting:"EMBEDDED_BROKER" default:"false" form:"true or false" doc:"start an in-process Kafka-protocol broker (franz-go kfake) to try the processor on one machine; never for production"`
	EmbeddedBrokerAddr string   `setting:"EMBEDDED_BROKER_ADDR" default:"127.0.0.1:9092" form:"host:port to listen on, e.g. 127.0.0.1:9092" doc:"where the embedded broker listens"`
	EmbeddedBrokerDir  string   `setting:"EMBEDDED_BROKER_DIR" default:"./data/broker" form:"a directory path" doc:"where the embedded broker keeps its log, so a restart keeps the data"`
	// EmbeddedBrokerPartitions is the partition count of the topics the
	// embedded broker creates for the processor.
	EmbeddedBrokerPartitions int32 `setting:"EMBEDDED_BROKER_PARTITIONS" default:"6" form:"a partition count from 1 to 1000" doc:"partitions of the topics the embedded broker creates (the input, output and dead-letter topics, at start if missing)"`

	// How the brokers are reached: TLS and SASL. The files are read, and
	// checked, when the processor starts (cmd/processor/app), not here.
	TLSEnabled    bool   `setting:"TLS_ENABLED" default:"false" form:"true or false" doc:"connect to the brokers over TLS (1.2 or later), verifying their certificates against the system's roots, or PROCESSOR_TLS_CA_FILE; not with the embedded broker, which speaks plaintext"`
	TLSCAFile     string `setting:"TLS_CA_FILE" form:"a path to a PEM file of CA certificates, e.g. /etc/kafka/ca.pem" doc:"trust the brokers' certificates that these CAs signed, instead of the system's roots; needs PROCESSOR_TLS_ENABLED=true"`
	TLSCertFile   string `setting:"TLS_CERT_FILE" form:"a path to a PEM client certificate (chain), with PROCESSOR_TLS_KEY_FILE" doc:"the client certificate for mutual TLS, with PROCESSOR_TLS_KEY_FILE (both or neither); needs PROCESSOR_TLS_ENABLED=true"`
	TLSKeyFile    string `setting:"TLS_KEY_FILE" form:"a path to the PEM private key of PROCESSOR_TLS_CERT_FILE" doc:"the private key of PROCESSOR_TLS_CERT_FILE (both or neither); needs PROCESSOR_TLS_ENABLED=true"`
	TLSServerName string `setting:"TLS_SERVER_NAME" form:"a host name, e.g. kafka.internal" doc:"the name the brokers' certificates must be valid for, instead of the host of each broker's address; needs PROCESSOR_TLS_ENABLED=true"`
	SASLMechanism string `setting:"SASL_MECHANISM" choices:"PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER" form:"PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER" doc:"authenticate to the brokers with this SASL mechanism: PLAIN and SCRAM as PROCESSOR_SASL_USERNAME, OAUTHBEARER with the tokens of PROCESSOR_SASL_OAUTH_TOKEN_URL; no SASL when unset; PLAIN sends the password as it is, and OAUTHBEARER the token, so use them over TLS"`
	SASLUsername  string `setting:"SASL_USERNAME" form:"a SASL user name, e.g. orders-enricher" doc:"the SASL user; required with PROCESSOR_SASL_MECHANISM PLAIN or SCRAM"`
	// SASLPassword is a Secret: printing it shows a placeholder.
	SASLPassword     settings.Secret `setting:"SASL_PASSWORD" form:"the SASL user's password (never shown)" doc:"the SASL user's password; set it or PROCESSOR_SASL_PASSWORD_FILE, not both; never logged or shown"`
	SASLPasswordFile string          `setting:"SASL_PASSWORD_FILE" form:"a path to a file holding the SASL password, e.g. /var/run/secrets/kafka/password" doc:"a file holding the SASL user's password, such as a mounted Kubernetes Secret, read at start; a trailing newline is dropped"`
	// SASL OAUTHBEARER: the processor fetches access tokens from an
	// OAuth 2.0 token endpoint with the client credentials grant
	// (config/oauth.go has their rules).
	SASLOAuthTokenURL         string   `setting:"SASL_OAUTH_TOKEN_URL" form:"an http or https URL of an OAuth 2.0 token endpoint, e.g. https://idp.example.com/oauth2/token" doc:"with PROCESSOR_SASL_MECHANISM=OAUTHBEARER: the token endpoint that access tokens are fetched from (client credentials grant), at start and again after about 80% of each token's lifetime, before it expires; required with OAUTHBEARER"`
	SASLOAuthClientID         string   `setting:"SASL_OAUTH_CLIENT_ID" form:"an OAuth client id, e.g. orders-enricher" doc:"the OAuth client the processor authenticates to the token endpoint as; required with OAUTHBEARER"`
	SASLOAuthClientSecretFile string   `setting:"SASL_OAUTH_CLIENT_SECRET_FILE" form:"a path to a file holding the OAuth client secret, e.g. /var/run/secrets/kafka/client-secret" doc:"a file holding the OAuth client's secret, such as a mounted Kubernetes Secret, read at start (a trailing newline is dropped); never logged or shown; required with OAUTHBEARER"`
	SASLOAuthClientAuth       string   `setting:"SASL_OAUTH_CLIENT_AUTH" default:"basic" choices:"basic,post" form:"basic or post" doc:"how the client's id and secret reach the token endpoint: basic in an HTTP basic Authorization header (client_secret_basic, which every endpoint must accept), post in the request body (client_secret_post)"`
	SASLOAuthScope            string   `setting:"SASL_OAUTH_SCOPE" form:"space-separated OAuth scopes, e.g. kafka" doc:"the scope asked for with each token; none when unset (the endpoint's default)"`
	SASLOAuthAudience         string   `setting:"SASL_OAUTH_AUDIENCE" form:"an audience, e.g. https://kafka.example.com" doc:"sent as the audience parameter of each token request, which some providers need to issue a token for the cluster; none when unset"`
	SASLOAuthCAFile           string   `setting:"SASL_OAUTH_CA_FILE" form:"a path to a PEM file of CA certificates, e.g. /etc/kafka/oauth/ca.pem" doc:"trust the token endpoint's certificate if these CAs signed it, instead of the system's roots (an identity provider with a private CA); needs an https PROCESSOR_SASL_OAUTH_TOKEN_URL"`
	SASLOAuthExtensions       []string `setting:"SASL_OAUTH_EXTENSIONS" form:"comma-separated key=value SASL extensions, keys of letters only, e.g. logicalCluster=lkc-1,identityPoolId=pool-2" doc:"SASL extensions (RFC 7628) sent with each token to the brokers, such as the logical cluster and identity pool that some managed services require; none when unset"`

	// The Kafka client's own settings (config/client.go has their rules):
	// who it is to the brokers, how it batches and compresses what it
	// produces, how much it fetches, from which replica, and where a
	// group without committed offsets starts.
	ClientID             string        `setting:"CLIENT_ID" form:"a client id of 1 to 256 bytes without control characters, e.g. orders-enricher-0 (default processor-<group>-<instance id or hostname>)" doc:"the client.id every Kafka client of the processor sends (the group's, the admin's, the state restore's), which broker quotas, request logs and metrics key on; defaults to processor-<group>-<PROCESSOR_INSTANCE_ID or hostname>, so that two pipelines, or two instances of one, never share one"`
	Compression          string        `setting:"COMPRESSION" default:"snappy" choices:"none,gzip,snappy,lz4,zstd" form:"none, gzip, snappy, lz4 or zstd" doc:"how the producer compresses its record batches (outputs, dead letters, state changelogs); the brokers keep a batch as it comes unless the topic's compression.type says otherwise"`
	Linger               time.Duration `setting:"LINGER" default:"10ms" form:"a Go duration from 0 to 1m, e.g. 10ms" doc:"how long the producer waits for more records before it sends a partition's batch: longer fills batches (fewer requests, better compression), 0 sends at once; the end of every transaction sends what waits, so it never delays a commit past PROCESSOR_COMMIT_INTERVAL"`
	ProduceBatchMaxBytes bytesize.Size `setting:"PRODUCE_BATCH_MAX_BYTES" form:"a size from 1KiB to 100MiB such as 512KiB (B, KiB, MiB, GiB; a plain number is bytes)" doc:"the largest record batch the producer sends, and so the largest record it can send; each topic's max.message.bytes (the broker's message.max.bytes for a topic it may not read) still applies when lower; a record larger than the limit fails under PROCESSOR_ON_ERROR; unset: each topic's max.message.bytes"`
	FetchMaxBytes        bytesize.Size `setting:"FETCH_MAX_BYTES" default:"50MiB" form:"a size from 1MiB to 100MiB such as 50MiB (B, KiB, MiB, GiB; a plain number is bytes)" doc:"the most one fetch response from a broker may hold (Kafka's fetch.max.bytes; each partition gives at most 512KiB of it), which bounds the memory fetched records take: about this much per broker the group reads from"`
	Rack                 string        `setting:"RACK" form:"a rack or zone name of 1 to 512 bytes without control characters, e.g. eu-west-1a" doc:"the rack (zone) this instance runs in, sent with every fetch (KIP-392): brokers with replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector and broker.rack set serve the group's fetches from a replica in the same rack, which saves cross-zone traffic; other brokers ignore it; off when unset"`
	StartOffset          string        `setting:"START_OFFSET" default:"earliest" form:"earliest, latest, a negative Go duration such as -1h, or an RFC 3339 time such as 2026-01-02T15:04:05Z" doc:"where the group starts reading a partition it has no committed offset for: earliest (the log start), latest (only records produced after the start), a duration back from the start (-1h), or a time, from the first record stamped at or after it; a partition with a committed offset (with PROCESSOR_SINK=postgres, one stored in the database) always resumes from it"`

	// Sink is where outputs go: kafka (PROCESSOR_OUTPUT_TOPIC, in Kafka
	// transactions) or the name of a registered sink (package sink), which
	// keeps rows and offsets in one transaction of its own per batch. The
	// names come from the sink registry, which config does not know: the
	// processor lists them (processor config, docs/configuration.md) and
	// refuses a name that is not registered.
	Sink string `setting:"SINK" default:"kafka" form:"kafka or the name of a sink the processor has (processor config lists them)" doc:"kafka produces outputs to PROCESSOR_OUTPUT_TOPIC, with the consumed offsets, in one Kafka transaction per batch; the name of a sink writes them, with the consumed offsets, to that sink in one transaction of its own per batch (its settings are under Sink settings)"`

	Group           string   `setting:"GROUP" form:"the consumer group id, e.g. orders-enricher" doc:"the consumer group that the instances of one processor share; required"`
	InputTopics     []string `setting:"INPUT_TOPICS" form:"comma-separated topic names, e.g. orders,refunds" doc:"the topics the processor consumes; required"`
	OutputTopic     string   `setting:"OUTPUT_TOPIC" form:"a topic name, e.g. orders-enriched" doc:"the topic outputs go to unless a transform routes them elsewhere; not an input topic; required"`
	TransactionalID string   `setting:"TRANSACTIONAL_ID" form:"an id unique to this instance and stable across its restarts (default <group>-<hostname>)" doc:"the producer's transactional ID, unique per running instance and stable across its restarts, so a restarted instance fences its old self; defaults to <group>-<hostname>"`
	InstanceID      string   `setting:"INSTANCE_ID" form:"a static group member id unique to this instance (KIP-345)" doc:"static group membership (KIP-345): a restart within the session timeout keeps its partitions without a rebalance; off when unset"`
	Transforms      []string `setting:"TRANSFORMS" default:"identity" form:"comma-separated transform names, name@alias to use one twice, e.g. jq,route" doc:"the transform chain every record goes through, in order; name@alias uses one transform twice, each with its own PROCESSOR_<NAME>_<ALIAS>_* settings"`

	// Guarantee is exactly_once (outputs and offsets in one transaction)
	// or at_least_once (no transactions: outputs flushed, then offsets
	// committed; a crash or an abort writes some outputs twice).
	Guarantee string `setting:"GUARANTEE" default:"exactly_once" choices:"exactly_once,at_least_once" form:"exactly_once or at_least_once" doc:"exactly_once commits outputs and offsets in one transaction; at_least_once uses no transactions (outputs flushed, then offsets committed), so a crash or an abort writes some outputs twice but never loses one"`

	CommitInterval   time.Duration `setting:"COMMIT_INTERVAL" default:"100ms" form:"a Go duration such as 100ms or 1s, below PROCESSOR_TRANSACTION_TIMEOUT" doc:"a transaction ends after this long, or earlier at PROCESSOR_MAX_RECORDS_PER_TXN or PROCESSOR_MAX_TXN_BYTES"`
	MaxRecordsPerTxn int           `setting:"MAX_RECORDS_PER_TXN" default:"100000" form:"a whole number of records from 1 to 10000000" doc:"a transaction ends after this many input records, or earlier at PROCESSOR_COMMIT_INTERVAL or PROCESSOR_MAX_TXN_BYTES"`
	// MaxTxnBytes bounds the output bytes one transaction holds in memory.
	MaxTxnBytes bytesize.Size `setting:"MAX_TXN_BYTES" default:"64MiB" form:"a size from 1MiB to 1GiB such as 64MiB (B, KiB, MiB, GiB; a plain number is bytes)" doc:"a transaction ends once its output records (keys, values, headers) hold this many bytes, which bounds the memory it holds"`
	// MaxOutputBytesPerRecord bounds what one input record may produce at
	// any stage of the transform chain (transform.MaxOutputBytes); past it
	// the record fails under PROCESSOR_ON_ERROR.
	MaxOutputBytesPerRecord bytesize.Size `setting:"MAX_OUTPUT_BYTES_PER_RECORD" default:"16MiB" form:"a size from 1MiB to 1GiB such as 16MiB (B, KiB, MiB, GiB; a plain number is bytes)" doc:"the most that the outputs of one input record may hold (keys, values and headers, plus what the records themselves take in memory, about 160 bytes each and 40 per header) at any stage of the transform chain; a record whose outputs pass it fails under PROCESSOR_ON_ERROR, stopped before the memory is spent"`
	SessionTimeout          time.Duration `setting:"SESSION_TIMEOUT" default:"45s" form:"a Go duration from 6s to 30m, e.g. 45s" doc:"the consumer group session timeout: a member not heard from for this long loses its partitions"`
	TransactionTimeout      time.Duration `setting:"TRANSACTION_TIMEOUT" default:"40s" form:"a Go duration below PROCESSOR_SESSION_TIMEOUT and at most the brokers' transaction.max.timeout.ms (15m by default), e.g. 40s" doc:"the broker aborts a transaction left open this long; below the session timeout, and at most the brokers' transaction.max.timeout.ms (15m by default), which the processor reads at start, refusing a longer timeout"`

	// How keys and values are encoded: raw bytes, or the Schema Registry
	// wire format (config/schemas.go has their rules).
	KeyFormat   schema.Format `setting:"KEY_FORMAT" default:"raw" form:"raw, avro, protobuf or json_schema" doc:"how input keys are encoded: raw passes the bytes to the chain as they are; avro, protobuf and json_schema decode the Schema Registry wire format by the schema id each key carries, so the chain sees JSON (see docs/schemas.md)"`
	ValueFormat schema.Format `setting:"VALUE_FORMAT" default:"raw" form:"raw, avro, protobuf or json_schema" doc:"how input values are encoded: raw passes the bytes to the chain as they are; avro, protobuf and json_schema decode the Schema Registry wire format by the schema id each value carries, so the chain (jq, route, wasm) sees JSON (see docs/schemas.md)"`
	// OutputKeyFormat and OutputValueFormat default to the input's.
	OutputKeyFormat             schema.Format `setting:"OUTPUT_KEY_FORMAT" form:"raw, avro, protobuf or json_schema (default PROCESSOR_KEY_FORMAT)" doc:"how output keys are encoded; by default as the input's; a schema format encodes the chain's JSON with the output subject's schema"`
	OutputValueFormat           schema.Format `setting:"OUTPUT_VALUE_FORMAT" form:"raw, avro, protobuf or json_schema (default PROCESSOR_VALUE_FORMAT)" doc:"how output values are encoded; by default as the input's; a schema format encodes the chain's JSON with the output subject's schema, and an output that does not fit it fails under PROCESSOR_ON_ERROR"`
	OutputKeySubject            string        `setting:"OUTPUT_KEY_SUBJECT" form:"a Schema Registry subject, e.g. orders-enriched-key (default <topic>-key)" doc:"the subject whose latest schema encodes the keys written to PROCESSOR_OUTPUT_TOPIC; defaults to <topic>-key (the topic name strategy); routed outputs use <their topic>-key; refused with PROCESSOR_KEY_SUBJECT_STRATEGY record or topic_record, which name each output's subject"`
	OutputValueSubject          string        `setting:"OUTPUT_VALUE_SUBJECT" form:"a Schema Registry subject, e.g. orders-enriched-value (default <topic>-value)" doc:"the subject whose latest schema encodes the values written to PROCESSOR_OUTPUT_TOPIC, fetched at start and every PROCESSOR_OUTPUT_SCHEMA_REFRESH_INTERVAL; defaults to <topic>-value (the topic name strategy); routed outputs use <their topic>-value; refused with PROCESSOR_VALUE_SUBJECT_STRATEGY record or topic_record, which name each output's subject"`
	OutputKeySchemaFile         string        `setting:"OUTPUT_KEY_SCHEMA_FILE" form:"a path to a schema file (.avsc, .proto or .json), e.g. /etc/processor/key.avsc" doc:"a key schema registered at start under PROCESSOR_OUTPUT_KEY_SUBJECT (with PROCESSOR_KEY_SUBJECT_STRATEGY record or topic_record: under the subject of its record name) and used for every output key; the registry refusing it (incompatible with the subject) stops the start"`
	OutputValueSchemaFile       string        `setting:"OUTPUT_VALUE_SCHEMA_FILE" form:"a path to a schema file (.avsc, .proto or .json), e.g. /etc/processor/order-v2.avsc" doc:"a value schema registered at start under PROCESSOR_OUTPUT_VALUE_SUBJECT (with PROCESSOR_VALUE_SUBJECT_STRATEGY record or topic_record: under the subject of its record name) and used for every output value; the registry refusing it (incompatible with the subject) stops the start"`
	OutputKeyMessage            string        `setting:"OUTPUT_KEY_MESSAGE" form:"a Protobuf message's full name, e.g. shop.OrderKey" doc:"with PROCESSOR_OUTPUT_KEY_FORMAT=protobuf: the message of the schema that output keys are; defaults to the schema's first message"`
	OutputValueMessage          string        `setting:"OUTPUT_VALUE_MESSAGE" form:"a Protobuf message's full name, e.g. shop.Order" doc:"with PROCESSOR_OUTPUT_VALUE_FORMAT=protobuf: the message of the schema that output values are; defaults to the schema's first message"`
	OutputSchemaRefreshInterval time.Duration `setting:"OUTPUT_SCHEMA_REFRESH_INTERVAL" default:"1m" form:"a Go duration from 1s to 24h, e.g. 1m" doc:"how often the output subjects' latest versions are fetched again, so a new version registered while the processor runs is used without a restart"`
	// KeySubjectStrategy and ValueSubjectStrategy name the output subjects
	// as Confluent's serdes do (subject.name.strategy).
	KeySubjectStrategy   string `setting:"KEY_SUBJECT_STRATEGY" default:"topic" choices:"topic,record,topic_record" form:"topic, record or topic_record" doc:"how the subjects of keys are named, as Confluent's serdes name them: topic is <topic>-key, record the key's record name (Avro full name, Protobuf message full name, JSON Schema title), topic_record <topic>-<record name>; inputs are decoded by the schema id they carry whatever the strategy; with record or topic_record each output key is encoded under the subject of its record type on its topic (see docs/schemas.md)"`
	ValueSubjectStrategy string `setting:"VALUE_SUBJECT_STRATEGY" default:"topic" choices:"topic,record,topic_record" form:"topic, record or topic_record" doc:"how the subjects of values are named, as Confluent's serdes name them: topic is <topic>-value, record the value's record name (Avro full name, Protobuf message full name, JSON Schema title), topic_record <topic>-<record name>; inputs are decoded by the schema id they carry whatever the strategy, so a topic may carry several record types; with record or topic_record each output value is encoded under the subject of its record type (its input's, or the schema file's) on its topic (see docs/schemas.md)"`

	// The Schema Registry the formats other than raw need.
	SchemaRegistryURL           []string        `setting:"SCHEMA_REGISTRY_URL" form:"comma-separated http or https URLs of a Confluent-compatible Schema Registry, e.g. http://registry:8081" doc:"the Schema Registry that input schema ids are looked up in and output subjects read from, tried in turn; required when a format is not raw"`
	SchemaRegistryUsername      string          `setting:"SCHEMA_REGISTRY_USERNAME" form:"a user name, e.g. orders-enricher" doc:"HTTP basic authentication to the Schema Registry as this user, with PROCESSOR_SCHEMA_REGISTRY_PASSWORD or _PASSWORD_FILE"`
	SchemaRegistryPassword      settings.Secret `setting:"SCHEMA_REGISTRY_PASSWORD" form:"the Schema Registry user's password (never shown)" doc:"the Schema Registry user's password; set it or PROCESSOR_SCHEMA_REGISTRY_PASSWORD_FILE, not both; never logged or shown"`
	SchemaRegistryPasswordFile  string          `setting:"SCHEMA_REGISTRY_PASSWORD_FILE" form:"a path to a file holding the Schema Registry password, e.g. /var/run/secrets/registry/password" doc:"a file holding the Schema Registry user's password, such as a mounted Kubernetes Secret, read at start; a trailing newline is dropped"`
	SchemaRegistryTLSCAFile     string          `setting:"SCHEMA_REGISTRY_TLS_CA_FILE" form:"a path to a PEM file of CA certificates, e.g. /etc/registry/ca.pem" doc:"trust the registry's certificate if these CAs signed it, instead of the system's roots; needs https URLs"`
	SchemaRegistryTLSCertFile   string          `setting:"SCHEMA_REGISTRY_TLS_CERT_FILE" form:"a path to a PEM client certificate (chain), with PROCESSOR_SCHEMA_REGISTRY_TLS_KEY_FILE" doc:"the client certificate for mutual TLS with the registry (both or neither with its key); needs https URLs"`
	SchemaRegistryTLSKeyFile    string          `setting:"SCHEMA_REGISTRY_TLS_KEY_FILE" form:"a path to the PEM private key of PROCESSOR_SCHEMA_REGISTRY_TLS_CERT_FILE" doc:"the private key of PROCESSOR_SCHEMA_REGISTRY_TLS_CERT_FILE (both or neither); needs https URLs"`
	SchemaRegistryTLSServerName string          `setting:"SCHEMA_REGISTRY_TLS_SERVER_NAME" form:"a host name, e.g. registry.internal" doc:"the name the registry's certificate must be valid for, instead of each URL's host; needs https URLs"`
	EmbeddedSchemaRegistry      bool            `setting:"EMBEDDED_SCHEMA_REGISTRY" default:"false" form:"true or false" doc:"start an in-process Confluent-compatible Schema Registry to try the schema formats on one machine, and use it; it checks the compatibility of Avro schemas only; never for production"`
	EmbeddedSchemaRegistryAddr  string          `setting:"EMBEDDED_SCHEMA_REGISTRY_ADDR" default:"127.0.0.1:8081" form:"host:port to listen on, e.g. 127.0.0.1:8081" doc:"where the embedded Schema Registry listens"`
	EmbeddedSchemaRegistryDir   string          `setting:"EMBEDDED_SCHEMA_REGISTRY_DIR" default:"./data/registry" form:"a directory path" doc:"where the embedded Schema Registry keeps its schemas, so a restart keeps their ids"`

	OnError    string `setting:"ON_ERROR" default:"fail" choices:"fail,dlq,skip" form:"fail, dlq or skip" doc:"what happens to a record that fails for good: fail aborts and exits 1, dlq writes it to PROCESSOR_DLQ_TOPIC, skip drops it"`
	DLQTopic   string `setting:"DLQ_TOPIC" form:"a topic name for dead letters, e.g. orders-dlq" doc:"the dead-letter topic that PROCESSOR_ON_ERROR=dlq writes failed records to, in the same transaction; not an input topic"`
	MaxRetries int    `setting:"MAX_RETRIES" default:"3" form:"a whole number of retries from 0 to 100" doc:"retries, with backoff, of a record whose transform failed with a retriable error or timed out, before it fails for good"`
	// MaxFutureSkew bounds how far ahead of the wall clock a record moves
	// its partition's stream time (pipeline.Options.MaxFutureSkew).
	MaxFutureSkew time.Duration `setting:"MAX_FUTURE_SKEW" default:"1m" form:"a Go duration such as 1m or 1h, from 1s to 8760h" doc:"how far ahead of the wall clock a record's timestamp may move its partition's stream time, which windows, grace and dedupe judge time by; a record stamped later (a clock far ahead, microseconds written as milliseconds) moves it only to the wall clock plus this, and counts in processor_records_future_total"`
	// LateTopic receives the records stateful stages find late
	// (pipeline.Options.LateTopic).
	LateTopic string `setting:"LATE_TOPIC" form:"a topic name for late records, e.g. orders-late" doc:"where stateful stages write the records they find late (after their window closed, end plus PROCESSOR_<STAGE>_GRACE by stream time; for dedupe, further behind stream time than its grace), inside the same transaction, with processor.late.* headers; unset, windows drop them and dedupe passes them, counted in processor_records_late_total either way; not an input, output or dead-letter topic"`
	// MaxCrashAttempts is how many processes may die on a partition's
	// batch before its records run one per transaction and the one the
	// process dies on next fails under PROCESSOR_ON_ERROR.
	MaxCrashAttempts int `setting:"MAX_CRASH_ATTEMPTS" default:"3" form:"a whole number from 0 to 1000; 0 turns the count off" doc:"how many times the process may die (SIGKILL, out of memory, a crash past recovery) between polling a partition's records and committing any of them before those records run one per transaction; the record the process dies on then fails under PROCESSOR_ON_ERROR without running again (processor.error.transform=crash); counted in the committed offsets' metadata, so it survives restarts and rebalances; Kafka sink only (not PROCESSOR_SINK=postgres)"`
	// Workers is how many goroutines run the chain, each on records of
	// other partitions; 0 is one per CPU (GOMAXPROCS).
	Workers int `setting:"WORKERS" default:"0" form:"a whole number of workers from 0 to 256; 0 is one per CPU" doc:"how many records run through the transform chain at once, each worker with its own instance of every transform; outputs keep their partition's input order, all in the one transaction; a chain with an ordered (stateful) transform sees records as PROCESSOR_ORDERING says; the identity chain alone has nothing to share and runs in the loop whatever this says; 0 is one worker per CPU"`
	// Ordering is how the workers share the records of a chain with an
	// ordered transform (transform.Ordered): partition or key.
	Ordering string `setting:"ORDERING" default:"partition" choices:"partition,key" form:"partition or key" doc:"for a chain with an ordered (stateful) transform: partition runs all of a partition's records on one worker in order, partitions in parallel; key spreads a partition's records over the workers by key, each key's records in order on one worker (null-key records in partition order on one); a chain without one shares every partition among the workers either way"`
	// StateDir is the local database of the stateful transforms' stores.
	StateDir string `setting:"STATE_DIR" default:"./data/state" form:"a directory path" doc:"where a chain with a stateful transform (aggregate, dedupe) keeps its local state store, a cache of the stores' changelog topics that a restart reuses (only the changelogs' tail is read again); one processor at a time, and safe to wipe: it is rebuilt from the changelogs, as is a damaged one; a directory that cannot be created or written, or a full or read-only filesystem, stops the processor with exit 2"`
	// StateCacheBytes is the block cache of each local Pebble database
	// (the stores' and each join table's).
	StateCacheBytes bytesize.Size `setting:"STATE_CACHE_BYTES" default:"64MiB" form:"a size from 8MiB to 64GiB such as 64MiB (B, KiB, MiB, GiB; a plain number is bytes)" doc:"the block cache of the local state store, and of each join table's store: the reads of keys not in the open transaction (a dedupe's every new id, an aggregate's first record of a key in a transaction) come from it or from disk, so a cache smaller than the stores' index and filter blocks and hot keys costs CPU on every such read; memory the process holds beside the heap and each database's memtables (up to 96MiB)"`
	// RepartitionPurgeInterval is how often consumed records of a
	// repartition topic are deleted.
	RepartitionPurgeInterval time.Duration `setting:"REPARTITION_PURGE_INTERVAL" default:"30s" form:"a Go duration such as 30s" doc:"how often, at most, a chain with a repartition hop deletes the records of its repartition topic that the group has consumed and committed (DeleteRecords, as Kafka Streams' repartition.purge.interval.ms)"`
	TransformTimeout         time.Duration `setting:"TRANSFORM_TIMEOUT" default:"0s" form:"a Go duration such as 500ms; 0 sets no per-record deadline" doc:"per-record deadline of the transform chain; (PROCESSOR_MAX_RETRIES + 1) attempts of it, plus backoff, must fit four fifths of PROCESSOR_TRANSACTION_TIMEOUT"`

	// LineageHeaders is the form of the lineage every output carries:
	// compact, legacy or off (Lineage reads it).
	LineageHeaders string `setting:"LINEAGE_HEADERS" default:"compact" form:"compact, legacy or off (true is compact, false is off)" doc:"the lineage stamped on every output record and dead letter: compact is one processor.source header, topic/partition/offset (e.g. orders/3/12345); legacy is the three processor.source.topic, .partition and .offset headers of releases before it, for consumers that read those; off stamps none on outputs (dead letters still carry the compact form)"`
	// TestAbortRate is for fault drills only: the fraction of transactions
	// aborted on purpose (reason "injected") instead of committed.
	TestAbortRate float64 `setting:"TEST_ABORT_RATE" default:"0" form:"a fraction from 0 to 1; for fault drills only" doc:"fault drills only: the fraction of transactions aborted on purpose (reason injected) instead of committed; never set it in production"`
	// TestCrashOn is for fault drills only: a record whose value holds it
	// kills the process (SIGKILL) as it starts through the chain.
	TestCrashOn string `setting:"TEST_CRASH_ON" form:"a text; for fault drills only" doc:"fault drills only: a record whose value contains this text kills the process (SIGKILL to itself) when it starts through the transform chain, to try PROCESSOR_MAX_CRASH_ATTEMPTS; never set it in production"`

	HTTPAddr         string        `setting:"HTTP_ADDR" default:":8080" form:"host:port to serve /metrics, /healthz and /readyz on, e.g. :8080" doc:"where the HTTP server for /metrics, /healthz and /readyz listens"`
	HTTPTokenFile    string        `setting:"HTTP_TOKEN_FILE" form:"a path to a file holding a bearer token, e.g. /var/run/secrets/processor/http-token" doc:"when set, / (the status page) and /status answer 401 unless the request carries Authorization: Bearer <the file's token>; /metrics, /healthz and /readyz stay open to scrapers and probes; the file, such as a mounted Kubernetes Secret, is read at start and again when it changes (a trailing newline is dropped); the token is never logged"`
	Pprof            bool          `setting:"PPROF" default:"false" form:"true or false" doc:"true serves Go's profiles (net/http/pprof) under /debug/pprof/ on PROCESSOR_HTTP_ADDR, e.g. go tool pprof http://host:8080/debug/pprof/profile?seconds=30 for 30s of CPU; behind the bearer token of PROCESSOR_HTTP_TOKEN_FILE when one is set; off by default, as a profile shows the program's internals"`
	LogLevel         string        `setting:"LOG_LEVEL" default:"info" choices:"debug,info,warn,error" form:"one of debug, info, warn, error" doc:"the least severe level logged (log/slog, to stderr)"`
	LogFormat        string        `setting:"LOG_FORMAT" default:"json" choices:"json,text" form:"json or text" doc:"the format of log lines (log/slog, to stderr)"`
	StatusHistory    time.Duration `setting:"STATUS_HISTORY" default:"15m" form:"a Go duration from 1m to 24h, e.g. 15m" doc:"how far back the history of /status and the status page's charts reaches (one sample a second, kept in memory)"`
	ProgressInterval time.Duration `setting:"PROGRESS_INTERVAL" default:"5s" form:"a Go duration such as 5s; 0 turns the progress line off" doc:"how often the progress line is logged"`

	// AllowUnknownVariables turns the error of an unknown PROCESSOR_*
	// variable (a typo, usually) into a warning.
	AllowUnknownVariables bool `setting:"ALLOW_UNKNOWN_VARIABLES" default:"false" form:"true or false" doc:"a PROCESSOR_* variable that is neither a processor setting, nor a sink's, nor a setting of a registered transform (a typo such as PROCESSOR_AGGREGATE_WINDOWS) stops the processor, try and test with exit code 2 and the closest setting's name; true logs a warning and runs anyway"`
}

// Fields are the declared settings of Config (package settings): each
// is read from the variable EnvName gives its name.
func Fields() []settings.Field { return settings.Fields(&Config{}) }

// Env returns the Lookup of settings in the environment: a setting is read
// from the variable name returns for it, and from no other (not from its
// bare name). envconfig reads it, the processor's one reader of the
// environment, for its own settings (Load) and its plugins' alike; a
// variable set to the empty string is given.
func Env(name func(setting string) string) settings.Lookup {
	return func(setting string) (string, bool) {
		tag := reflect.StructTag(fmt.Sprintf("envconfig:%q", name(setting)))
		one := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: reflect.TypeFor[*string](), Tag: tag}}))
		if err := envconfig.Process("", one.Interface()); err != nil {
			return "", false // a string is never refused
		}
		v := one.Elem().Field(0).Interface().(*string)
		if v == nil {
			return "", false
		}
		return *v, true
	}
}

// Read fills a Config from lookup, each setting not given taking its
// default, without validating it. A value that does not parse, or is not
// one of a setting's choices, is a *settings.Error naming the variable.
func Read(lookup settings.Lookup) (*Config, error) {
	var c Config
	if err := settings.Fill(Fields(), &c, lookup); err != nil {
		var se *settings.Error
		if errors.As(err, &se) {
			return nil, se.Bind(EnvName)
		}
		return nil, err
	}
	return &c, nil
}

// Defaults returns the Config of every default and nothing else, as Read
// gives it when no variable is set.
func Defaults() *Config {
	c, err := Read(nil)
	if err != nil {
		panic("config: a default does not read: " + err.Error()) // settings.Fields has parsed each
	}
	return c
}

// Load reads the PROCESSOR_* environment into a Config, applies defaults
// (the transactional ID defaults to <group>-<hostname>, the client ID to
// DefaultClientID) and validates it.
// Every error it returns is a *settings.Error.
func Load(hostname string) (*Config, error) {
	c, err := Read(Env(EnvName))
	if err != nil {
		return nil, err
	}
	if c.TransactionalID == "" && c.Group != "" {
		c.TransactionalID = c.Group + "-" + hostname
	}
	if c.ClientID == "" && c.Group != "" {
		c.ClientID = DefaultClientID(c.Group, c.InstanceID, hostname)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// EnvName returns the full environment variable name of a Config field's
// tag, e.g. EnvName("GROUP") is "PROCESSOR_GROUP".
func EnvName(tag string) string { return Prefix + "_" + tag }

// Hostname returns the machine's host name for the default transactional
// ID, or "localhost" when it cannot be read.
func Hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}
