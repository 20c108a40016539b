package srserver

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// apiError is an error in Confluent's form: an HTTP status and a code.
type apiError struct {
	Status int    `json:"-"`
	Code   int    `json:"error_code"`
	Msg    string `json:"message"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %d: %s", e.Status, e.Code, e.Msg) }

func errSubject(s string) *apiError {
	return &apiError{http.StatusNotFound, 40401, fmt.Sprintf("Subject '%s' not found.", s)}
}

func errVersion(v string) *apiError {
	return &apiError{http.StatusNotFound, 40402, fmt.Sprintf("Version %s not found.", v)}
}

func errSchema(what string) *apiError {
	return &apiError{http.StatusNotFound, 40403, what + " not found."}
}

func errInvalid(err error) *apiError {
	return &apiError{http.StatusUnprocessableEntity, 42201, "Invalid schema: " + err.Error()}
}

func errStore(err error) *apiError {
	return &apiError{http.StatusInternalServerError, 50001, "Error in the backend data store: " + err.Error()}
}

// schemaRequest is the body of register, lookup and compatibility checks.
type schemaRequest struct {
	Schema     string      `json:"schema"`
	Type       string      `json:"schemaType"`
	References []Reference `json:"references"`
}

// subjectVersion is the answer about one version of a subject.
type subjectVersion struct {
	Subject    string      `json:"subject"`
	Version    int         `json:"version"`
	ID         int         `json:"id"`
	Type       string      `json:"schemaType,omitempty"` // omitted for Avro, as Confluent does
	Schema     string      `json:"schema"`
	References []Reference `json:"references,omitempty"`
}

// candidate turns a request into the schema it asks for, or fails with
// 42201 for an unknown type.
func candidate(req schemaRequest) (stored, *apiError) {
	typ, ok := schemaType(req.Type)
	if !ok {
		return stored{}, &apiError{http.StatusUnprocessableEntity, 42201, fmt.Sprintf("Invalid schema type %q.", req.Type)}
	}
	refs := req.References
	if len(refs) == 0 {
		refs = nil
	}
	return stored{Type: typ, Schema: req.Schema, References: refs}, nil
}

// schema returns the schema of id; called with mu held.
func (s *Server) schema(id int) (stored, bool) {
	i := sort.Search(len(s.st.Schemas), func(i int) bool { return s.st.Schemas[i].ID >= id })
	if i < len(s.st.Schemas) && s.st.Schemas[i].ID == id {
		return s.st.Schemas[i], true
	}
	return stored{}, false
}

// resolve finds what a reference names; called with mu held.
func (s *Server) resolve(r Reference) (stored, bool) {
	ids := s.st.Subjects[r.Subject]
	v := r.Version
	if v == -1 {
		v = len(ids)
	}
	if v < 1 || v > len(ids) {
		return stored{}, false
	}
	return s.schema(ids[v-1])
}

// answer describes version v (1-based) of subject; called with mu held.
func (s *Server) answer(subject string, v int) subjectVersion {
	sc, _ := s.schema(s.st.Subjects[subject][v-1])
	a := subjectVersion{Subject: subject, Version: v, ID: sc.ID, Type: sc.Type, Schema: sc.Schema, References: sc.References}
	if a.Type == typeAvro {
		a.Type = ""
	}
	return a
}

// find returns the version of subject that holds c, or 0.
func (s *Server) find(subject string, c stored) int {
	id, ok := s.byKey[identity(c.Type, c.Schema, c.References)]
	if !ok {
		return 0
	}
	for i, v := range s.st.Subjects[subject] {
		if v == id {
			return i + 1
		}
	}
	return 0
}

// level is the compatibility level in force for subject.
func (s *Server) level(subject string) string {
	if l, ok := s.st.SubjectCompat[subject]; ok {
		return l
	}
	return s.st.Compatibility
}

// register adds req to subject as its next version, unless the subject
// holds it already, and returns its id.
func (s *Server) register(subject string, req schemaRequest) (int, *apiError) {
	c, aerr := candidate(req)
	if aerr != nil {
		return 0, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.find(subject, c); v > 0 {
		return s.st.Subjects[subject][v-1], nil
	}
	if err := validate(c.Type, c.Schema, c.References, s.resolve); err != nil {
		return 0, errInvalid(err)
	}
	var previous []stored
	for _, id := range s.st.Subjects[subject] {
		sc, _ := s.schema(id)
		previous = append(previous, sc)
	}
	msgs, err := compatible(s.level(subject), c, previous, s.resolve)
	if err != nil {
		return 0, errInvalid(err)
	}
	if len(msgs) > 0 {
		return 0, &apiError{http.StatusConflict, 409, fmt.Sprintf("Schema being registered is incompatible with an earlier schema for subject %q: %v", subject, msgs)}
	}
	key := identity(c.Type, c.Schema, c.References)
	id, known := s.byKey[key]
	if !known {
		id = s.st.NextID
		c.ID = id
		s.st.NextID++
		s.st.Schemas = append(s.st.Schemas, c)
		s.byKey[key] = id
	}
	s.st.Subjects[subject] = append(s.st.Subjects[subject], id)
	if err := s.save(); err != nil {
		// Keep memory and file alike: undo.
		s.st.Subjects[subject] = s.st.Subjects[subject][:len(s.st.Subjects[subject])-1]
		if len(s.st.Subjects[subject]) == 0 {
			delete(s.st.Subjects, subject)
		}
		if !known {
			s.st.Schemas = s.st.Schemas[:len(s.st.Schemas)-1]
			s.st.NextID--
			delete(s.byKey, key)
		}
		return 0, errStore(err)
	}
	return id, nil
}

// lookup finds req among subject's versions.
func (s *Server) lookup(subject string, req schemaRequest) (subjectVersion, *apiError) {
	c, aerr := candidate(req)
	if aerr != nil {
		return subjectVersion{}, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.st.Subjects[subject]; !ok {
		return subjectVersion{}, errSubject(subject)
	}
	v := s.find(subject, c)
	if v == 0 {
		return subjectVersion{}, errSchema("Schema")
	}
	return s.answer(subject, v), nil
}

// versionOf parses a version argument against subject's n versions:
// "latest" or -1 is n. Called with mu held.
func versionOf(arg string, n int) (int, *apiError) {
	if arg == "latest" {
		return n, nil
	}
	v, err := strconv.Atoi(arg)
	if err != nil || v == 0 || v < -1 {
		return 0, &apiError{http.StatusUnprocessableEntity, 42202, fmt.Sprintf("The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\"", arg)}
	}
	if v == -1 {
		return n, nil
	}
	if v > n {
		return 0, errVersion(arg)
	}
	return v, nil
}

// version returns version arg of subject.
func (s *Server) version(subject, arg string) (subjectVersion, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids, ok := s.st.Subjects[subject]
	if !ok {
		return subjectVersion{}, errSubject(subject)
	}
	v, aerr := versionOf(arg, len(ids))
	if aerr != nil {
		return subjectVersion{}, aerr
	}
	return s.answer(subject, v), nil
}

// check reports whether req may follow version arg of subject (or all of
// them, arg empty) at the subject's level.
func (s *Server) check(subject, arg string, req schemaRequest) ([]string, *apiError) {
	c, aerr := candidate(req)
	if aerr != nil {
		return nil, aerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids, ok := s.st.Subjects[subject]
	if !ok {
		return nil, errSubject(subject)
	}
	if err := validate(c.Type, c.Schema, c.References, s.resolve); err != nil {
		return nil, errInvalid(err)
	}
	var against []stored
	level := s.level(subject)
	if arg == "" {
		for _, id := range ids {
			sc, _ := s.schema(id)
			against = append(against, sc)
		}
		if level != "NONE" && !strings.HasSuffix(level, "_TRANSITIVE") {
			level += "_TRANSITIVE"
		}
	} else {
		v, aerr := versionOf(arg, len(ids))
		if aerr != nil {
			return nil, aerr
		}
		sc, _ := s.schema(ids[v-1])
		against = []stored{sc}
	}
	msgs, err := compatible(level, c, against, s.resolve)
	if err != nil {
		return nil, errInvalid(err)
	}
	return msgs, nil
}

// usages lists the subject versions that use id.
func (s *Server) usages(id int) ([]subjectVersion, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.schema(id); !ok {
		return nil, errSchema(fmt.Sprintf("Schema %d", id))
	}
	subjects := make([]string, 0, len(s.st.Subjects))
	for subj := range s.st.Subjects {
		subjects = append(subjects, subj)
	}
	sort.Strings(subjects)
	out := []subjectVersion{}
	for _, subj := range subjects {
		for i, v := range s.st.Subjects[subj] {
			if v == id {
				out = append(out, subjectVersion{Subject: subj, Version: i + 1})
			}
		}
	}
	return out, nil
}

// setLevel sets the level of subject, or the global one (subject empty).
func (s *Server) setLevel(subject, level string) *apiError {
	if !validLevel(level) {
		return &apiError{http.StatusUnprocessableEntity, 42203, fmt.Sprintf("Invalid compatibility level %q.", level)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prevGlobal, prevSubject, had := s.st.Compatibility, s.st.SubjectCompat[subject], false
	if subject == "" {
		s.st.Compatibility = level
	} else {
		_, had = s.st.SubjectCompat[subject]
		s.st.SubjectCompat[subject] = level
	}
	if err := s.save(); err != nil {
		s.st.Compatibility = prevGlobal
		if subject != "" && had {
			s.st.SubjectCompat[subject] = prevSubject
		} else if subject != "" {
			delete(s.st.SubjectCompat, subject)
		}
		return errStore(err)
	}
	return nil
}
