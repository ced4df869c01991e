package main

import (
	"bytes"
	"image"
	"image/png"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/analytics/records"
	"warehouse-etl/outputroot"
	"warehouse-etl/warehouse"
)

// copyCaptureDemo copies testdata/capture so a test may change it.
func copyCaptureDemo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "capture")
	if err := os.CopyFS(dir, os.DirFS("../../testdata/capture")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Every parameter refuses path tricks: "..", absolute paths, encoded dots
// and slashes, repeated or unknown parameters, in routes and queries; a
// source image that is a symbolic link out of the dataset root is not
// shown; only GET and HEAD are served. Nothing refused leaks a file.
func TestServeRefusesPathTricks(t *testing.T) {
	data := copyCaptureDemo(t)
	out := t.TempDir()
	// A secret beside the dataset: a picture and a file of text.
	secretDir := t.TempDir()
	secretPNG := filepath.Join(secretDir, "secret.png")
	img := image.NewRGBA(image.Rect(0, 0, 16, 12))
	for i := range img.Pix {
		img.Pix[i] = []byte{9, 99, 199, 255}[i%4]
	}
	var pngBytes bytes.Buffer
	png.Encode(&pngBytes, img)
	if err := os.WriteFile(secretPNG, pngBytes.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := buildDemo(t, "demo", out, `"`+mustAbs(t, "../../testdata")+`/capture"`, `"`+data+`"`)
	recs := readSamples(t, dir)
	// Two rejected samples whose source image the grid shows: one stays
	// (the control), the other's image becomes a link out of the root.
	var shown []records.SampleLine
	for _, r := range recs {
		if !r.Kept && len(r.Reasons) == 1 && (string(r.Reasons[0]) == "bbox_out_of_bounds" || string(r.Reasons[0]) == "invalid_bbox") {
			shown = append(shown, r)
		}
	}
	if len(shown) < 2 {
		t.Fatalf("the demo has %d rejected samples with a drawable image, want 2", len(shown))
	}
	linked := shown[1]
	target := filepath.Join(data, filepath.FromSlash(linked.ImagePath))
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secretPNG, target); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, "--tensor-warehouse", dir)

	if b := httpGet(t, base+"/img/thumb/"+itoa(shown[0].Seq)+".png"); !strings.HasPrefix(b, "\x89PNG") {
		t.Fatalf("control: the thumbnail of rejected sample %d is not a PNG", shown[0].Seq)
	}
	manifest, _ := os.ReadFile(filepath.Join(dir, warehouse.ManifestName))
	secrets := []string{"version_recipe", string(manifest[:64]), "root:x:0", string(pngBytes.Bytes()[:40]), "\"seq\":"}
	client := &http.Client{}
	for _, path := range []string{
		"/../manifest.json",
		"/../../../../etc/passwd",
		"/manifest.json",
		"/samples.jsonl",
		"/shards/shard-00000.twh",
		"/static/../manifest.json",
		"/static/%2e%2e/%2e%2e/manifest.json",
		"/static/..%2fmanifest.json",
		"/static/%2e%2e%2fviewer.go",
		"/static/%2Fetc%2Fpasswd",
		"/static/style.css/../../manifest.json",
		"/static/../../../../../../etc/passwd",
		"/static/viewer.go",
		"/img/thumb/..%2f..%2fmanifest.json",
		"/img/full/%2e%2e%2fsamples.jsonl",
		"/img/thumb/%2e%2e/%2e%2e/manifest.json",
		"/img/thumb//etc/passwd.png",
		"/img/thumb/%2Fetc%2Fpasswd.png",
		"/img/..%2f..%2f/0.png",
		"/img/thumb/-1.png",
		"/img/thumb/0x1.png",
		"/img/thumb/99999999.png",
		"/img/thumb/0.png?path=/etc/passwd",
		"/img/thumb/" + itoa(linked.Seq) + ".png",
		"/img/full/" + itoa(linked.Seq) + ".png",
		"/sample/..%2f1",
		"/sample/%2e%2e",
		"/sample/-1",
		"/sample/1e3",
		"/sample/99999999",
		"/sample/0?file=/etc/passwd",
		"/samples?run=../../etc",
		"/samples?run=-1",
		"/samples?run=99",
		"/samples?reason=..%2f..%2fetc%2fpasswd",
		"/samples?reason=%2e%2e",
		"/samples?reason=/etc/passwd",
		"/samples?class=/etc/passwd",
		"/samples?class=%2e%2e",
		"/samples?status=../x",
		"/samples?page=-1",
		"/samples?page=../1",
		"/samples?file=/etc/passwd",
		"/samples?run=0&run=1",
		"/?path=/etc/passwd",
		"/diff",
		"/diff?against=/etc",
		"//etc/passwd",
		"/etc/passwd",
		"/%2e%2e/%2e%2e/etc/passwd",
	} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 400 or 404", path, resp.Status)
		}
		for _, s := range secrets {
			if bytes.Contains(body, []byte(s)) {
				t.Errorf("GET %s: the answer contains %q", path, s)
			}
		}
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(method, base+"/samples", strings.NewReader("x"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s /samples: %s, want 405", method, resp.Status)
		}
	}
	// The browser sees the same refusal.
	if _, err := os.Stat("/usr/bin/chromium"); err == nil || os.Getenv("CI") == "true" {
		if dom := dumpDOM(t, base+"/static/%2e%2e/%2e%2e/manifest.json"); strings.Contains(dom, "version_recipe") {
			t.Errorf("chromium got the manifest through /static/%%2e%%2e/")
		}
	}
}

// treeState is every file and directory under root with its size, mode
// and modification time.
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	state := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		state[rel] = fi.Mode().String() + " " + itoa(fi.Size()) + " " + fi.ModTime().String()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// Serving every page, picture and the drift page writes nothing under the
// output root but the readers lock file, and while serve runs gc keeps the
// version it shows and the one it compares with; once serve stops, gc
// removes it.
func TestServeWritesNothingAndHoldsReadersLock(t *testing.T) {
	out := t.TempDir()
	old := buildDemo(t, "demo", out)
	newer := buildDemo(t, "demo", out, `"target_size": [384, 384]`, `"target_size": [256, 256]`)
	if old == newer {
		t.Fatal("the two builds gave one version")
	}
	before := treeState(t, out)
	base, stop := startStoppableServe(t, "--tensor-warehouse", old, "--against", newer)
	recs := readSamples(t, old)
	pages := []string{"/", "/samples", "/samples?status=rejected", "/samples?status=kept&page=0", "/diff", "/static/style.css"}
	for _, r := range recs {
		pages = append(pages, "/sample/"+itoa(r.Seq))
	}
	for _, p := range pages {
		httpGet(t, base+p)
	}
	for _, r := range recs {
		for _, size := range []string{"thumb", "full"} {
			resp, err := http.Get(base + "/img/" + size + "/" + itoa(r.Seq) + ".png")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	after := treeState(t, out)
	lock := filepath.Join(filepath.Base(filepath.Dir(old)), "."+filepath.Base(old)+".readers")
	for p, st := range after {
		if before[p] != st && p != lock && p != "." {
			t.Errorf("serve changed %s: %q -> %q", p, before[p], st)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("serve removed %s", p)
		}
	}
	if _, ok := after[lock]; !ok {
		t.Errorf("no readers lock %s while serving", lock)
	}
	rep, err := outputroot.GC(filepath.Dir(old), outputroot.GCOptions{Keep: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("gc removed the version serve shows: %v (report %+v)", err, rep)
	}
	stop()
	// Served as the baseline of --against, it is kept too.
	_, stopB := startStoppableServe(t, "--tensor-warehouse", newer, "--against", old)
	if _, err := outputroot.GC(filepath.Dir(old), outputroot.GCOptions{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("gc removed the --against version: %v", err)
	}
	stopB()
	if _, err := outputroot.GC(filepath.Dir(old), outputroot.GCOptions{Keep: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err == nil {
		t.Errorf("gc kept %s after serve stopped: the lock, not something else, should have kept it", old)
	}
}

// The drift page counts the samples whose kept/rejected verdict changed
// between two builds of the demo that differ in skip_empty.
func TestServeDiffPage(t *testing.T) {
	out := t.TempDir()
	a := buildDemo(t, "demo", out)
	b := buildDemo(t, "demo", out, `"skip_empty": false`, `"skip_empty": true`)
	recsA, recsB := readSamples(t, a), readSamples(t, b)
	changed := 0
	for i := range recsA {
		if recsA[i].Kept != recsB[i].Kept {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("skip_empty changed no sample's verdict")
	}
	page := httpGet(t, startServe(t, "--tensor-warehouse", a, "--against", b)+"/diff")
	for id, want := range map[string]int{"nchanged": changed, "nappeared": 0, "ndisappeared": 0} {
		if !strings.Contains(page, `<span id="`+id+`">`+itoa(int64(want))+`</span>`) {
			t.Errorf("drift page: want %s %d", id, want)
		}
	}
	if !strings.Contains(page, "skip_empty") {
		t.Errorf("drift page does not name the changed recipe key skip_empty")
	}
}
