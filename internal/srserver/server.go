// Package srserver is a small in-process Schema Registry that speaks the
// subset of Confluent's REST API the processor and its tests use, for
// trying things on one machine (make run) and for fast tests. It is never
// for production: it keeps everything in memory (and, optionally, in one
// JSON file), has no authentication, no schema contexts, no modes, no
// deletes, and checks compatibility only of Avro schemas.
//
// What it serves, at the root and under /apis/ccompat/v7 (so that a URL
// works against it and against Apicurio Registry alike):
//
//	POST /subjects/{s}/versions          register: {"id":N}
//	POST /subjects/{s}                   look a schema up in a subject
//	GET  /subjects                       the subjects
//	GET  /subjects/{s}/versions          a subject's versions
//	GET  /subjects/{s}/versions/{v}      a version, or "latest" (or -1)
//	GET  /schemas/ids/{id}               the schema of an id
//	GET  /schemas/ids/{id}/subjects      the subjects that use an id
//	GET  /schemas/ids/{id}/versions      the subject versions that use it
//	GET|PUT /config, /config/{s}         compatibility levels
//	POST /compatibility/subjects/{s}/versions/{v}   check a schema
//
// Ids are Confluent's: one schema (its type, its text once compacted if it
// is JSON, and its references) has one id under every subject, and
// registering it again under a subject returns that subject's version.
// Compatibility: the level is stored and reported for every type, but only
// Avro schemas are checked against it (with twmb/avro's
// CheckCompatibility, which follows the Avro specification's resolution rules);
// Protobuf and JSON Schema schemas are accepted at every level, as if it
// were NONE. Errors have Confluent's form, {"error_code":40401,"message":..},
// with its status codes.
package srserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// DefaultCompatibility is the global level of a new registry, Confluent's
// default.
const DefaultCompatibility = "BACKWARD"

// stateFile is the name of the file in Options.Dir.
const stateFile = "registry.json"

// Options configure a Server.
type Options struct {
	// Dir, when set, is a folder where the registry keeps its state, one
	// JSON file rewritten atomically (written beside, then renamed) after
	// every change, so that a restart keeps schema ids. Empty: memory only.
	Dir string
	// Compatibility is the global level of a registry with no saved
	// state; DefaultCompatibility when empty.
	Compatibility string
}

// Reference is a schema's reference to a version of another subject (an
// Avro named type, a Protobuf import).
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// stored is one registered schema: what an id stands for.
type stored struct {
	ID         int         `json:"id"`
	Type       string      `json:"schemaType"` // AVRO, PROTOBUF or JSON
	Schema     string      `json:"schema"`
	References []Reference `json:"references,omitempty"`
}

// state is what the registry knows; its JSON form is the saved file.
type state struct {
	NextID        int               `json:"next_id"`
	Schemas       []stored          `json:"schemas"`  // by id, ascending
	Subjects      map[string][]int  `json:"subjects"` // subject -> ids of versions 1..n
	Compatibility string            `json:"compatibility"`
	SubjectCompat map[string]string `json:"subject_compatibility,omitempty"`
}

// Server is one registry. Its methods are safe for concurrent use.
type Server struct {
	opts Options

	mu    sync.Mutex
	st    state
	byKey map[string]int // identity key -> id

	srvMu sync.Mutex
	srv   *http.Server
	done  chan struct{}
}

// New returns a registry, with the state saved in opts.Dir when there is
// one. It fails when that state cannot be read, or the folder not made.
func New(opts Options) (*Server, error) {
	if opts.Compatibility == "" {
		opts.Compatibility = DefaultCompatibility
	}
	if !validLevel(opts.Compatibility) {
		return nil, fmt.Errorf("srserver: compatibility %q is not a level (NONE, BACKWARD, FORWARD, FULL, or one of those _TRANSITIVE)", opts.Compatibility)
	}
	s := &Server{opts: opts, byKey: map[string]int{}}
	s.st = state{NextID: 1, Subjects: map[string][]int{}, Compatibility: opts.Compatibility, SubjectCompat: map[string]string{}}
	if opts.Dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("srserver: making its folder: %w", err)
	}
	b, err := os.ReadFile(filepath.Join(opts.Dir, stateFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("srserver: reading its state: %w", err)
	}
	if err := json.Unmarshal(b, &s.st); err != nil {
		return nil, fmt.Errorf("srserver: reading its state %s: %w", filepath.Join(opts.Dir, stateFile), err)
	}
	if s.st.Subjects == nil {
		s.st.Subjects = map[string][]int{}
	}
	if s.st.SubjectCompat == nil {
		s.st.SubjectCompat = map[string]string{}
	}
	for _, sc := range s.st.Schemas {
		s.byKey[identity(sc.Type, sc.Schema, sc.References)] = sc.ID
	}
	return s, nil
}

// save writes the state to the folder, if any: to a file beside, synced,
// then renamed over the old one. Called with mu held.
func (s *Server) save() error {
	if s.opts.Dir == "" {
		return nil
	}
	b, err := json.MarshalIndent(&s.st, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the state: %w", err)
	}
	f, err := os.CreateTemp(s.opts.Dir, stateFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("saving the state: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, filepath.Join(s.opts.Dir, stateFile))
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("saving the state to %s: %w", s.opts.Dir, werr)
	}
	return nil
}

// Start serves the registry on addr (host:port; port 0 picks one) until
// ctx ends or Close is called, and returns its base URL, e.g.
// http://127.0.0.1:8081. It fails when addr cannot be listened on or the
// server already runs.
func (s *Server) Start(ctx context.Context, addr string) (string, error) {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv != nil {
		return "", errors.New("srserver: already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("srserver: listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.srv, s.done = srv, make(chan struct{})
	done := s.done
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // ErrServerClosed after Close
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = srv.Close()
		case <-done:
		}
	}()
	return "http://" + ln.Addr().String(), nil
}

// Close stops the server Start started, closing its connections, and
// waits for it. It is a no-op when none runs.
func (s *Server) Close() error {
	s.srvMu.Lock()
	srv, done := s.srv, s.done
	s.srv, s.done = nil, nil
	s.srvMu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Close()
	<-done
	if err != nil {
		return fmt.Errorf("srserver: closing: %w", err)
	}
	return nil
}
