package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"warehouse-etl/internal/s3test"
)

func testStore(t *testing.T) *Store {
	t.Helper()
	srv := s3test.Start(t, "warehouses")
	srv.Setenv(t)
	s, err := Open(context.Background(), Location{Bucket: "warehouses", Prefix: "root/a"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConditionalPut checks what the publish order relies on, against the
// real server: If-None-Match: * refuses an existing object, If-Match
// refuses a changed one, and a wrong x-amz-checksum-sha256 is refused.
func TestConditionalPut(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	e1, err := s.Put(ctx, "latest", []byte("v1\n"), Cond{IfNoneMatch: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "latest", []byte("v2\n"), Cond{IfNoneMatch: true}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("If-None-Match on an existing object: %v, want ErrPrecondition", err)
	}
	e2, err := s.Put(ctx, "latest", []byte("v2\n"), Cond{IfMatch: e1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "latest", []byte("v3\n"), Cond{IfMatch: e1}); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("If-Match on the old ETag: %v, want ErrPrecondition", err)
	}
	body, etag, err := s.Get(ctx, "latest", 100)
	if err != nil || string(body) != "v2\n" || etag != e2 {
		t.Fatalf("got %q %q %v, want v2 %q", body, etag, err, e2)
	}
	if _, _, err := s.Get(ctx, "missing", 100); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing object: %v", err)
	}
}

func TestMultipartRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	s.MultipartAbove, s.PartSize = 1<<20, 5<<20
	data := bytes.Repeat([]byte("0123456789abcdef"), (11<<20)/16+3)
	p := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.PutFile(ctx, "v0/shards/big", p, ""); err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(t.TempDir(), "back")
	sum, _ := fileSum(p)
	if _, err := s.Download(ctx, "v0/shards/big", q, int64(len(data)), sum); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Download(ctx, "v0/shards/big", q, int64(len(data)), "00"+sum[2:]); err == nil {
		t.Fatal("a wrong sha256 was not caught")
	}
}

// TestStoreChecksChecksum: the server refuses a body whose
// x-amz-checksum-sha256 does not match (what Put relies on).
func TestStoreChecksChecksum(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	wrong := "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	_, err := s.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.loc.Bucket, Key: aws.String(s.key("x")),
		Body: bytes.NewReader([]byte("hello")), ContentLength: aws.Int64(5), ChecksumSHA256: &wrong})
	if err == nil {
		t.Fatal("the server took a body with a wrong x-amz-checksum-sha256")
	}
	if _, _, err := s.Get(ctx, "x", 100); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused object exists: %v", err)
	}
}

// TestPutFileRefusesBytesNotTheManifests: the sha256 a publisher passes
// (the manifest's) goes as x-amz-checksum-sha256, unsigned payload: a file
// whose bytes differ is refused by the server and leaves no object.
func TestPutFileRefusesBytesNotTheManifests(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	p := filepath.Join(t.TempDir(), "shard")
	if err := os.WriteFile(p, []byte("the bytes on disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, _ := fileSum(p)
	if err := s.PutFile(ctx, "v1/shards/a", p, sum); err != nil {
		t.Fatal(err)
	}
	other := sha256.Sum256([]byte("the bytes the manifest records"))
	if err := s.PutFile(ctx, "v1/shards/b", p, hex.EncodeToString(other[:])); err == nil {
		t.Fatal("the server took bytes whose sha256 is not the one sent")
	}
	if _, _, err := s.Get(ctx, "v1/shards/b", 100); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the refused object exists: %v", err)
	}
}

// TestStoreChecksPartChecksum: a multipart part whose
// x-amz-checksum-sha256 does not match its bytes is refused.
func TestStoreChecksPartChecksum(t *testing.T) {
	ctx := context.Background()
	s := testStore(t)
	key := aws.String(s.key("v2/shards/big"))
	up, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.loc.Bucket, Key: key, ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		t.Fatal(err)
	}
	defer s.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.loc.Bucket, Key: key, UploadId: up.UploadId})
	body := bytes.Repeat([]byte{7}, 1<<20)
	wrong := sha256.Sum256([]byte("not the part"))
	_, err = s.c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.loc.Bucket, Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))), ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(wrong[:]))}, unsignedPayload)
	if err == nil {
		t.Fatal("the server took a part whose x-amz-checksum-sha256 does not match")
	}
}
