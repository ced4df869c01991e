package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeBlock is one fenced code block of a Markdown page.
type readmeBlock struct {
	file string
	line int    // of the opening fence
	lang string // the fence's info string: sh, python, go, ...
	code string
	skip string // why it is not run: the <!-- readme-test: skip: why --> line before the fence
}

var readmeSkip = regexp.MustCompile(`^<!-- readme-test: skip: (.+\S) -->$`)

// readmeBlocks returns the fenced code blocks of the Markdown file at
// path, named page in messages.
func readmeBlocks(t *testing.T, path, page string) []readmeBlock {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks []readmeBlock
		cur    *readmeBlock
		prev   string // the last non-empty line outside a block
	)
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &readmeBlock{file: page, line: n, lang: strings.TrimSpace(line[3:])}
			if m := readmeSkip.FindStringSubmatch(prev); m != nil {
				cur.skip = m[1]
			}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur, prev = nil, ""
		case cur != nil:
			cur.code += line + "\n"
		case strings.TrimSpace(line) != "":
			if strings.HasPrefix(line, "<!-- readme-test") && readmeSkip.FindString(line) == "" {
				t.Fatalf("%s:%d: %q: want <!-- readme-test: skip: why -->", path, n, line)
			}
			prev = line
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: a code block that is never closed", path, cur.line)
	}
	return blocks
}

// readmeCheckout makes a copy of the checkout to run the READMEs' blocks
// in: every top-level entry of the repository linked, but a fresh out/
// (the demo warehouse they build) and no ./warehouse-etl binary.
func readmeCheckout(t *testing.T, repo string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case "out", "warehouse-etl", ".git":
			continue
		}
		if err := os.Symlink(filepath.Join(repo, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// Every sh and python block of README.md and python/README.md runs as
// printed on the demo (issue 27): in a copy of the checkout, in page
// order, sh blocks with bash -e, the python blocks of a page as one
// session with PYTHONPATH=python; a block marked
// <!-- readme-test: skip: why --> is not run (the test logs why). Then
// the command verify prints as next: must run too.
func TestReadmeRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the CLI and runs the demo")
	}
	requirePython(t, "numpy", "torch")
	repo := mustAbs(t, "../..")
	work := readmeCheckout(t, repo)
	run := func(b readmeBlock, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PYTHONPATH=python")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s:%d (%s block): %v\n--- block:\n%s--- output:\n%s", b.file, b.line, b.lang, err, b.code, out)
		}
		t.Logf("%s:%d (%s block) ok", b.file, b.line, b.lang)
		return string(out)
	}
	ran := map[string]int{}
	for _, page := range []string{"README.md", "python/README.md"} {
		var session strings.Builder
		var last readmeBlock
		for _, b := range readmeBlocks(t, filepath.Join(repo, page), page) {
			if b.lang != "sh" && b.lang != "python" {
				continue
			}
			if b.skip != "" {
				t.Logf("%s:%d (%s block) not run: %s", b.file, b.line, b.lang, b.skip)
				continue
			}
			ran[b.lang]++
			if b.lang == "sh" {
				run(b, "bash", "-euo", "pipefail", "-c", b.code)
				continue
			}
			session.WriteString(b.code)
			last = b
		}
		if session.Len() > 0 {
			last.code = session.String()
			run(last, debianPython, "-c", last.code)
		}
	}
	if ran["sh"] < 3 || ran["python"] < 2 {
		t.Fatalf("ran %v: the pages' blocks were not found", ran)
	}

	// verify's hints run as printed: quick -> --full -> load (a batch the
	// 19-sample demo can fill).
	bin := filepath.Join(work, "warehouse-etl") // built by README's go build block
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("README's go build block made no binary: %v", err)
	}
	next := "warehouse-etl verify --tensor-warehouse out/demo"
	for i := range 3 {
		b := readmeBlock{file: "verify next", line: i, lang: "sh", code: next}
		cmd, _, _ := strings.Cut(next, "   (")
		if !strings.HasPrefix(cmd, "warehouse-etl ") {
			t.Fatalf("next: %q does not start with warehouse-etl", next)
		}
		b.code = "./" + cmd
		out := run(b, "bash", "-euo", "pipefail", "-c", b.code)
		if !strings.HasPrefix(cmd, "warehouse-etl verify ") {
			if !strings.Contains(out, "19 samples") {
				t.Errorf("%s read %q", cmd, out)
			}
			break
		}
		_, after, ok := strings.Cut(out, "\nnext: ")
		if !ok {
			t.Fatalf("%s printed no next:\n%s", cmd, out)
		}
		next = strings.TrimSpace(strings.SplitN(after, "\n", 2)[0])
		if i == 2 {
			t.Fatalf("verify's hints do not lead to load: %q", next)
		}
	}
}
