// Package schematest holds an in-memory schema.Registry for tests of
// code that decodes or encodes with the schema package, with a way to
// make it fail with a given schema.Fault.
package schematest

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	"github.com/streamproc/processor/schema"
)

// Memory is a schema.Registry in memory. Ids are global and given in
// order from 1; registering a schema a subject already has returns its
// version. It is safe for concurrent use.
type Memory struct {
	mu       sync.Mutex
	byID     map[int]schema.Schema
	subjects map[string][]schema.Subject
	nextID   int
	fail     schema.Fault
	calls    map[string]int
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{byID: make(map[int]schema.Schema), subjects: make(map[string][]schema.Subject), nextID: 1, calls: make(map[string]int)}
}

// Fail makes every later call fail with an *schema.Error of fault f (""
// makes calls succeed again), as a registry that is down, refuses the
// credentials, or rejects a schema would.
func (m *Memory) Fail(f schema.Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = f
}

// Calls returns how many times method (SchemaByID, Latest,
// SubjectVersion, Register) was called.
func (m *Memory) Calls(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[method]
}

// begin counts a call and returns the configured failure, if any; m.mu
// is held.
func (m *Memory) begin(ctx context.Context, method string) error {
	m.calls[method]++
	if err := ctx.Err(); err != nil {
		return &schema.Error{Fault: schema.FaultRegistry, Err: fmt.Errorf("memory registry: %s: %w", method, err)}
	}
	if m.fail != "" {
		return &schema.Error{Fault: m.fail, Err: fmt.Errorf("memory registry: %s: made to fail with fault %s", method, m.fail)}
	}
	return nil
}

// SchemaByID returns schema id; an unknown id is schema.FaultRecord.
func (m *Memory) SchemaByID(ctx context.Context, id int) (schema.Schema, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(ctx, "SchemaByID"); err != nil {
		return schema.Schema{}, err
	}
	s, ok := m.byID[id]
	if !ok {
		return schema.Schema{}, &schema.Error{Fault: schema.FaultRecord, Err: fmt.Errorf("memory registry: schema id %d not found", id)}
	}
	return s, nil
}

// Latest returns subject's latest version; a subject without versions
// is schema.FaultSchema.
func (m *Memory) Latest(ctx context.Context, subject string) (schema.Subject, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(ctx, "Latest"); err != nil {
		return schema.Subject{}, err
	}
	vs := m.subjects[subject]
	if len(vs) == 0 {
		return schema.Subject{}, &schema.Error{Fault: schema.FaultSchema, Err: fmt.Errorf("memory registry: subject %q has no version", subject)}
	}
	return vs[len(vs)-1], nil
}

// SubjectVersion returns one version of subject (-1: the latest).
func (m *Memory) SubjectVersion(ctx context.Context, subject string, version int) (schema.Subject, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(ctx, "SubjectVersion"); err != nil {
		return schema.Subject{}, err
	}
	vs := m.subjects[subject]
	if version == -1 && len(vs) > 0 {
		return vs[len(vs)-1], nil
	}
	for _, v := range vs {
		if v.Version == version {
			return v, nil
		}
	}
	return schema.Subject{}, &schema.Error{Fault: schema.FaultSchema, Err: fmt.Errorf("memory registry: subject %q has no version %d", subject, version)}
}

// Register adds s to subject as its next version, or returns the version
// that has it already. The same text in another subject gets the same id.
func (m *Memory) Register(ctx context.Context, subject string, s schema.Schema) (schema.Subject, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.begin(ctx, "Register"); err != nil {
		return schema.Subject{}, err
	}
	if s.Type == "" {
		s.Type = schema.Avro
	}
	for _, v := range m.subjects[subject] {
		if reflect.DeepEqual(v.Schema, s) {
			return v, nil
		}
	}
	id := 0
	for known, ks := range m.byID {
		if reflect.DeepEqual(ks, s) {
			id = known
		}
	}
	if id == 0 {
		id = m.nextID
		m.nextID++
		m.byID[id] = s
	}
	sub := schema.Subject{Subject: subject, Version: len(m.subjects[subject]) + 1, ID: id, Schema: s}
	m.subjects[subject] = append(m.subjects[subject], sub)
	return sub, nil
}

// MustRegister is Register for test set-up: it panics on an error.
func (m *Memory) MustRegister(subject string, s schema.Schema) schema.Subject {
	sub, err := m.Register(context.Background(), subject, s)
	if err != nil {
		panic(err)
	}
	return sub
}

var _ schema.Registry = (*Memory)(nil)
