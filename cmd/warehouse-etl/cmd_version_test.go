package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"warehouse-etl/transforms"
)

func TestVersion(t *testing.T) {
	res := runCLI(t, context.Background(), nil, "version")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(res.stdout), "\n")[1:] {
		k, v, _ := strings.Cut(l, ": ")
		lines[k] = v
	}
	if lines["decoder"] != transforms.DecoderIdentity() || lines["go"] != runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("version output:\n%s", res.stdout)
	}
	if v := transforms.TurboJPEGVersion(); v != "" && lines["libjpeg-turbo"] != v {
		t.Errorf("libjpeg-turbo line %q, linked %s", lines["libjpeg-turbo"], v)
	}
}

// A CGO_ENABLED=0 build says it is static; the linkage check reads the ELF
// program headers, so a plain cgo build (on a machine with a C compiler)
// must say it is not.
func TestVersionLinkage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI twice")
	}
	dir := t.TempDir()
	for _, tc := range []struct{ cgo, want string }{{"0", "binary: static\n"}, {"1", "binary: dynamically linked"}} {
		if _, err := exec.LookPath("gcc"); err != nil && tc.cgo == "1" {
			continue
		}
		bin := filepath.Join(dir, "warehouse-etl-cgo"+tc.cgo)
		build := exec.Command("go", "build", "-o", bin, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED="+tc.cgo)
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("CGO_ENABLED=%s go build: %v\n%s", tc.cgo, err, out)
		}
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("CGO_ENABLED=%s: version says\n%s\nwant %q", tc.cgo, out, tc.want)
		}
	}
}
