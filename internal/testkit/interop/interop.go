// Package interop lets tests write and read Kafka records with Confluent's
// own serializers: the Python scripts of integration/registry/interop
// (produce.py, consume.py), run with the interpreter of
// PROCESSOR_TEST_PYTHON (a venv with confluent-kafka; .ci/run makes it)
// against the Schema Registry of PROCESSOR_TEST_SCHEMA_REGISTRY_URL
// (integration/registry/registry.sh; .ci/run starts it). So a test can
// prove that what the processor writes, Confluent's clients read, and the
// other way round.
//
// Without either variable a test is skipped, and in CI (CI set) it fails.
// Every function fails the test (t.Fatal) when a script fails or runs past
// its timeout, with the script's output in the message.
package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamproc/processor/internal/testkit/repo"
)

// The variables the tests read.
const (
	// RegistryVar holds the base URL of a Confluent-compatible Schema
	// Registry, e.g. http://127.0.0.1:18081/apis/ccompat/v7.
	RegistryVar = "PROCESSOR_TEST_SCHEMA_REGISTRY_URL"
	// PythonVar holds a Python interpreter with confluent-kafka[avro,
	// protobuf,json,schemaregistry] and grpcio-tools installed (the
	// pinned packages of integration/registry/interop/requirements.txt).
	PythonVar = "PROCESSOR_TEST_PYTHON"
)

// Formats of Options.Format.
const (
	Avro       = "avro"
	Protobuf   = "protobuf"
	JSONSchema = "json_schema"
)

// Strategies of Options.Strategy, as the scripts' --strategy names them.
const (
	StrategyTopic       = "topic"
	StrategyRecord      = "record"
	StrategyTopicRecord = "topic_record"
)

// Forms of Options.ProtoForm.
const (
	ProtoText       = "text"
	ProtoDescriptor = "descriptor"
)

// required returns the value of variable v; without it the test fails in
// CI and is skipped elsewhere, with how to set it.
func required(t testing.TB, v, how string) string {
	t.Helper()
	s := os.Getenv(v)
	if s == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: .ci/run must %s", v, how)
		}
		t.Skipf("%s is not set: %s", v, how)
	}
	return s
}

// RegistryURL returns the Schema Registry of PROCESSOR_TEST_SCHEMA_REGISTRY_URL.
func RegistryURL(t testing.TB) string {
	t.Helper()
	return required(t, RegistryVar, "start integration/registry/registry.sh (make sr-up) and export the URL it prints last")
}

// Python returns the interpreter of PROCESSOR_TEST_PYTHON.
func Python(t testing.TB) string {
	t.Helper()
	return required(t, PythonVar, "make the venv of integration/registry/interop/requirements.txt and export its bin/python (docs/testing.md)")
}

// Options say where and how the scripts write or read.
type Options struct {
	Brokers  []string // seed brokers
	Registry string   // the registry's base URL; RegistryURL's when empty
	Topic    string
	Format   string // Avro or Protobuf
	// SchemaFile is the writer's schema: an .avsc file, or a .proto file
	// (compiled by grpcio-tools' protoc; imports resolve beside it).
	// Consume needs it for Protobuf only (the message class to decode into).
	SchemaFile string
	// Message is the Protobuf message's full name (package.Name); the
	// file's first message when empty. Consume takes several,
	// comma-separated: a topic carrying several types decodes each record
	// into the class of its writer's message.
	Message string
	// Strategy is the serdes' subject.name.strategy: "" or StrategyTopic
	// (<topic>-value), StrategyRecord, StrategyTopicRecord, Confluent's
	// own functions. Produce registers each schema under the subject it
	// names; Consume reports the record name and subject the
	// deserializer derives from each record's writer schema.
	Strategy string
	// ProtoForm is how Produce registers a Protobuf schema: ProtoText
	// (the default) sends the .proto file's text; ProtoDescriptor leaves
	// Confluent's ProtobufSerializer to register what it registers itself,
	// base64 FileDescriptorProtos, each import of the file a subject of its
	// own (named by its import path) referenced by the schema.
	ProtoForm string
	// Transactional makes Produce write in one Kafka transaction.
	Transactional bool
	// Timeout bounds one script run; one minute when zero.
	Timeout time.Duration
}

// Record is one record to produce: a plain string key (none when empty),
// a value, the JSON form of a record of the schema, and headers (text).
// SchemaFile and Message, when set, are the record's own writer schema
// (a topic carrying several record types); Options' otherwise.
type Record struct {
	Key        string            `json:"key,omitempty"`
	Value      map[string]any    `json:"value"`
	Headers    map[string]string `json:"headers,omitempty"`
	SchemaFile string            `json:"schema_file,omitempty"`
	Message    string            `json:"message,omitempty"`
}

// Scripts returns the folder of produce.py and consume.py.
func Scripts(t testing.TB) string {
	t.Helper()
	return repo.Path(t, "integration", "registry", "interop")
}

// args are the arguments the two scripts share.
func (o Options) args(t testing.TB) []string {
	t.Helper()
	reg := o.Registry
	if reg == "" {
		reg = RegistryURL(t)
	}
	a := []string{"--brokers", strings.Join(o.Brokers, ","), "--registry", reg, "--topic", o.Topic, "--format", o.Format}
	if o.SchemaFile != "" {
		a = append(a, "--schema-file", o.SchemaFile)
	}
	if o.Message != "" {
		a = append(a, "--message", o.Message)
	}
	if o.ProtoForm != "" {
		a = append(a, "--proto-form", o.ProtoForm)
	}
	if o.Strategy != "" {
		a = append(a, "--strategy", o.Strategy)
	}
	return a
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return time.Minute
}

// run runs script with args and stdin, and returns its stdout.
func run(t testing.TB, o Options, script string, stdin []byte, args ...string) []byte {
	t.Helper()
	py := Python(t)
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout()+10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join(Scripts(t), script)}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("interop: %s %s: %v\nstderr:\n%s\nstdout:\n%s", script, strings.Join(args, " "), err, errb.String(), out.String())
	}
	return out.Bytes()
}

// Produce writes records to o.Topic with Confluent's AvroSerializer or
// ProtobufSerializer (which registers the schema under the subject of
// o.Strategy, <topic>-value by default),
// in a transaction when o.Transactional, and waits for every one to be
// acknowledged.
func Produce(t testing.TB, o Options, records []Record) {
	t.Helper()
	var in bytes.Buffer
	for _, r := range records {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("interop: encoding record %+v: %v", r, err)
		}
		in.Write(append(b, '\n'))
	}
	args := append(o.args(t), "--count", strconv.Itoa(len(records)), "--timeout", fmt.Sprint(o.timeout().Seconds()))
	if o.Transactional {
		args = append(args, "--transactional")
	}
	run(t, o, "produce.py", in.Bytes(), args...)
}

// Consume reads o.Topic from its start with isolation.level
// read_committed until n records or o.Timeout, and returns each as
// consume.py prints it: key, partition, offset, value (decoded with
// Confluent's AvroDeserializer or ProtobufDeserializer), schema_id (of
// the header), under a record strategy type and subject (the writer's
// record name and the subject the deserializer's strategy derives) and,
// when the record has them, the lineage headers (processor.source, or
// processor.source.topic, .partition, .offset).
// It fails the test when fewer than n arrive.
func Consume(t testing.TB, o Options, n int) []map[string]any {
	t.Helper()
	out := run(t, o, "consume.py", nil, append(o.args(t), "--count", strconv.Itoa(n),
		"--timeout", fmt.Sprint(o.timeout().Seconds()))...)
	var recs []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("interop: consume.py printed a line that is not JSON: %v: %s", err, sc.Text())
		}
		recs = append(recs, m)
	}
	if len(recs) < n {
		t.Fatalf("interop: consume.py read %d records of %s, want %d", len(recs), o.Topic, n)
	}
	return recs
}
