// Package s3test starts a real S3-compatible server (versitygw, pinned in
// .ci/run) on a free localhost port over a test's temporary directory, for
// the tests of object store output roots. There is no mock: a missing
// binary skips the test, and fails it under CI=true.
package s3test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Server is a running versitygw.
type Server struct {
	Endpoint       string // http://127.0.0.1:PORT
	Access, Secret string
	Dir            string // the posix backend's top directory: bucket = subdirectory
}

// Binary finds versitygw: $VERSITYGW, PATH, then $(go env GOPATH)/bin.
func Binary() string {
	if p := os.Getenv("VERSITYGW"); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Start starts versitygw with bucket created (a directory of its posix
// backend) and stops it when the test ends.
func Start(t testing.TB, bucket string) *Server {
	t.Helper()
	bin := Binary()
	if _, err := os.Stat(bin); bin == "" || err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("versitygw not found (set VERSITYGW, or go install github.com/versity/versitygw/cmd/versitygw@v1.8.0)")
		}
		t.Skip("versitygw not found: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	s := &Server{Access: "testaccess", Secret: "testsecret0123456789", Dir: dir}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		log, err := os.Create(filepath.Join(t.TempDir(), "versitygw.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--access", s.Access, "--secret", s.Secret, "--port", addr, "posix", dir)
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s.Endpoint = "http://" + addr
		if err := waitUp(s.Endpoint, cmd); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			b, _ := os.ReadFile(log.Name())
			lastErr = fmt.Errorf("%v: %s", err, b)
			continue
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return s
	}
	t.Fatalf("versitygw did not start: %v", lastErr)
	return nil
}

// Env is the environment a client of the server needs (the AWS SDK's
// variables), with no shared config or credentials files of the user.
func (s *Server) Env() []string {
	return []string{
		"AWS_ACCESS_KEY_ID=" + s.Access,
		"AWS_SECRET_ACCESS_KEY=" + s.Secret,
		"AWS_REGION=us-east-1",
		"AWS_ENDPOINT_URL=" + s.Endpoint,
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Setenv sets Env in the test's own process (t.Setenv).
func (s *Server) Setenv(t *testing.T) {
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitUp(endpoint string, cmd *exec.Cmd) error {
	exited := make(chan struct{})
	go func() { _, _ = cmd.Process.Wait(); close(exited) }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("versitygw exited")
		default:
		}
		resp, err := http.Get(endpoint + "/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("versitygw not answering at %s", endpoint)
}
