package outputroot

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// publishAs publishes version name (created at created ms) as config.
func publishAs(t *testing.T, root, name, config string, created int64) {
	t.Helper()
	l, err := LockVersion(root, name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := l.ForConfig(config); err != nil {
		t.Fatal(err)
	}
	tmp, err := l.CreateTemp()
	if err != nil {
		t.Fatal(err)
	}
	writeManifest(t, tmp, created)
	if err := l.Publish(); err != nil {
		t.Fatal(err)
	}
}

// writeManifest writes the smallest manifest ReadManifest accepts for
// created_at_ms: the test only needs the time.
func writeManifest(t *testing.T, dir string, created int64) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "manifest.json"), fmt.Sprintf(`{"created_at_ms": %d}`, created))
}

func pointer(t *testing.T, root, name string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(root, name))
	if err != nil {
		return ""
	}
	return target
}

// The pointer rule (pointers.go), including an output root from before
// config names: its latest has no owner, so the first named config takes
// it over, and a second config does not.
func TestPointersFollowTheirConfig(t *testing.T) {
	root := t.TempDir()
	const legacy, a1, b1, a2 = "v000000000000000f", "v00000000000000a1", "v00000000000000b1", "v00000000000000a2"
	publishAs(t, root, legacy, "", 1) // as before config names: latest only
	if pointer(t, root, "latest") != legacy {
		t.Fatalf("legacy: latest -> %q", pointer(t, root, "latest"))
	}
	publishAs(t, root, a1, "a", 2)
	publishAs(t, root, b1, "b", 3)
	publishAs(t, root, a2, "a", 4)
	for p, want := range map[string]string{"latest": a2, "latest-a": a2, "latest-b": b1} {
		if got := pointer(t, root, p); got != want {
			t.Errorf("%s -> %q, want %s", p, got, want)
		}
	}
	if err := new(VersionLock).ForConfig("../x"); err == nil {
		t.Error("ForConfig accepted a name with a slash")
	}
	// RepairLatest of b's version leaves a's latest alone; of a2, repairs
	// its own pointer when a crash left it behind.
	if err := Dir(root).SetPointer("latest-a", a1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, config string
		created      int64
		moved        bool
	}{{b1, "b", 3, false}, {a2, "a", 4, false}} {
		l, err := LockVersion(root, c.name)
		if err != nil {
			t.Fatal(err)
		}
		l.ForConfig(c.config)
		moved, err := l.RepairLatest(c.created)
		l.Release()
		if err != nil || moved != c.moved {
			t.Errorf("RepairLatest(%s): moved %v, %v", c.name, moved, err)
		}
	}
	if pointer(t, root, "latest") != a2 || pointer(t, root, "latest-a") != a2 {
		t.Errorf("after repair: latest -> %s, latest-a -> %s", pointer(t, root, "latest"), pointer(t, root, "latest-a"))
	}
}
