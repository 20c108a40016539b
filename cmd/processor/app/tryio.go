package app

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamproc/processor/pipeline"
	"github.com/streamproc/processor/pipeline/pipelinetest"
)

// The sample records of `processor try`, and the lines it prints.

// tryLine is what try prints for one input: where it came from, and its
// outputs, or that it was filtered, skipped or dead-lettered, or that it
// failed (PROCESSOR_ON_ERROR=fail) or was not processed because an
// earlier record failed. Closed are the records of the windows that
// closed (EMIT=close) when the input moved stream time past their end
// plus grace, written in the input's transaction as the processor writes
// them; late says a stateful stage found the input late (its window had
// closed), which the processor counts in processor_records_late_total
// and writes to PROCESSOR_LATE_TOPIC when set.
type tryLine struct {
	Source       trySource   `json:"source"`
	Outputs      []tryRecord `json:"outputs,omitempty"`
	Closed       []tryRecord `json:"closed,omitempty"`
	Filtered     bool        `json:"filtered,omitempty"`
	Late         bool        `json:"late,omitempty"`
	Skipped      bool        `json:"skipped,omitempty"`
	DeadLetter   *tryDead    `json:"dead_letter,omitempty"`
	Failed       *tryFailure `json:"failed,omitempty"`
	NotProcessed bool        `json:"not_processed,omitempty"`
}

type trySource struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// tryRecord is a record as written. A key, value or header value that is
// not valid UTF-8 is null, with its bytes in base64 under key_base64,
// value_base64 or value_base64 of the header.
type tryRecord struct {
	Topic       string      `json:"topic"`
	Key         *string     `json:"key"`
	KeyBase64   string      `json:"key_base64,omitempty"`
	Value       *string     `json:"value"`
	ValueBase64 string      `json:"value_base64,omitempty"`
	Headers     []tryHeader `json:"headers"`
}

type tryHeader struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

// tryDead is a dead letter: why, and the record written to the
// dead-letter topic.
type tryDead struct {
	Error    string    `json:"error"`
	Stage    string    `json:"stage"`
	Attempts int       `json:"attempts"`
	Record   tryRecord `json:"record"`
}

type tryFailure struct {
	Error string `json:"error"`
}

// printable returns b as a string when it is valid UTF-8, else nil and
// its base64; nil bytes are nil.
func printable(b []byte) (*string, string) {
	if b == nil {
		return nil, ""
	}
	if !utf8.Valid(b) {
		return nil, base64.StdEncoding.EncodeToString(b)
	}
	s := string(b)
	return &s, ""
}

// newTryRecord describes r.
func newTryRecord(r *kgo.Record) tryRecord {
	t := tryRecord{Topic: r.Topic, Headers: []tryHeader{}}
	t.Key, t.KeyBase64 = printable(r.Key)
	t.Value, t.ValueBase64 = printable(r.Value)
	for _, h := range r.Headers {
		th := tryHeader{Key: h.Key}
		th.Value, th.ValueBase64 = printable(h.Value)
		if th.Value == nil && th.ValueBase64 == "" {
			empty := ""
			th.Value = &empty // a header value is never null on the wire
		}
		t.Headers = append(t.Headers, th)
	}
	return t
}

// tryLines describes what each input's transaction committed; recErr is
// the failure Run stopped with, if any. The code is 1 when any input
// failed, else 0.
func tryLines(recs []*kgo.Record, res []pipelinetest.Result, recErr *pipeline.RecordError) ([]tryLine, int) {
	code := exitOK
	lines := make([]tryLine, len(recs))
	for i, r := range recs {
		l := tryLine{Source: trySource{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}}
		switch res := res[i]; {
		case recErr != nil && recErr.Source.Topic == r.Topic && recErr.Source.Partition == r.Partition && recErr.Source.Offset == r.Offset:
			l.Failed, code = &tryFailure{Error: recErr.Err.Error()}, exitRuntime
		case !res.Committed:
			l.NotProcessed = true
		case res.DeadLetter != nil:
			d := &tryDead{Stage: res.DeadLetter.Stage, Attempts: res.DeadLetter.Attempts, Record: newTryRecord(res.DeadLetterRecord)}
			if res.DeadLetter.Err != nil {
				d.Error = res.DeadLetter.Err.Error()
			}
			l.DeadLetter, code = d, exitRuntime
		case res.Skipped:
			l.Skipped, code = true, exitRuntime
		case len(res.Outputs) == 0 && !res.Late:
			l.Filtered = true
		}
		l.Late = res[i].Late
		for _, o := range res[i].Outputs {
			l.Outputs = append(l.Outputs, newTryRecord(o))
		}
		for _, o := range res[i].Closed {
			l.Closed = append(l.Closed, newTryRecord(o))
		}
		lines[i] = l
	}
	return lines, code
}

// tryInput is one JSON line of input.
type tryInput struct {
	Key         *string         `json:"key"`
	KeyBase64   *string         `json:"key_base64"`
	Value       *string         `json:"value"`
	ValueBase64 *string         `json:"value_base64"`
	Headers     json.RawMessage `json:"headers"`
	Topic       string          `json:"topic"`
	Partition   int32           `json:"partition"`
	Offset      *int64          `json:"offset"`
	Timestamp   json.RawMessage `json:"timestamp"`
}

// readSamples reads the sample records of format ("auto", "kv" or
// "json"; auto is json when the first line that is not blank starts with
// "{") from in. A record names topic unless it says otherwise, partition
// 0, the offset after the previous one of its partition (from 0) and the
// time now. Blank lines are skipped.
func readSamples(in io.Reader, format, topic string) ([]*kgo.Record, error) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	next := map[trySource]int64{} // partition (offset 0) -> its next offset
	now := time.Now()
	var recs []*kgo.Record
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if format == "auto" {
			format = "kv"
			if bytes.HasPrefix(bytes.TrimSpace(line), []byte("{")) {
				format = "json"
			}
		}
		r := &kgo.Record{Topic: topic, Timestamp: now, Offset: -1}
		if format == "json" {
			if err := parseJSONSample(line, r); err != nil {
				return nil, fmt.Errorf("sample line %d: %w", n, err)
			}
		} else {
			k, v, ok := bytes.Cut(line, []byte("\t"))
			if ok {
				r.Key = bytes.Clone(k)
			} else {
				v = line
			}
			r.Value = bytes.Clone(v)
		}
		p := trySource{Topic: r.Topic, Partition: r.Partition}
		switch {
		case r.Offset < 0:
			r.Offset = next[p]
		case r.Offset < next[p]:
			return nil, fmt.Errorf("sample line %d: offset %d of %s partition %d is not after the previous one (%d)",
				n, r.Offset, r.Topic, r.Partition, next[p]-1)
		}
		next[p] = r.Offset + 1
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the sample records: %w", err)
	}
	return recs, nil
}

// parseJSONSample fills r from a JSON line.
func parseJSONSample(line []byte, r *kgo.Record) error {
	var in tryInput
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("want a JSON object of key, value, headers, topic, partition, offset, timestamp: %w", err)
	}
	var err error
	if r.Key, err = sampleBytes(in.Key, in.KeyBase64); err != nil {
		return fmt.Errorf("key_base64: %w", err)
	}
	if r.Value, err = sampleBytes(in.Value, in.ValueBase64); err != nil {
		return fmt.Errorf("value_base64: %w", err)
	}
	if r.Headers, err = sampleHeaders(in.Headers); err != nil {
		return fmt.Errorf("headers: %w", err)
	}
	if in.Topic != "" {
		r.Topic = in.Topic
	}
	if in.Partition < 0 {
		return fmt.Errorf("partition %d: want 0 or more", in.Partition)
	}
	r.Partition = in.Partition
	if in.Offset != nil {
		if *in.Offset < 0 {
			return fmt.Errorf("offset %d: want 0 or more", *in.Offset)
		}
		r.Offset = *in.Offset
	}
	return sampleTimestamp(in.Timestamp, r)
}

// sampleBytes is s, or the bytes of b64; nil when neither is given.
func sampleBytes(s, b64 *string) ([]byte, error) {
	switch {
	case b64 != nil:
		return base64.StdEncoding.DecodeString(*b64)
	case s != nil:
		return []byte(*s), nil
	}
	return nil, nil
}

// sampleHeaders reads headers given as an object (in its order) or as a
// list of {"key", "value"}.
func sampleHeaders(raw json.RawMessage) ([]kgo.RecordHeader, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '[' {
		var list []struct {
			Key   string  `json:"key"`
			Value *string `json:"value"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, err
		}
		hs := make([]kgo.RecordHeader, 0, len(list))
		for _, h := range list {
			var v []byte
			if h.Value != nil {
				v = []byte(*h.Value)
			}
			hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: v})
		}
		return hs, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("want an object of strings or a list of {\"key\", \"value\"}")
	}
	var hs []kgo.RecordHeader
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v string
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%v: want a string: %w", k, err)
		}
		hs = append(hs, kgo.RecordHeader{Key: k.(string), Value: []byte(v)})
	}
	return hs, nil
}

// sampleTimestamp sets r's timestamp from milliseconds since the epoch or
// an RFC 3339 string; unset keeps it.
func sampleTimestamp(raw json.RawMessage, r *kgo.Record) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("timestamp %q: want RFC 3339 or milliseconds since the epoch", s)
		}
		r.Timestamp = t
		return nil
	}
	var ms int64
	if err := json.Unmarshal(raw, &ms); err != nil {
		return fmt.Errorf("timestamp %s: want RFC 3339 or milliseconds since the epoch", raw)
	}
	r.Timestamp = time.UnixMilli(ms)
	return nil
}
