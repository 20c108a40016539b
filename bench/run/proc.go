package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/streamproc/processor/internal/launch"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// unknownVar says why the run does not count if the processor logged that
// it ignores one of the settings the system needs.
func unknownVar(s *runSpec) string {
	if len(s.sys.needs) == 0 {
		return ""
	}
	b, err := os.ReadFile(s.log)
	if err != nil {
		return ""
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.Contains(line, []byte("ignoring an unknown variable")) {
			continue
		}
		for _, v := range s.sys.needs {
			if bytes.Contains(line, []byte(`"`+v+`"`)) || bytes.Contains(line, []byte("="+v)) {
				return fmt.Sprintf("the processor logs that it ignores %s (not implemented in this build)", v)
			}
		}
	}
	return ""
}

// rejected says why the run does not count if the processor exited with
// a configuration error (exit code 2) about one of the settings the system
// needs: it knows the variable but not yet the value.
func rejected(s *runSpec, p *launch.Process) string {
	if len(s.sys.needs) == 0 || p.ExitCode() != 2 {
		return ""
	}
	b, _ := os.ReadFile(s.log)
	for _, line := range strings.Split(string(b), "\n") {
		for _, v := range s.sys.needs {
			if strings.Contains(line, v) && strings.Contains(line, "configuration error") {
				return "the processor rejects the setting: " + strings.TrimSpace(line)
			}
		}
	}
	return ""
}

// cpuSeconds is utime+stime of the process and of its waited-for children.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	var ticks int64
	for _, k := range []int{14, 15, 16, 17} { // utime, stime, cutime, cstime
		v, err := strconv.ParseInt(f[k-3], 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += v
	}
	return float64(ticks) / clockTicks, nil
}

// peakRSS is VmHWM from /proc/<pid>/status, in bytes.
func peakRSS(pid int) (int64, error) {
	return procBytes("/proc/"+strconv.Itoa(pid)+"/status", "VmHWM")
}

// procBytes reads the line "key: N kB" of a /proc file such as
// /proc/meminfo, and returns N in bytes.
func procBytes(path, key string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in %s", key, path)
}

// logTail is the last three lines of a log, joined by " | ".
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}
