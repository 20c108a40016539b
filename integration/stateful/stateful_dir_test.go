package stateful

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/streamproc/processor/internal/testkit/itest"

	"github.com/streamproc/processor/internal/launch"
)

// TestStatefulStateDirUnusable: a PROCESSOR_STATE_DIR that cannot be used
// for a reason a rebuild from the changelogs would not fix makes the
// processor exit 2 with one line naming the variable, and leaves what is
// there alone. The tests run as root, whom permissions do not stop, so
// each refusal is one the kernel makes to root too, or the processor runs
// as another user: a file where the directory must be; a read-only
// filesystem and a full one (tmpfs mounts of their own, when the test may
// mount); a directory of root's, 0755, for the processor run as nobody.
func TestStatefulStateDirUnusable(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in, out := itest.Unique("statedir-in"), itest.Unique("statedir-out")
		tg.NewTopics(t, 2, in, out)
		base := t.TempDir()
		file := filepath.Join(base, "file")
		if err := os.WriteFile(file, []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name, dir string
			uid       int // 0: root
		}{
			{"file-where-the-directory-must-be", file, 0},
			{"below-a-file", filepath.Join(file, "state"), 0},
		}
		if ro := tmpfs(t, syscall.MS_RDONLY, "size=1m"); ro != "" {
			cases = append(cases, struct {
				name, dir string
				uid       int
			}{"read-only-filesystem", filepath.Join(ro, "state"), 0})
		}
		if full := tmpfs(t, 0, "size=64k"); full != "" {
			fill(t, full)
			cases = append(cases, struct {
				name, dir string
				uid       int
			}{"full-filesystem", filepath.Join(full, "state"), 0})
		}
		owned := openDir(t) // root's, 0755, on a path anyone may walk

		cases = append(cases, struct {
			name, dir string
			uid       int
		}{"not-writable-by-its-user", filepath.Join(owned, "state"), 65534})
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				group := itest.Unique("statedir-group")
				inst := tg.BinaryInstance(group, group+"-1", in, out)
				itest.Stateful(tc.dir, "partition", "0", []string{"aggregate"}, nil)(&inst)
				code, output := runAs(t, inst, tc.uid)
				var lines []string
				for _, l := range strings.Split(strings.TrimSpace(output), "\n") {
					if strings.Contains(l, "configuration error") {
						lines = append(lines, l)
					}
				}
				if code != 2 || len(lines) != 1 || !strings.Contains(lines[0], "PROCESSOR_STATE_DIR="+`"`+tc.dir+`"`) ||
					strings.Contains(output, "goroutine ") {
					t.Fatalf("exit %d, output:\n%s\nwant exit 2 and one line naming PROCESSOR_STATE_DIR=%q", code, output, tc.dir)
				}
				t.Log(lines[0])
			})
		}
		if b, err := os.ReadFile(file); err != nil || string(b) != "mine" {
			t.Fatalf("the file is now %q (%v)", b, err)
		}
	})
}

// runAs runs the processor as inst until it exits, as the user uid (0:
// the test's), and returns its exit code and output.
func runAs(t *testing.T, inst launch.Instance, uid int) (int, string) {
	t.Helper()
	bin := itest.Binary(t)
	if uid != 0 { // a copy the user can run: the build's directory is root's alone
		dir := openDir(t)
		src, err := os.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		bin = filepath.Join(dir, "processor")
		dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		if err := dst.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), itest.ExitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = launch.Environ(launch.PathOnly, inst.Env()...)
	cmd.Dir = os.TempDir()
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("still running after %s:\n%s", itest.ExitTimeout, out)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running %s: %v", bin, err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// openDir is a new directory of the test's user, 0755, in a directory
// any user may walk (a test's own temporary directory is 0700), removed
// when the test ends.
func openDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "processor-statedir")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// tmpfs mounts a tmpfs of flags and opts on a directory of its own,
// unmounted when the test ends; "" when the test may not mount (not root,
// no CAP_SYS_ADMIN), with the reason logged.
func tmpfs(t *testing.T, flags uintptr, opts string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", flags, opts); err != nil {
		t.Logf("no tmpfs (%v): that case is left out", err)
		return ""
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, 0) })
	return dir
}

// fill writes to dir until its filesystem is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return
		}
	}
}

// A damaged local store is rebuilt from the changelogs, and the counts go
// on exactly: the processor stopped by SIGTERM, its store damaged on disk
// (every table cut in half, the MANIFEST emptied), and started again logs
// the damage, counts the rebuilt partitions in
// processor_state_rebuilds_total{reason="damaged"} and counts every key
// 1, 2, 3, ... with no repeat and no gap.
func TestStatefulCountThroughDamagedStore(t *testing.T) {
	t.Parallel()
	itest.ForEachTarget(t, func(t *testing.T, tg *itest.Target) {
		in := itest.Input{Topic: itest.Unique("damaged-in"), N: 3000, Keys: 30}
		out, group := itest.Unique("damaged-out"), itest.Unique("damaged-group")
		tg.NewTopics(t, 4, in.Topic, out)
		dir := t.TempDir()
		set := itest.Stateful(dir, "partition", "0", []string{"aggregate"}, nil)
		tg.Produce(t, in, 0, in.N/2)
		p1 := tg.StartBinary(t, group, group+"-1", in.Topic, out, set)
		tg.WaitCaughtUp(t, group, in.Topic)
		p1.Terminate(t)

		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		damaged := 0
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			info, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case strings.HasSuffix(e.Name(), ".sst"):
				err = os.Truncate(p, info.Size()/2)
			case strings.HasPrefix(e.Name(), "MANIFEST-"):
				err = os.Truncate(p, 0)
			default:
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			damaged++
		}
		if damaged == 0 {
			t.Fatalf("nothing to damage in %s: %v", dir, entries)
		}

		addr := itest.FreeAddr(t)
		p2 := tg.StartBinary(t, group, group+"-1", in.Topic, out, set, func(inst *launch.Instance) { inst.HTTPAddr = addr })
		tg.Produce(t, in, in.N/2, in.N)
		tg.WaitCaughtUp(t, group, in.Topic)
		_, metrics := itest.HTTPGet(addr, "/metrics")
		p2.Terminate(t)
		if !strings.Contains(p2.Logs.String(), "the local store was damaged") {
			t.Errorf("no line about the damage in the log:\n%s", p2.Logs.String())
		}
		if want := `processor_state_rebuilds_total{reason="damaged",store="aggregate"} 4`; !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
		if _, rebuilt := itest.Restored(p2); !rebuilt {
			t.Error("the damaged store was not rebuilt from the changelog")
		}
		outs := tg.ReadAll(t, out, true)
		if len(outs) != in.N {
			t.Errorf("%d outputs of %d inputs", len(outs), in.N)
		}
		checkCounts(t, in, outs)
		n, _ := itest.Restored(p2)
		t.Logf("%s: %d files damaged; the restart rebuilt the store from %d changelog records", tg.Name, damaged, n)
	})
}
