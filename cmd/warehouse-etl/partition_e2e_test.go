package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"warehouse-etl/warehouse"
)

// cliBinaryDir holds the binary cliBinary builds; TestMain removes it.
var cliBinaryDir string

// cliBinary builds the CLI once per test binary run.
var cliBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "warehouse-etl-bin-")
	if err != nil {
		return "", err
	}
	cliBinaryDir = dir
	bin := filepath.Join(dir, "warehouse-etl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// TestMain removes the CLI binary after the tests: each run of this package
// left 62 MB in the temporary directory, and repeated runs filled the disk.
func TestMain(m *testing.M) {
	code := m.Run()
	if cliBinaryDir != "" {
		os.RemoveAll(cliBinaryDir)
	}
	os.Exit(code)
}

func mustBinary(t *testing.T) string {
	t.Helper()
	bin, err := cliBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// sameAsSingle compares a published version with the single-machine one:
// the same version name, shard bytes, samples.jsonl, fingerprint.jsonl,
// samples.parquet, and manifests equal but for created_at_ms and the timed
// files' checksums.
func sameAsSingle(t *testing.T, what, single, got string) {
	t.Helper()
	if filepath.Base(single) != filepath.Base(got) {
		t.Fatalf("%s: version %s, single machine %s", what, filepath.Base(got), filepath.Base(single))
	}
	m, err := warehouse.ReadManifest(single)
	if err != nil {
		t.Fatal(err)
	}
	files := []string{warehouse.SamplesName, warehouse.FingerprintName, "samples.parquet"}
	for _, s := range m.Shards {
		files = append(files, s.RelativePath)
	}
	for _, f := range files {
		a, _ := os.ReadFile(filepath.Join(single, f))
		b, err := os.ReadFile(filepath.Join(got, f))
		if err != nil || len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: %s differs from the single-machine build (%d vs %d bytes, %v)", what, f, len(b), len(a), err)
		}
	}
	a, _ := os.ReadFile(filepath.Join(single, warehouse.ManifestName))
	b, _ := os.ReadFile(filepath.Join(got, warehouse.ManifestName))
	if !bytes.Equal(manifestSansTime(a), manifestSansTime(b)) {
		t.Errorf("%s: manifest differs beyond created_at_ms and the timed files' checksums", what)
	}
	if fi, err := os.Stat(filepath.Join(filepath.Dir(got), "."+filepath.Base(got)+".staging")); err == nil {
		t.Errorf("%s: the staging directory outlived the commit (%v)", what, fi.Name())
	}
}

// Three partitions as concurrent processes, then commit: the demo's
// single-machine bytes. Before the last partition, commit exits 8 naming it.
func TestPartitionedBuildProcesses(t *testing.T) {
	bin := mustBinary(t)
	single, _ := mustBuild(t, mustConfig(t), nil, "--workers", "2")
	cfgPath, outRoot := writeConfig(t, demoRoot(t), nil)

	run := func(env []string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		_ = err // the exit code says it
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	// Partition 1/3 first, alone: commit then names 0/3 and 2/3.
	if _, stderr, code := run(nil, "build", "--config", cfgPath, "--partition", "1/3", "--workers", "1"); code != 0 {
		t.Fatalf("partition 1/3: exit %d\n%s", code, stderr)
	}
	_, stderr, code := run(nil, "commit", "--config", cfgPath)
	if code != exitIncomplete || !regexp.MustCompile(`cannot commit: \d+ of \d+ shards are not complete \(shards [0-9, -]+\); partition 0/3 \(shards? [0-9-]+\) has not started; partition 2/3 \(shards? [0-9-]+\) has not started; nothing was published`).MatchString(stderr) {
		t.Fatalf("early commit: exit %d, want %d naming partitions 0/3 and 2/3:\n%s", code, exitIncomplete, stderr)
	}
	if got := versionDirs(t, outRoot); len(got) != 0 {
		t.Fatalf("an early commit published %v", got)
	}
	// 0/3 and 2/3 at once, 1/3 again (it keeps its shards), and the
	// commit waiting for them all.
	var wg sync.WaitGroup
	results := make([]string, 4)
	for i, args := range [][]string{
		{"build", "--config", cfgPath, "--partition", "0/3", "--workers", "1"},
		{"build", "--config", cfgPath, "--partition", "2/3", "--workers", "1"},
		{"build", "--config", cfgPath, "--partition", "1/3", "--workers", "1"},
		{"commit", "--config", cfgPath, "--wait", "2m"},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stdout, stderr, code := run(nil, args...)
			results[i] = fmt.Sprintf("%s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
			if code != 0 {
				t.Errorf("%s", results[i])
			}
		}()
	}
	wg.Wait()
	if !strings.Contains(results[2], "built 0, kept") {
		t.Errorf("the rerun of partition 1/3 rebuilt its shards:\n%s", results[2])
	}
	lines := strings.Split(strings.TrimSpace(results[3]), "\n")
	dir := ""
	for _, l := range lines {
		if strings.HasPrefix(l, outRoot) {
			dir = l
		}
	}
	if dir == "" {
		t.Fatalf("commit printed no version directory:\n%s", results[3])
	}
	sameAsSingle(t, "3 processes", single, dir)
	if res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", dir, "--full"); res.code != 0 {
		t.Fatalf("verify --full: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// mustConfig is a demo config in its own output root.
func mustConfig(t *testing.T) string {
	cfgPath, _ := writeConfig(t, demoRoot(t), nil)
	return cfgPath
}

// --partition auto from a Slurm array's and a Kubernetes Indexed Job's
// environment, 2 partitions each.
func TestPartitionAutoFromEngines(t *testing.T) {
	single, _ := mustBuild(t, mustConfig(t), nil)
	engines := map[string]func(i int) map[string]string{
		"slurm": func(i int) map[string]string {
			return map[string]string{"SLURM_ARRAY_TASK_ID": fmt.Sprint(10 + i), "SLURM_ARRAY_TASK_MIN": "10", "SLURM_ARRAY_TASK_MAX": "11", "SLURM_ARRAY_TASK_COUNT": "2"}
		},
		"kubernetes": func(i int) map[string]string {
			return map[string]string{"JOB_COMPLETION_INDEX": fmt.Sprint(i), "WAREHOUSE_PARTITIONS": "2"}
		},
	}
	for name, env := range engines {
		cfgPath, _ := writeConfig(t, demoRoot(t), nil)
		for i := range 2 {
			res := runCLI(t, context.Background(), env(i), "build", "--config", cfgPath, "--partition", "auto")
			if res.code != 0 || !strings.Contains(res.stderr, fmt.Sprintf("partition %d/2: shards", i)) {
				t.Fatalf("%s %d: exit %d\n%s", name, i, res.code, res.stderr)
			}
		}
		metrics := filepath.Join(t.TempDir(), "commit.prom")
		res := runCLI(t, context.Background(), nil, "commit", "--config", cfgPath, "--metrics-file", metrics)
		if res.code != 0 {
			t.Fatalf("%s commit: exit %d\n%s", name, res.code, res.stderr)
		}
		if raw, err := os.ReadFile(metrics); err != nil || !strings.Contains(string(raw), `outcome="built"} 1`) {
			t.Errorf("%s commit --metrics-file: %v\n%s", name, err, raw)
		}
		sameAsSingle(t, name, single, strings.TrimSpace(res.stdout))
	}
	// What auto cannot work out is a usage error.
	cfgPath, _ := writeConfig(t, demoRoot(t), nil)
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "--partition auto: no job engine in the environment (SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX)"},
		{map[string]string{"JOB_COMPLETION_INDEX": "3"}, "JOB_COMPLETION_INDEX is set but the partition count is not: set WAREHOUSE_PARTITIONS to the Job's completions (or \"partitions\" in the config)"},
		{map[string]string{"JOB_COMPLETION_INDEX": "3", "WAREHOUSE_PARTITIONS": "3"}, "partition index 3: must be 0..2 for 3 partitions"},
		{map[string]string{"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_MAX": "8", "SLURM_ARRAY_TASK_STEP": "2"}, "SLURM_ARRAY_TASK_STEP=2: the array must be dense"},
	} {
		res := runCLI(t, context.Background(), c.env, "build", "--config", cfgPath, "--partition", "auto")
		if res.code != exitUsage || !strings.Contains(res.stderr, c.want) {
			t.Errorf("env %v: exit %d, want %d with %q:\n%s", c.env, res.code, exitUsage, c.want, res.stderr)
		}
	}
	for _, bad := range []string{"3/3", "-1/2", "1", "a/b", "0/0"} {
		if res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--partition", bad); res.code != exitUsage {
			t.Errorf("--partition %s: exit %d, want %d", bad, res.code, exitUsage)
		}
	}
}

// The Kubernetes recipe: an Indexed Job whose completions, parallelism
// and WAREHOUSE_PARTITIONS agree, running build --partition auto on the
// shared volume, and a commit Job that waits for it.
func TestKubernetesPartitionedManifests(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/k8s/partitioned-build.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type container struct {
		Name    string   `yaml:"name"`
		Command []string `yaml:"command"`
		Env     []struct {
			Name  string `yaml:"name"`
			Value string `yaml:"value"`
		} `yaml:"env"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	type job struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			CompletionMode       string `yaml:"completionMode"`
			Completions          *int   `yaml:"completions"`
			Parallelism          *int   `yaml:"parallelism"`
			BackoffLimitPerIndex *int   `yaml:"backoffLimitPerIndex"`
			Template             struct {
				Spec struct {
					RestartPolicy string      `yaml:"restartPolicy"`
					Containers    []container `yaml:"containers"`
					Volumes       []struct {
						Name string `yaml:"name"`
						PVC  *struct {
							ClaimName string `yaml:"claimName"`
						} `yaml:"persistentVolumeClaim"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	var jobs []job
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var j job
		if err := dec.Decode(&j); err != nil {
			break
		}
		jobs = append(jobs, j)
	}
	if len(jobs) != 2 || jobs[0].Kind != "Job" || jobs[1].Kind != "Job" {
		t.Fatalf("want two Jobs, got %d documents", len(jobs))
	}
	parts, commit := jobs[0], jobs[1]
	s := parts.Spec
	if s.CompletionMode != "Indexed" || s.Completions == nil || s.Parallelism == nil || *s.Parallelism > *s.Completions || *s.Parallelism < 1 {
		t.Fatalf("partition Job: completionMode %q, completions %v, parallelism %v", s.CompletionMode, s.Completions, s.Parallelism)
	}
	if s.BackoffLimitPerIndex == nil || s.Template.Spec.RestartPolicy != "Never" {
		t.Error("partition Job: a failed partition must be retried on its own (backoffLimitPerIndex, restartPolicy Never)")
	}
	pc := s.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range pc.Env {
		env[e.Name] = e.Value
	}
	if env["WAREHOUSE_PARTITIONS"] != fmt.Sprint(*s.Completions) {
		t.Errorf("WAREHOUSE_PARTITIONS %q, completions %d: they must agree", env["WAREHOUSE_PARTITIONS"], *s.Completions)
	}
	cmdline := strings.Join(pc.Command, " ")
	if !strings.Contains(cmdline, " build ") || !strings.Contains(cmdline, "--partition auto") {
		t.Errorf("partition command %q: want build --partition auto", cmdline)
	}
	cc := commit.Spec.Template.Spec.Containers[0]
	ccmd := strings.Join(cc.Command, " ")
	if commit.Spec.CompletionMode == "Indexed" || !strings.Contains(ccmd, " commit ") || !strings.Contains(ccmd, "--wait") {
		t.Errorf("commit Job command %q: want commit --wait, not indexed", ccmd)
	}
	// Same config, same output volume mounted at the same path.
	claim := func(j job, mount string) (string, string) {
		for _, c := range j.Spec.Template.Spec.Containers {
			for _, m := range c.VolumeMounts {
				if m.MountPath == mount {
					for _, v := range j.Spec.Template.Spec.Volumes {
						if v.Name == m.Name && v.PVC != nil {
							return m.Name, v.PVC.ClaimName
						}
					}
				}
			}
		}
		return "", ""
	}
	_, a := claim(parts, "/warehouse")
	_, b := claim(commit, "/warehouse")
	if a == "" || a != b {
		t.Errorf("output volume: partitions %q, commit %q: both must mount the same ReadWriteMany claim at /warehouse", a, b)
	}
	if cfgA, cfgB := pc.Command[3], cc.Command[3]; cfgA != cfgB {
		t.Errorf("config: partitions %s, commit %s", cfgA, cfgB)
	}
	// The Job's pods run the very command line the e2e tests run.
	if !strings.HasSuffix(pc.Command[0], "warehouse-etl") {
		t.Errorf("partition command runs %s", pc.Command[0])
	}
}

// A real one-node Slurm cluster (.ci/slurm.sh starts it and sets
// WAREHOUSE_TEST_SLURM=1): deploy/slurm/submit-partitioned.sh submits a
// 3-task array and the afterok commit; the published version is the
// single-machine build's bytes.
func TestSlurmPartitionedBuild(t *testing.T) {
	if os.Getenv("WAREHOUSE_TEST_SLURM") != "1" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but no Slurm cluster: .ci/run starts one with .ci/slurm.sh")
		}
		t.Skip("no Slurm cluster: eval \"$(bash .ci/slurm.sh)\" starts one (CI does)")
	}
	bin := mustBinary(t)
	single, _ := mustBuild(t, mustConfig(t), nil)
	cfgPath, outRoot := writeConfig(t, demoRoot(t), nil)
	logs := t.TempDir()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(repo, "deploy/slurm/submit-partitioned.sh"), "3",
		"--cpus-per-task=1", "--mem=512M", "--time=10", "--output="+logs+"/%x-%j.out")
	cmd.Env = append(os.Environ(), "WAREHOUSE_ETL="+bin, "CONFIG="+cfgPath)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("submit: %v\n%s", err, out)
	}
	var array, commit string
	if _, err := fmt.Sscan(string(out), &array, &commit); err != nil {
		t.Fatalf("submit printed %q", out)
	}
	state := func(id string) string {
		out, _ := exec.Command("scontrol", "show", "job", id).Output()
		var states []string
		for _, m := range regexp.MustCompile(`JobState=(\w+)`).FindAllStringSubmatch(string(out), -1) {
			states = append(states, m[1])
		}
		return strings.Join(states, ",")
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		s := state(commit)
		if s == "COMPLETED" || strings.Contains(s, "FAIL") || strings.Contains(s, "CANCEL") || strings.Contains(s, "TIMEOUT") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the commit job %s is still %s after 5 minutes (array: %s)", commit, s, state(array))
		}
		time.Sleep(time.Second)
	}
	logText := func() string {
		var b strings.Builder
		files, _ := filepath.Glob(filepath.Join(logs, "*.out"))
		for _, f := range files {
			raw, _ := os.ReadFile(f)
			fmt.Fprintf(&b, "== %s\n%s", filepath.Base(f), raw)
		}
		return b.String()
	}
	if s := state(array); s != "COMPLETED,COMPLETED,COMPLETED" {
		t.Fatalf("array tasks: %s\n%s", s, logText())
	}
	if s := state(commit); s != "COMPLETED" {
		t.Fatalf("commit: %s\n%s", s, logText())
	}
	// Each task built its own partition (auto from the array's environment).
	lt := logText()
	for i := range 3 {
		if !strings.Contains(lt, fmt.Sprintf(`"partition":"%d/3"`, i)) {
			t.Errorf("no log of partition %d/3:\n%s", i, lt)
		}
	}
	link, err := os.Readlink(filepath.Join(outRoot, warehouse.LatestName))
	if err != nil {
		t.Fatalf("no latest after the commit job: %v\n%s", err, lt)
	}
	sameAsSingle(t, "slurm array of 3", single, filepath.Join(outRoot, link))
}
