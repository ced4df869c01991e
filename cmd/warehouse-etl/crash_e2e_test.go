package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"warehouse-etl/warehouse"
)

// The crash test: real build processes killed with SIGKILL at points spread
// over scan, transform and publish, fresh builds and WAREHOUSE_CLEAR=1
// rebuilds of a published version. After every kill the output root holds
// only complete versions (each passes verify --full and has the reference
// build's shard bytes), a "latest" that names one of them, locks and
// temporaries; a rebuild of an existing version leaves it readable all the
// time and complete, the old one or the new one. After every kill series a
// clean rerun succeeds with the same bytes, and a rerun that builds removes
// every temporary of its version.

// The log lines (--log-format json, field "msg") that mark the phases.
const (
	crashMsgStarted   = "build started"    // lock held, temporary directory made: scan begins
	crashMsgScanDone  = "scan done"        // transform and write begin
	crashMsgExported  = "parquet exported" // manifest, fsync, rename, latest follow
	crashMsgPublished = "build published"  // only the exit remains
)

var (
	crashVersionRE   = regexp.MustCompile(`^v[0-9a-f]{16}$`)
	crashLockRE      = regexp.MustCompile(`^\.v[0-9a-f]{16}\.(lock|readers)$`) // build and reader locks
	crashTmpRE       = regexp.MustCompile(`^\.\.?(v[0-9a-f]{16})(\.config|\.inputs)?\.tmp-`)
	crashLatestTmpRE = regexp.MustCompile(`^\.latest(-[^/]+)?\.tmp-(v[0-9a-f]{16})$`)
)

// crashLog collects a build's stderr and the time each phase message
// first arrived.
type crashLog struct {
	start   time.Time
	mu      sync.Mutex
	partial []byte
	text    strings.Builder
	seen    map[string]time.Duration
	last    string
	notify  chan struct{} // closed and replaced at every new message
}

func newCrashLog(start time.Time) *crashLog {
	return &crashLog{start: start, seen: map[string]time.Duration{}, notify: make(chan struct{})}
}

func (l *crashLog) Write(p []byte) (int, error) {
	now := time.Since(l.start)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		line := l.partial[:i]
		l.text.Write(line)
		l.text.WriteByte('\n')
		var rec struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Msg != "" {
			switch rec.Msg {
			case crashMsgStarted, crashMsgScanDone, crashMsgExported, crashMsgPublished:
				if _, ok := l.seen[rec.Msg]; !ok {
					l.seen[rec.Msg] = now
					l.last = rec.Msg
				}
			}
			close(l.notify)
			l.notify = make(chan struct{})
		}
		l.partial = l.partial[i+1:]
	}
	return len(p), nil
}

func (l *crashLog) when(msg string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d, ok := l.seen[msg]
	return d, ok
}

func (l *crashLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String() + string(l.partial)
}

// crashProc is one build process.
type crashProc struct {
	cmd    *exec.Cmd
	start  time.Time
	log    *crashLog
	stdout bytes.Buffer
	exited chan struct{}
}

// crashEnv is the environment of a build: ours without WAREHOUSE_*
// settings, plus WAREHOUSE_CLEAR=1 on request.
func crashEnv(clear bool) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WAREHOUSE_") {
			env = append(env, kv)
		}
	}
	if clear {
		env = append(env, "WAREHOUSE_CLEAR=1")
	}
	return env
}

func startCrashProc(t *testing.T, bin string, clear bool, args ...string) *crashProc {
	t.Helper()
	p := &crashProc{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Env = crashEnv(clear)
	p.cmd.Stdout = &p.stdout
	p.start = time.Now()
	p.log = newCrashLog(p.start)
	p.cmd.Stderr = p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait() // the exit status is read from ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// waitMsg waits until msg was logged; false when the process exited first.
func (p *crashProc) waitMsg(msg string) bool {
	deadline := time.After(2 * time.Minute)
	for {
		p.log.mu.Lock()
		_, ok := p.log.seen[msg]
		ch := p.log.notify
		p.log.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-p.exited:
			_, ok := p.log.when(msg)
			return ok
		case <-deadline:
			return false
		}
	}
}

func (p *crashProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// crashTrigger says when to kill: after the log message after ("" = at
// start), wait delay, then poll (if set) until it holds, without sleeping
// between polls when busy (for windows of a few syscalls).
type crashTrigger struct {
	desc  string
	after string
	delay time.Duration
	poll  func() bool
	busy  bool
}

// crashKill is what one kill did.
type crashKill struct {
	desc   string
	clear  bool
	killed bool          // SIGKILL ended the process (false: it exited first)
	at     time.Duration // since the process started
	phase  string        // startup, scan, transform, publish or exiting
	detail string        // where in publish; reader checks of a rebuild
}

// crashPhaseOf names the phase the last phase message opens.
func crashPhaseOf(last string) string {
	switch last {
	case "":
		return "startup"
	case crashMsgStarted:
		return "scan"
	case crashMsgScanDone:
		return "transform"
	case crashMsgExported:
		return "publish"
	default:
		return "exiting"
	}
}

// crashState is what a check found under an output root.
type crashState struct {
	version  string // the version directory, "" if none
	latest   string // what latest names, "" if absent
	pointer  string // what the config's latest-config names, "" if absent
	staging  bool   // the version's staging directory is there
	manifest []byte // the version's manifest.json
	temps    []string
}

// crashRef is the reference build.
type crashRef struct {
	name   string            // version directory name
	shards map[string]string // path under the version -> sha256
	// arrival of each phase message and the whole run
	started, scanDone, exported, published, total time.Duration
}

type crashSuite struct {
	t                  *testing.T
	bin                string
	data               string
	ref                crashRef
	refConfig, refRoot string
	kills              []crashKill
	checks             int
	resumed            int // reruns that kept complete shards of the killed build
}

func TestCrashSIGKILLBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs dozens of builds")
	}
	t0 := time.Now()
	s := &crashSuite{t: t}
	s.bin = filepath.Join(t.TempDir(), "warehouse-etl")
	if out, err := exec.Command("go", "build", "-o", s.bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// 20 copies of the demo runs: 660 labels, 400 planned samples, with the
	// demo's defects; 160x160 f16 and 1 MiB shards make 64 shards.
	s.data = filepath.Join(t.TempDir(), "data")
	demo := demoRoot(t)
	for i := range 20 {
		for _, run := range []string{"run_2", "run_10", "run_1700000000123"} {
			crashCopyTree(t, filepath.Join(demo, run), filepath.Join(s.data, fmt.Sprintf("%s_copy%d", run, i)))
		}
	}
	crashCopyTree(t, filepath.Join(demo, "escape.png"), filepath.Join(s.data, "escape.png"))
	s.reference()
	t.Logf("reference build %s: started %v, scan done %v, parquet exported %v, published %v, exit %v; %d shard files",
		s.ref.name, crashMs(s.ref.started), crashMs(s.ref.scanDone), crashMs(s.ref.exported), crashMs(s.ref.published), crashMs(s.ref.total), len(s.ref.shards))

	r := s.ref
	scan := r.scanDone - r.started
	xform := r.exported - r.scanDone
	publish := r.published - r.exported
	at := func(frac float64) crashTrigger {
		d := time.Duration(frac * float64(r.total))
		return crashTrigger{desc: fmt.Sprintf("at %.0f%% of the reference run (%v)", 100*frac, crashMs(d)), delay: d}
	}
	after := func(msg string, frac float64, phase time.Duration) crashTrigger {
		d := time.Duration(frac * float64(phase))
		return crashTrigger{desc: fmt.Sprintf("%q + %v", msg, crashMs(d)), after: msg, delay: d}
	}

	// Fresh builds: each series in a new output root, then a clean rerun.
	fresh := [][]func(root string) crashTrigger{
		// The second build finds the first one's temporary directory.
		{
			func(string) crashTrigger { return after(crashMsgStarted, 0, 0) },
			func(string) crashTrigger { return after(crashMsgScanDone, 0, 0) },
		},
		{func(string) crashTrigger { return after(crashMsgStarted, 0.4, scan) }},
		{
			func(string) crashTrigger { return after(crashMsgScanDone, 0.3, xform) },
			func(string) crashTrigger { return after(crashMsgScanDone, 0.7, xform) },
			func(string) crashTrigger { return after(crashMsgExported, 0, 0) },
		},
		// Between the manifest's write and the rename.
		{func(root string) crashTrigger {
			return crashTrigger{desc: "temporary manifest.json written", after: crashMsgExported, poll: func() bool {
				m, _ := filepath.Glob(filepath.Join(root, ".v*.tmp-*", warehouse.ManifestName))
				return len(m) > 0
			}}
		}},
		// Between the rename and latest.
		{func(root string) crashTrigger {
			return crashTrigger{desc: "version directory renamed into place", after: crashMsgExported, busy: true, poll: func() bool {
				_, err := os.Lstat(filepath.Join(root, r.name))
				return err == nil
			}}
		}},
		// After latest: only the exit remains.
		{func(root string) crashTrigger {
			return crashTrigger{desc: "latest pointer in place", after: crashMsgExported, busy: true, poll: func() bool {
				_, err := os.Lstat(filepath.Join(root, warehouse.LatestName))
				return err == nil
			}}
		}},
		{
			func(string) crashTrigger { return at(0.2) },
			func(string) crashTrigger { return at(0.5) },
			func(string) crashTrigger { return at(0.8) },
			func(string) crashTrigger { return after(crashMsgExported, 0.5, publish) },
		},
	}
	for i, series := range fresh {
		cfg, root := s.config(fmt.Sprintf("fresh%d", i))
		for _, mk := range series {
			s.kill(cfg, root, false, mk(root))
		}
		s.rerun(cfg, root, false)
	}

	// WAREHOUSE_CLEAR=1 rebuilds of a published version: the reference.
	cfg, root := s.refConfig, s.refRoot
	final := filepath.Join(root, r.name)
	inode := func() uint64 {
		var st syscall.Stat_t
		if err := syscall.Stat(final, &st); err != nil {
			return 0
		}
		return st.Ino
	}
	tmpManifest := crashTrigger{desc: "temporary manifest.json written", after: crashMsgExported, poll: func() bool {
		m, _ := filepath.Glob(filepath.Join(root, ".v*.tmp-*", warehouse.ManifestName))
		return len(m) > 0
	}}
	rebuilds := []struct {
		triggers   []func() crashTrigger
		rerunClear bool
	}{
		{[]func() crashTrigger{func() crashTrigger { return after(crashMsgStarted, 0, 0) }}, false},
		{[]func() crashTrigger{func() crashTrigger { return after(crashMsgScanDone, 0.5, xform) }}, true},
		{[]func() crashTrigger{
			func() crashTrigger { return after(crashMsgExported, 0, 0) },
			func() crashTrigger { return tmpManifest },
		}, false},
		// The old version swapped out into the temporary directory and
		// being removed; then kills in the middle of publish and late in
		// the run, the last rerun rebuilding the version to the end.
		{[]func() crashTrigger{
			func() crashTrigger {
				before := inode()
				return crashTrigger{desc: "version directory swapped", after: crashMsgExported, busy: true, poll: func() bool {
					return inode() != before
				}}
			},
			func() crashTrigger { return after(crashMsgExported, 0.5, publish) },
			func() crashTrigger { return at(0.85) },
		}, true},
	}
	for _, series := range rebuilds {
		for _, mk := range series.triggers {
			s.kill(cfg, root, true, mk())
		}
		s.rerun(cfg, root, series.rerunClear)
	}

	// The report.
	phases := map[string]int{}
	var killed int
	for i, k := range s.kills {
		mode := "fresh"
		if k.clear {
			mode = "clear"
		}
		status := "killed"
		if !k.killed {
			status = "exited before the kill"
		}
		t.Logf("kill %2d %-5s %-42s %-8v %s: %s%s", i+1, mode, k.desc, crashMs(k.at), status, k.phase, k.detail)
		if k.killed {
			killed++
			phases[k.phase]++
		}
	}
	t.Logf("%d kills (%v), %d output root checks, %d reruns resumed from staged shards, %v in all", killed, phases, s.checks, s.resumed, time.Since(t0).Round(time.Millisecond))
	if killed < 10 {
		t.Errorf("only %d builds were killed, want at least 10", killed)
	}
	for _, ph := range []string{"scan", "transform", "publish"} {
		if phases[ph] == 0 {
			t.Errorf("no kill landed in %s", ph)
		}
	}
}

func crashMs(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// reference builds the dataset once, uninterrupted, and records its bytes
// and the arrival of its phase messages.
func (s *crashSuite) reference() {
	t := s.t
	cfg, root := s.config("reference")
	s.refConfig, s.refRoot = cfg, root
	p := startCrashProc(t, s.bin, false, "build", "--config", cfg, "--workers", "1", "--log-format", "json")
	<-p.exited
	s.ref.total = time.Since(p.start)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("reference build: exit %d\n%s", code, p.log.String())
	}
	for msg, d := range map[string]*time.Duration{crashMsgStarted: &s.ref.started, crashMsgScanDone: &s.ref.scanDone,
		crashMsgExported: &s.ref.exported, crashMsgPublished: &s.ref.published} {
		v, ok := p.log.when(msg)
		if !ok {
			t.Fatalf("reference build did not log %q:\n%s", msg, p.log.String())
		}
		*d = v
	}
	dir := strings.TrimSpace(p.stdout.String())
	s.ref.name = filepath.Base(dir)
	if dir != filepath.Join(root, s.ref.name) || !crashVersionRE.MatchString(s.ref.name) {
		t.Fatalf("reference build printed %q", dir)
	}
	s.ref.shards = crashShardSums(t, dir)
	if len(s.ref.shards) < 20 {
		t.Fatalf("reference build has %d shard files; the publish phase should have many", len(s.ref.shards))
	}
	s.verify(dir)
}

// config writes a config for the crash dataset with its own output root.
func (s *crashSuite) config(name string) (cfgPath, outRoot string) {
	dir := filepath.Join(s.t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	outRoot = filepath.Join(dir, "out")
	cfg := map[string]any{
		"source":          map[string]any{"kind": "capture", "root": s.data},
		"target_size":     []int{160, 160},
		"dtype":           "f16",
		"shard_target_mb": 1,
		"thresholds": map[string]any{
			"invalid": map[string]any{"max_ratio": 0.5},
			"missing": map[string]any{"max_ratio": 0.25},
			"empty":   map[string]any{"max_ratio": 0.2, "action": "warn"},
		},
		"output_root": outRoot,
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		s.t.Fatal(err)
	}
	cfgPath = filepath.Join(dir, "config.jsonc")
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		s.t.Fatal(err)
	}
	return cfgPath, outRoot
}

// kill runs one build with one worker and kills it with SIGKILL at tr, then
// checks the output root.
func (s *crashSuite) kill(cfg, root string, clear bool, tr crashTrigger) {
	t := s.t
	t.Helper()
	var oldManifest []byte
	final := filepath.Join(root, s.ref.name)
	if clear {
		var err error
		if oldManifest, err = os.ReadFile(filepath.Join(final, warehouse.ManifestName)); err != nil {
			t.Fatalf("a WAREHOUSE_CLEAR=1 kill needs a published version: %v", err)
		}
	}
	// A fresh series' earlier build may have finished before its kill
	// landed: then this build finds the version published already (up to
	// date) and that is no early publication.
	_, statErr := os.Lstat(final)
	publishedBefore := statErr == nil
	p := startCrashProc(t, s.bin, clear, "build", "--config", cfg, "--workers", "1", "--log-format", "json")

	// During a rebuild, a reader must find the version and latest at every
	// moment.
	var readerChecks, readerFailures atomic.Int64
	var readerErr atomic.Value
	readerDone := make(chan struct{})
	if clear {
		go func() {
			defer close(readerDone)
			for p.running() {
				readerChecks.Add(1)
				_, err := os.Stat(filepath.Join(final, warehouse.ManifestName))
				if err == nil {
					var dir string
					dir, err = warehouse.ResolveDir(root)
					if err == nil && dir != final {
						err = fmt.Errorf("latest resolves to %s", dir)
					}
				}
				if err != nil {
					readerFailures.Add(1)
					readerErr.CompareAndSwap(nil, err.Error())
				}
				time.Sleep(200 * time.Microsecond)
			}
		}()
	} else {
		close(readerDone)
	}

	ok := true
	if tr.after != "" {
		ok = p.waitMsg(tr.after)
	}
	if ok && tr.delay > 0 {
		base := p.start
		if tr.after != "" {
			d, _ := p.log.when(tr.after)
			base = p.start.Add(d)
		}
		select {
		case <-time.After(time.Until(base.Add(tr.delay))):
		case <-p.exited:
		}
	}
	if ok && tr.poll != nil {
		for p.running() && !tr.poll() {
			if !tr.busy {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	at := time.Since(p.start)
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	<-readerDone

	k := crashKill{desc: tr.desc, clear: clear, at: at}
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled() && ws.Signal() == syscall.SIGKILL:
		k.killed = true
	case p.cmd.ProcessState.ExitCode() == 0:
	default:
		t.Errorf("kill %d (%s): the build failed on its own: %v\n%s", len(s.kills)+1, tr.desc, p.cmd.ProcessState, p.log.String())
	}
	k.phase = crashPhaseOf(p.log.last)
	label := fmt.Sprintf("kill %d (%s, %s)", len(s.kills)+1, tr.desc, k.phase)
	if clear && readerFailures.Load() > 0 {
		t.Errorf("%s: a reader found no complete version %d times of %d during the rebuild, first: %v",
			label, readerFailures.Load(), readerChecks.Load(), readerErr.Load())
	}

	st := s.check(root, label)
	// What a kill may leave depends on how far the build got.
	early := k.phase == "startup" || k.phase == "scan" || k.phase == "transform"
	switch {
	case !clear && early && st.version != "" && !publishedBefore:
		t.Errorf("%s: a version was published before the publish phase", label)
	case clear && st.version == "":
		t.Errorf("%s: the version being rebuilt is gone", label)
	case clear && early && !bytes.Equal(st.manifest, oldManifest):
		t.Errorf("%s: the version was replaced before the publish phase", label)
	}
	if k.phase == "publish" {
		switch {
		case !clear && st.version == "":
			k.detail = " (before the rename)"
		case !clear && st.latest == "":
			k.detail = " (after the rename, before latest)"
		case !clear:
			k.detail = " (after latest)"
		case bytes.Equal(st.manifest, oldManifest):
			k.detail = " (before the swap: old version in place)"
		default:
			k.detail = " (after the swap: new version in place)"
		}
	}
	if clear {
		k.detail += fmt.Sprintf(", %d reader checks", readerChecks.Load())
	}
	s.kills = append(s.kills, k)
}

// rerun builds the config to the end (all workers) and checks that the
// version is published with the reference bytes, latest names it, and a
// build that wrote anything left no temporary of its version.
func (s *crashSuite) rerun(cfg, root string, clear bool) {
	t := s.t
	t.Helper()
	p := startCrashProc(t, s.bin, clear, "build", "--config", cfg, "--log-format", "json")
	<-p.exited
	label := fmt.Sprintf("rerun after kill %d", len(s.kills))
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("%s: exit %d\n%s", label, code, p.log.String())
	}
	want := filepath.Join(root, s.ref.name)
	if got := strings.TrimSpace(p.stdout.String()); got != want {
		t.Errorf("%s printed %q, want %s", label, got, want)
	}
	logText := p.log.String()
	status := "?"
	for _, st := range []string{"rebuilt: ", "built: ", "up to date: "} {
		if strings.Contains(logText, "\n"+st+want) || strings.HasPrefix(logText, st+want) {
			status = strings.TrimSuffix(st, ": ")
			break
		}
	}
	st := s.check(root, label)
	if st.version == "" {
		t.Fatalf("%s (%s): no version published", label, status)
	}
	// Also after an "up to date" rerun: a kill between the rename and the
	// latest swap published the version without pointing latest at it.
	if st.latest != s.ref.name {
		t.Errorf("%s (%s): latest names %q, want %s", label, status, st.latest, s.ref.name)
	}
	if st.staging {
		t.Errorf("%s (%s): the staging directory outlived the publication", label, status)
	}
	if strings.Contains(logText, "kept complete shards of an earlier run") {
		s.resumed++
	}
	var mine []string
	for _, tmp := range st.temps {
		if v := crashTemporaryOf(tmp); v == s.ref.name {
			mine = append(mine, tmp)
		}
	}
	switch {
	case status == "up to date" && len(mine) > 0:
		t.Logf("%s (up to date, so nothing was built): temporaries left from the kills: %v", label, mine)
	case len(mine) > 0:
		t.Errorf("%s (%s): temporaries of the version remain: %v", label, status, mine)
	}
	if status == "?" {
		t.Errorf("%s: no build summary on stderr:\n%s", label, logText)
	}
}

// TestCrashTemporaryOf: the temporaries the crash test accepts in an output
// root are those outputroot documents, each mapped to its version.
func TestCrashTemporaryOf(t *testing.T) {
	const v = "v0123456789abcdef"
	for name, want := range map[string]string{
		"." + v + ".tmp-1a2b":         v, // a build in progress
		".." + v + ".config.tmp-99":   v, // the owner record's atomic write
		".." + v + ".inputs.tmp-99":   v, // the input cache's
		".latest.tmp-" + v:            v, // the next latest
		".latest-config.tmp-" + v:     v, // the next latest-<config>
		".latest-nightly.v2.tmp-" + v: v,
		".latest.tmp-" + v + "x":      "",
		"latest-config":               "",
		v:                             "",
		".latest-config.tmp-v0123":    "",
		"." + v + ".lock":             "",
	} {
		if got := crashTemporaryOf(name); got != want {
			t.Errorf("crashTemporaryOf(%q) = %q, want %q", name, got, want)
		}
	}
}

// crashTemporaryOf returns the version a temporary entry belongs to.
func crashTemporaryOf(name string) string {
	if m := crashTmpRE.FindStringSubmatch(name); m != nil {
		return m[1]
	}
	if m := crashLatestTmpRE.FindStringSubmatch(name); m != nil {
		return m[2]
	}
	return ""
}

// check looks at everything under an output root: versions must be
// complete (manifest, verify --full, the reference shard bytes), latest
// must name one, and the rest may only be locks and temporaries.
func (s *crashSuite) check(root, label string) crashState {
	t := s.t
	t.Helper()
	s.checks++
	var st crashState
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return st
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(root, name)
		switch {
		case crashVersionRE.MatchString(name):
			if name != s.ref.name {
				t.Errorf("%s: unexpected version %s (the reference is %s)", label, name, s.ref.name)
				continue
			}
			if !e.IsDir() {
				t.Errorf("%s: %s is not a directory", label, name)
				continue
			}
			raw, err := os.ReadFile(filepath.Join(path, warehouse.ManifestName))
			if err != nil {
				t.Errorf("%s: half-published version %s: %v", label, name, err)
				continue
			}
			st.version, st.manifest = name, raw
			if got := crashShardSums(t, path); !maps.Equal(got, s.ref.shards) {
				t.Errorf("%s: %s has other shard bytes than the reference build", label, name)
			}
		case name == warehouse.LatestName:
			target, err := os.Readlink(path)
			if err != nil {
				t.Errorf("%s: latest is not a symlink: %v", label, err)
				continue
			}
			st.latest = target
		case name == warehouse.LatestNameFor("config"):
			target, err := os.Readlink(path)
			if err != nil {
				t.Errorf("%s: %s is not a symlink: %v", label, name, err)
				continue
			}
			st.pointer = target
		case name == "."+s.ref.name+".config":
			// The owner record, written just before the rename: after a
			// kill in between, the rerun publishes its version.
			if got, err := os.ReadFile(path); err != nil || string(got) != "config\n" {
				t.Errorf("%s: %s holds %q (%v)", label, name, got, err)
			}
		case name == "."+s.ref.name+".inputs":
			// The scan's input cache (docs/reuse.md), replaced whole by a
			// rename: after any kill it is complete, ending in the sha256
			// of what precedes it.
			got, err := os.ReadFile(path)
			if n := len(got) - sha256.Size; err != nil || n < 0 || !bytes.HasPrefix(got, []byte("warehouse-etl input identities 1\n")) {
				t.Errorf("%s: %s is not an input cache (%v)", label, name, err)
			} else if sum := sha256.Sum256(got[:n]); !bytes.Equal(sum[:], got[n:]) {
				t.Errorf("%s: %s is damaged: its sha256 does not match", label, name)
			}
		case crashLockRE.MatchString(name):
		case name == "."+s.ref.name+".staging":
			// Shards of the killed build, kept for the rerun (shard-level
			// resume); the rerun's result is checked against the reference.
			st.staging = true
		case crashTemporaryOf(name) != "":
			st.temps = append(st.temps, name)
		default:
			t.Errorf("%s: unexpected entry %s in the output root", label, name)
		}
	}
	if st.pointer != "" && st.pointer != st.version {
		t.Errorf("%s: latest-config -> %q, which is not a complete version (have %q)", label, st.pointer, st.version)
	}
	switch {
	case st.latest != "" && st.latest != st.version:
		t.Errorf("%s: latest -> %q, which is not a complete version (have %q)", label, st.latest, st.version)
	case st.latest != "":
		s.verify(root) // the version, through latest
	case st.version != "":
		s.verify(filepath.Join(root, st.version))
	}
	return st
}

// verify runs verify --full on a version directory or an output root.
func (s *crashSuite) verify(path string) {
	s.t.Helper()
	out, err := exec.Command(s.bin, "verify", "--tensor-warehouse", path, "--full", "--quiet").CombinedOutput()
	if err != nil {
		s.t.Errorf("verify --full %s: %v\n%s", path, err, out)
	}
}

// crashShardSums hashes every file under a version's shards directory.
func crashShardSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	sums := map[string]string{}
	err := filepath.WalkDir(filepath.Join(dir, "shards"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		sums[rel] = fileSHA256(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sums
}

// crashCopyTree copies a file or a directory tree.
func crashCopyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, raw, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
