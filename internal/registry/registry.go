// Package registry is the one map of plugins by name that the transform
// and sink registries build on: safe for concurrent use, its zero value
// empty and ready, a duplicate name a panic (a programming mistake found
// at start-up, as database/sql.Register treats it).
package registry

import (
	"fmt"
	"sort"
	"sync"
)

// Map holds specs of type S by name.
type Map[S any] struct {
	mu    sync.RWMutex
	specs map[string]S
}

// Add registers spec under name; kind ("transform", "sink") names the
// registry in the panic for a name taken already.
func (m *Map[S]) Add(kind, name string, spec S) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.specs == nil {
		m.specs = make(map[string]S)
	}
	if _, dup := m.specs[name]; dup {
		panic(fmt.Sprintf("%s: Register called twice for %q", kind, name))
	}
	m.specs[name] = spec
}

// Lookup returns the spec registered under name.
func (m *Map[S]) Lookup(name string) (S, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s, ok := m.specs[name]
	return s, ok
}

// Names returns the registered names, sorted.
func (m *Map[S]) Names() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	names := make([]string, 0, len(m.specs))
	for n := range m.specs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LowerName reports whether s is a lower-case identifier (a-z, then a-z,
// 0-9 or _), the form of a sink's name.
func LowerName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '_')) {
			return false
		}
	}
	return true
}
