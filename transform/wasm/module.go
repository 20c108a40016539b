package wasm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/streamproc/processor/transform"
)

// Checking the settings and the module at start: every error names the
// setting at fault.

// readModule checks the settings' bounds and reads the module's bytes.
func readModule(s *Settings) ([]byte, error) {
	if s.Module == "" {
		return nil, transform.Missing("MODULE", "")
	}
	if s.MaxMemory < minMemory || s.MaxMemory > maxMemory {
		return nil, transform.Invalid("MAX_MEMORY", s.MaxMemory.String(), "")
	}
	if s.Timeout != 0 && (s.Timeout < minTimeout || s.Timeout > maxTimeout) {
		return nil, transform.Invalid("TIMEOUT", s.Timeout.String(), "")
	}
	stores, err := parseStores(s.Stores)
	if err != nil {
		return nil, err
	}
	if _, err := parseEmitStores(s.EmitStores, stores); err != nil {
		return nil, err
	}
	if _, err := parseNames("TABLES", s.Tables); err != nil {
		return nil, err
	}
	if s.TableMode != "" && s.TableMode != "co_partitioned" && s.TableMode != "global" {
		return nil, transform.Invalid("TABLE_MODE", s.TableMode, "")
	}
	bin, err := os.ReadFile(s.Module)
	if err != nil {
		return nil, bad("MODULE", s.Module, "a readable WebAssembly module file ("+firstLine(err)+")")
	}
	return bin, nil
}

// compile compiles bin into t.compiled and checks it against the ABI and
// the settings s; its errors are the configuration errors to report.
func (t *Transform) compile(ctx context.Context, s *Settings, bin []byte) error {
	var err error
	if t.compiled, err = t.rt.CompileModule(ctx, bin); err != nil {
		want := "a valid WebAssembly module (" + firstLine(err) + ")"
		if strings.Contains(err.Error(), "memory") && strings.Contains(err.Error(), "limit") {
			return bad("MAX_MEMORY", s.MaxMemory.String(), "at least the module's minimum memory ("+firstLine(err)+")")
		}
		if strings.Contains(err.Error(), `feature "reference-types" is disabled`) {
			want = "a WebAssembly module that does not use reference types, which the host turns off (" + firstLine(err) + ")"
		}
		return bad("MODULE", s.Module, want)
	}
	// wazero allocates a module's table when it instantiates it, one word
	// an entry, however big the table is declared.
	if n := tableSize(bin); n > maxTable {
		return bad("MODULE", s.Module, fmt.Sprintf("a module whose table holds at most %d entries (it declares %d)", maxTable, n))
	}
	err = checkModule(t.compiled, len(t.stores) > 0, len(t.tables) > 0)
	if err == nil {
		err = checkClosedExport(t.compiled, len(t.emit) > 0)
	}
	if err != nil {
		var none errNoStores
		if errors.As(err, &none) {
			return transform.Missing("STORES", " (the module imports "+HostModule+"."+none.fn+", a state store function)")
		}
		var noTables errNoTables
		if errors.As(err, &noTables) {
			return transform.Missing("TABLES", " (the module imports "+HostModule+"."+noTables.fn+", the table function)")
		}
		return bad("MODULE", s.Module, "a module implementing the processor's wasm ABI version 1 (see transform/wasm/ABI.md): "+err.Error())
	}
	return nil
}

// checkModule checks the module's exports and imports against the ABI
// before anything runs. stores says whether the transform declares state
// stores, which the processor import module's functions need.
func checkModule(m wazero.CompiledModule, stores, tables bool) error {
	i32 := api.ValueTypeI32
	want := []struct {
		name            string
		params, results []api.ValueType
	}{
		{"processor_abi_version", nil, []api.ValueType{i32}},
		{"processor_alloc", []api.ValueType{i32}, []api.ValueType{i32}},
		{"processor_process", []api.ValueType{i32, i32}, []api.ValueType{i32}},
	}
	exports := m.ExportedFunctions()
	if _, cmd := exports["_start"]; cmd {
		if _, reactor := exports["_initialize"]; !reactor {
			return errors.New("it is a WASI command (it exports _start, not _initialize); build a Go plugin as a reactor with GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared")
		}
	}
	for _, w := range want {
		f, ok := exports[w.name]
		if !ok {
			return fmt.Errorf("it does not export %s", w.name)
		}
		if !slices.Equal(f.ParamTypes(), w.params) || !slices.Equal(f.ResultTypes(), w.results) {
			return fmt.Errorf("its %s has the wrong signature", w.name)
		}
	}
	if _, ok := m.ExportedMemories()["memory"]; !ok {
		return errors.New(`it does not export its memory as "memory"`)
	}
	for _, f := range m.ImportedFunctions() {
		switch mod, name, _ := f.Import(); mod {
		case wasi_snapshot_preview1.ModuleName:
		case HostModule:
			if err := checkHostImport(f, stores, tables); err != nil {
				return err
			}
		default:
			return fmt.Errorf("it imports %s.%s; only %s and %s are provided", mod, name, wasi_snapshot_preview1.ModuleName, HostModule)
		}
	}
	return nil
}
