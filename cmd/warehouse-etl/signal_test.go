package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeCaptureRun writes a capture run of n w x h JPEG frames with one box
// each, in the layout of ../shared/formats/capture-runs.md.
func writeCaptureRun(t testing.TB, runDir string, n, w, h int) {
	t.Helper()
	for _, sub := range []string{"images", "labels"} {
		if err := os.MkdirAll(filepath.Join(runDir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range n {
		for y := range h {
			for x := range w {
				img.SetRGBA(x, y, color.RGBA{uint8(x + i), uint8(y), uint8(x ^ y), 255})
			}
		}
		name := fmt.Sprintf("frame_%05d", i)
		f, err := os.Create(filepath.Join(runDir, "images", name+".jpg"))
		if err != nil {
			t.Fatal(err)
		}
		if err := jpeg.Encode(f, img, &jpeg.Options{Quality: 90}); err != nil {
			t.Fatal(err)
		}
		f.Close()
		label, _ := json.Marshal(map[string]any{
			"frame_id": i, "image": "images/" + name + ".jpg", "image_present": true,
			"labels": []any{map[string]any{"bbox_px": []float64{10, 20, float64(w / 2), float64(h / 2)}}},
		})
		if err := os.WriteFile(filepath.Join(runDir, "labels", name+".json"), label, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A real process, a real SIGINT in the middle of pass 2: exit 130 and
// nothing published, no temporary directory left behind.
func TestSIGINTPublishesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "warehouse-etl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := filepath.Join(t.TempDir(), "data")
	writeCaptureRun(t, filepath.Join(root, "run_1"), 60, 1280, 720)
	cfgPath, outRoot := writeConfig(t, root, map[string]any{"target_size": []int{640, 640}, "dtype": "f32"})

	cmd := exec.Command(bin, "build", "--config", cfgPath, "--workers", "1", "--log-format", "json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var log strings.Builder
	signalled := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if !signalled && strings.Contains(sc.Text(), `"msg":"scan done"`) {
			time.Sleep(200 * time.Millisecond) // let pass 2 write something
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			signalled = true
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted {
		t.Fatalf("exit: %v, want %d; signalled %v\n%s", err, exitInterrupted, signalled, log.String())
	}
	if got := versionDirs(t, outRoot); len(got) != 0 {
		t.Fatalf("an interrupted build left %v", got)
	}
	// It says what it kept and that a rerun resumes: the staging
	// directory, by path, with the number of complete shards in it.
	staged, _ := filepath.Glob(filepath.Join(outRoot, ".v*.staging"))
	if len(staged) != 1 {
		t.Fatalf("staging directories %v, want one", staged)
	}
	receipts, _ := filepath.Glob(filepath.Join(staged[0], "shards", "shard-*.json"))
	want := fmt.Sprintf("nothing was published; %d complete shard(s) are kept in %s and rerunning the same command resumes from them", len(receipts), staged[0])
	if !strings.Contains(log.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, log.String())
	}
}
