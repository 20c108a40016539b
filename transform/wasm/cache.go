package wasm

import "github.com/tetratelabs/wazero"

// NewWithCache is New with a wazero compilation cache that the caller
// shares between transforms and closes after them: a module already
// compiled into it, by another transform or, for a cache kept in a
// directory (wazero.NewCompilationCacheWithDir), by an earlier process,
// is loaded instead of compiled again. The cache is keyed by the module's
// bytes and by whether Timeout is 0, which wazero compiles differently.
func NewWithCache(s *Settings, cache wazero.CompilationCache) (*Transform, error) {
	return newTransform(s, cache)
}

// newCache is the compilation cache of New: nil in the processor, where
// each transform compiles its own module; this package's tests set it so
// that the transforms they build through the registry share theirs.
var newCache wazero.CompilationCache
