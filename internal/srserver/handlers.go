package srserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
)

// CcompatPrefix is the path under which Apicurio Registry serves its
// Confluent-compatible API; Handler serves the same API there too.
const CcompatPrefix = "/apis/ccompat/v7"

// maxBody bounds a request body (a schema with its references).
const maxBody = 8 << 20

// Handler returns the registry's HTTP API, served at the root and under
// CcompatPrefix.
func (s *Server) Handler() http.Handler {
	api := http.NewServeMux()
	api.HandleFunc("POST /subjects/{subject}/versions", s.handleRegister)
	api.HandleFunc("POST /subjects/{subject}", s.handleLookup)
	api.HandleFunc("GET /subjects", s.handleSubjects)
	api.HandleFunc("GET /subjects/{subject}/versions", s.handleVersions)
	api.HandleFunc("GET /subjects/{subject}/versions/{version}", s.handleVersion)
	api.HandleFunc("GET /schemas/ids/{id}", s.handleByID)
	api.HandleFunc("GET /schemas/ids/{id}/subjects", s.handleIDSubjects)
	api.HandleFunc("GET /schemas/ids/{id}/versions", s.handleIDVersions)
	api.HandleFunc("GET /config", s.handleGetConfig)
	api.HandleFunc("GET /config/{subject}", s.handleGetConfig)
	api.HandleFunc("PUT /config", s.handlePutConfig)
	api.HandleFunc("PUT /config/{subject}", s.handlePutConfig)
	api.HandleFunc("POST /compatibility/subjects/{subject}/versions/{version}", s.handleCheck)
	api.HandleFunc("POST /compatibility/subjects/{subject}/versions", s.handleCheck)
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{http.StatusNotFound, 404, fmt.Sprintf("HTTP 404 Not Found: %s %s", r.Method, r.URL.Path)})
	})
	root := http.NewServeMux()
	root.Handle(CcompatPrefix+"/", http.StripPrefix(CcompatPrefix, api))
	root.Handle("/", api)
	return root
}

// writeJSON answers v with status, as Confluent's content type.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client went away: nothing to do
}

func writeError(w http.ResponseWriter, e *apiError) { writeJSON(w, e.Status, e) }

// readRequest decodes a schema request body, or answers 422 and fails.
func readRequest(w http.ResponseWriter, r *http.Request) (schemaRequest, bool) {
	var req schemaRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	if err := dec.Decode(&req); err != nil {
		writeError(w, &apiError{http.StatusUnprocessableEntity, 422, "Unrecognized request body: " + err.Error()})
		return req, false
	}
	return req, true
}

func (s *Server) handleRegister(w http.ResponseWriter, r *http.Request) {
	req, ok := readRequest(w, r)
	if !ok {
		return
	}
	id, aerr := s.register(r.PathValue("subject"), req)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"id": id})
}

func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	req, ok := readRequest(w, r)
	if !ok {
		return
	}
	a, aerr := s.lookup(r.PathValue("subject"), req)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) handleSubjects(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	out := make([]string, 0, len(s.st.Subjects))
	for subj := range s.st.Subjects {
		out = append(out, subj)
	}
	s.mu.Unlock()
	sort.Strings(out)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleVersions(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	s.mu.Lock()
	ids, ok := s.st.Subjects[subject]
	out := make([]int, len(ids))
	for i := range ids {
		out[i] = i + 1
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, errSubject(subject))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request) {
	a, aerr := s.version(r.PathValue("subject"), r.PathValue("version"))
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// pathID parses {id}, or answers 404 (40403) and fails.
func pathID(w http.ResponseWriter, r *http.Request) (int, bool) {
	id, err := strconv.Atoi(r.PathValue("id"))
	if err != nil || id < 1 {
		writeError(w, errSchema(fmt.Sprintf("Schema %s", r.PathValue("id"))))
		return 0, false
	}
	return id, true
}

func (s *Server) handleByID(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	sc, ok := s.schema(id)
	s.mu.Unlock()
	if !ok {
		writeError(w, errSchema(fmt.Sprintf("Schema %d", id)))
		return
	}
	out := struct {
		Schema     string      `json:"schema"`
		Type       string      `json:"schemaType,omitempty"`
		References []Reference `json:"references,omitempty"`
	}{sc.Schema, sc.Type, sc.References}
	if out.Type == typeAvro {
		out.Type = ""
	}
	writeJSON(w, http.StatusOK, out)
}

// pathUsages returns the subject versions that use the schema the path's
// id names; for an id that is not a number or names no schema it writes
// the registry's error and returns false.
func (s *Server) pathUsages(w http.ResponseWriter, r *http.Request) ([]subjectVersion, bool) {
	id, ok := pathID(w, r)
	if !ok {
		return nil, false
	}
	us, aerr := s.usages(id)
	if aerr != nil {
		writeError(w, aerr)
		return nil, false
	}
	return us, true
}

func (s *Server) handleIDSubjects(w http.ResponseWriter, r *http.Request) {
	us, ok := s.pathUsages(w, r)
	if !ok {
		return
	}
	out := []string{}
	for _, u := range us {
		if len(out) == 0 || out[len(out)-1] != u.Subject {
			out = append(out, u.Subject)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleIDVersions(w http.ResponseWriter, r *http.Request) {
	us, ok := s.pathUsages(w, r)
	if !ok {
		return
	}
	type sv struct {
		Subject string `json:"subject"`
		Version int    `json:"version"`
	}
	out := make([]sv, len(us))
	for i, u := range us {
		out[i] = sv{u.Subject, u.Version}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleGetConfig answers the global level, or a subject's: 40408 when
// it has none of its own, unless ?defaultToGlobal=true.
func (s *Server) handleGetConfig(w http.ResponseWriter, r *http.Request) {
	subject := r.PathValue("subject")
	s.mu.Lock()
	level, own := s.st.SubjectCompat[subject]
	if subject == "" || (!own && r.URL.Query().Get("defaultToGlobal") == "true") {
		level, own = s.st.Compatibility, true
	}
	s.mu.Unlock()
	if !own {
		writeError(w, &apiError{http.StatusNotFound, 40408, fmt.Sprintf("Subject '%s' does not have subject-level compatibility configured", subject)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"compatibilityLevel": level})
}

func (s *Server) handlePutConfig(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Compatibility string `json:"compatibility"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(&req); err != nil {
		writeError(w, &apiError{http.StatusUnprocessableEntity, 422, "Unrecognized request body: " + err.Error()})
		return
	}
	if aerr := s.setLevel(r.PathValue("subject"), req.Compatibility); aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"compatibility": req.Compatibility})
}

func (s *Server) handleCheck(w http.ResponseWriter, r *http.Request) {
	req, ok := readRequest(w, r)
	if !ok {
		return
	}
	msgs, aerr := s.check(r.PathValue("subject"), r.PathValue("version"), req)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	out := map[string]any{"is_compatible": len(msgs) == 0}
	if r.URL.Query().Get("verbose") == "true" {
		out["messages"] = msgs
	}
	writeJSON(w, http.StatusOK, out)
}
