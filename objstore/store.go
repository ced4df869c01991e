// Package objstore keeps warehouse output roots in an S3-compatible object
// store: "s3://bucket/prefix" locations, the client, uploads with checksums
// the store verifies, conditional writes of the pointers, the version lock
// and readers' leases, the download of a version into a verified local
// cache, and gc. The object layout and the publish order are
// docs/format/s3.md.
//
// A build never writes a half version into the bucket: it builds into a
// local output root exactly as on disk (package outputroot, pipeline), and
// Push uploads what it published there, every file of a version before its
// manifest, then moves the pointers with a conditional PutObject.
package objstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"
)

// Scheme starts every object store location.
const Scheme = "s3://"

// IsLocation reports whether s names an object store location
// ("s3://bucket[/prefix]") rather than a local path.
func IsLocation(s string) bool { return strings.HasPrefix(s, Scheme) }

// Location is a parsed "s3://bucket/prefix": the prefix has no leading or
// trailing slash and may be empty.
type Location struct {
	Bucket, Prefix string
}

// ParseLocation parses s3://bucket[/prefix]. Empty path segments, "." and
// ".." are refused, so a location names one prefix only.
func ParseLocation(s string) (Location, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return Location{}, fmt.Errorf("%q: not an s3:// location", s)
	}
	rest = strings.TrimSuffix(rest, "/")
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" {
		return Location{}, fmt.Errorf("%q: no bucket (want s3://bucket/prefix)", s)
	}
	if prefix != "" {
		for _, seg := range strings.Split(prefix, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return Location{}, fmt.Errorf("%q: the prefix has an empty, . or .. segment", s)
			}
		}
	}
	return Location{Bucket: bucket, Prefix: prefix}, nil
}

// String is the location as s3://bucket/prefix.
func (l Location) String() string {
	if l.Prefix == "" {
		return Scheme + l.Bucket
	}
	return Scheme + l.Bucket + "/" + l.Prefix
}

// Join is the location of name under l.
func (l Location) Join(name string) Location {
	return Location{Bucket: l.Bucket, Prefix: strings.TrimPrefix(l.Prefix+"/"+name, "/")}
}

// ErrPrecondition means a conditional write lost: the object changed (or
// came into existence) since it was read.
var ErrPrecondition = errors.New("precondition failed: the object changed since it was read")

// Store is an output root in a bucket: every key is relative to its prefix.
type Store struct {
	c   *s3.Client
	loc Location
	// PartSize is the part size of multipart uploads; files larger than
	// MultipartAbove are uploaded in parts, Parallel at a time.
	PartSize       int64
	MultipartAbove int64
	Parallel       int
}

// Open makes the Store of loc with the AWS SDK's default configuration:
// credentials, region and endpoint from the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_PROFILE,
// AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_S3), the shared config and
// credentials files, and the instance or container role, in the order the
// SDKs take them. It is the one place that reads the environment (the
// SDK does) and is called from cmd only. With an endpoint URL set
// (an S3-compatible store) requests use path-style addressing.
func Open(ctx context.Context, loc Location) (*Store, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("s3 configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	// Checksums: the ones we send are explicit (x-amz-checksum-sha256);
	// the SDK adds no aws-chunked trailers a compatible store may lack.
	cfg.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	cfg.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if o.BaseEndpoint != nil && *o.BaseEndpoint != "" {
			o.UsePathStyle = true
		}
	})
	return &Store{c: c, loc: loc, PartSize: 16 << 20, MultipartAbove: 64 << 20, Parallel: 8}, nil
}

// Location is the store's location.
func (s *Store) Location() Location { return s.loc }

// URL is the s3:// URL of key name.
func (s *Store) URL(name string) string { return s.loc.Join(name).String() }

func (s *Store) key(name string) string {
	if s.loc.Prefix == "" {
		return name
	}
	return s.loc.Prefix + "/" + name
}

// Object is one object of a listing, its key relative to the store's prefix.
type Object struct {
	Name     string
	Size     int64
	ETag     string
	Modified time.Time
}

// List lists the objects whose names start with sub (relative to the
// prefix; "" for all), sorted by name.
func (s *Store) List(ctx context.Context, sub string) ([]Object, error) {
	base := s.key("")
	p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{Bucket: &s.loc.Bucket, Prefix: aws.String(base + sub)})
	var out []Object
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", s.URL(sub), mapErr(err))
		}
		for _, o := range page.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), base)
			out = append(out, Object{Name: name, Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag), Modified: aws.ToTime(o.LastModified)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get reads object name whole (small objects: pointers, manifests,
// leases). A missing object is an error wrapping fs.ErrNotExist. limit
// bounds the size read.
func (s *Store) Get(ctx context.Context, name string, limit int64) (body []byte, etag string, err error) {
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.loc.Bucket, Key: aws.String(s.key(name))})
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", s.URL(name), mapErr(err))
	}
	defer out.Body.Close()
	if out.ContentLength != nil && *out.ContentLength > limit {
		return nil, "", fmt.Errorf("get %s: %d bytes, more than the %d expected", s.URL(name), *out.ContentLength, limit)
	}
	body, err = io.ReadAll(io.LimitReader(out.Body, limit+1))
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", s.URL(name), err)
	}
	if int64(len(body)) > limit {
		return nil, "", fmt.Errorf("get %s: more than the %d bytes expected", s.URL(name), limit)
	}
	return body, aws.ToString(out.ETag), nil
}

// Download writes object name to the new file at p, checking its size and
// sha256 (hex) against want as it goes: a mismatch removes the file and is
// a *ChecksumError. want.SHA256 "" checks nothing.
func (s *Store) Download(ctx context.Context, name, p string, wantBytes int64, wantSHA256 string) (etag string, err error) {
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.loc.Bucket, Key: aws.String(s.key(name))})
	if err != nil {
		return "", fmt.Errorf("get %s: %w", s.URL(name), mapErr(err))
	}
	defer out.Body.Close()
	if err := os.MkdirAll(path.Dir(p), 0o755); err != nil {
		return "", err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), out.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && wantSHA256 != "" && (n != wantBytes || hex.EncodeToString(h.Sum(nil)) != wantSHA256) {
		err = &ChecksumError{URL: s.URL(name), WantBytes: wantBytes, GotBytes: n, Want: wantSHA256, Got: hex.EncodeToString(h.Sum(nil))}
	}
	if err != nil {
		os.Remove(p)
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

// ChecksumError is an object whose bytes are not the ones its manifest
// records.
type ChecksumError struct {
	URL                 string
	WantBytes, GotBytes int64
	Want, Got           string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s: %d bytes with sha256 %s, but the manifest records %d bytes with sha256 %s: the object is corrupt or was replaced",
		e.URL, e.GotBytes, e.Got, e.WantBytes, e.Want)
}

// Cond is the condition of a conditional PutObject: IfMatch an ETag (the
// object is still the one read), or IfNoneMatch (the object does not
// exist yet). The zero Cond writes unconditionally.
type Cond struct {
	IfMatch     string
	IfNoneMatch bool
}

// Put writes body to object name with its sha256 in
// x-amz-checksum-sha256 (the store checks it and refuses a mismatch) and
// the condition cond; a lost condition is an error wrapping
// ErrPrecondition. It returns the new ETag.
func (s *Store) Put(ctx context.Context, name string, body []byte, cond Cond) (string, error) {
	sum := sha256.Sum256(body)
	in := &s3.PutObjectInput{
		Bucket: &s.loc.Bucket, Key: aws.String(s.key(name)), Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	}
	if cond.IfMatch != "" {
		in.IfMatch = aws.String(cond.IfMatch)
	}
	if cond.IfNoneMatch {
		in.IfNoneMatch = aws.String("*")
	}
	out, err := s.c.PutObject(ctx, in)
	if err != nil {
		return "", fmt.Errorf("put %s: %w", s.URL(name), mapErr(err))
	}
	return aws.ToString(out.ETag), nil
}

// PutFile uploads the file at p to object name: in one PutObject with
// x-amz-checksum-sha256, or above MultipartAbove in parts of PartSize
// uploaded Parallel at a time, each with its own sha256, which the store
// checks. want is the sha256 (hex) the file's bytes must have, from the
// manifest: sent as the checksum, so the store refuses bytes that are not
// the manifest's; "" computes it from the file.
func (s *Store) PutFile(ctx context.Context, name, p, want string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.Size() > s.MultipartAbove {
		return s.putMultipart(ctx, name, p, fi.Size())
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	var sum []byte
	if want != "" {
		if sum, err = hex.DecodeString(want); err != nil || len(sum) != sha256.Size {
			return fmt.Errorf("put %s: sha256 %q is not 64 hex digits", s.URL(name), want)
		}
	} else {
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		sum = h.Sum(nil)
	}
	_, err = s.c.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.loc.Bucket, Key: aws.String(s.key(name)), Body: f, ContentLength: aws.Int64(fi.Size()),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum)),
	}, unsignedPayload)
	if err != nil {
		return fmt.Errorf("put %s: %w", s.URL(name), mapErr(err))
	}
	return nil
}

func (s *Store) putMultipart(ctx context.Context, name, p string, size int64) (err error) {
	key := aws.String(s.key(name))
	up, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.loc.Bucket, Key: key, ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		return fmt.Errorf("multipart upload of %s: %w", s.URL(name), mapErr(err))
	}
	defer func() {
		if err != nil {
			// Parts of an abandoned upload are never an object; abort
			// frees them (a killed process leaves them to the bucket's
			// lifecycle rule, docs/format/s3.md).
			_, _ = s.c.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{Bucket: &s.loc.Bucket, Key: key, UploadId: up.UploadId})
		}
	}()
	n := int((size + s.PartSize - 1) / s.PartSize)
	parts := make([]types.CompletedPart, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, s.Parallel))
	for i := range n {
		g.Go(func() error {
			off := int64(i) * s.PartSize
			ln := min(s.PartSize, size-off)
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			h := sha256.New()
			if _, err := io.Copy(h, io.NewSectionReader(f, off, ln)); err != nil {
				return err
			}
			sum := aws.String(base64.StdEncoding.EncodeToString(h.Sum(nil)))
			out, err := s.c.UploadPart(gctx, &s3.UploadPartInput{
				Bucket: &s.loc.Bucket, Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(int32(i + 1)),
				Body: io.NewSectionReader(f, off, ln), ContentLength: aws.Int64(ln),
				ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumSHA256: sum,
			}, unsignedPayload)
			if err != nil {
				return fmt.Errorf("part %d of %s: %w", i+1, s.URL(name), mapErr(err))
			}
			parts[i] = types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1)), ChecksumSHA256: sum}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	_, err = s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: &s.loc.Bucket, Key: key, UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		return fmt.Errorf("complete multipart upload of %s: %w", s.URL(name), mapErr(err))
	}
	return nil
}

// Delete removes object name (no error when it does not exist).
func (s *Store) Delete(ctx context.Context, name string) error {
	_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.loc.Bucket, Key: aws.String(s.key(name))})
	if err != nil && !errors.Is(mapErr(err), fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", s.URL(name), mapErr(err))
	}
	return nil
}

// CreateBucket creates the store's bucket (tests and first use); one that
// exists already and is ours is no error.
func (s *Store) CreateBucket(ctx context.Context) error {
	_, err := s.c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.loc.Bucket})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %s: %w", s.loc.Bucket, err)
	}
	return nil
}

// mapErr turns a missing object into fs.ErrNotExist and a lost condition
// into ErrPrecondition, keeping the store's message.
func mapErr(err error) error {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return fmt.Errorf("%w (%v)", fs.ErrNotExist, err)
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusNotFound:
			return fmt.Errorf("%w (%v)", fs.ErrNotExist, err)
		case http.StatusPreconditionFailed, http.StatusConflict:
			return fmt.Errorf("%w (%v)", ErrPrecondition, err)
		}
	}
	var ae smithy.APIError
	if errors.As(err, &ae) && (ae.ErrorCode() == "PreconditionFailed" || ae.ErrorCode() == "ConditionalRequestConflict") {
		return fmt.Errorf("%w (%v)", ErrPrecondition, err)
	}
	return err
}

// fileSum is the sha256 (hex) of the file at p.
func fileSum(p string) (string, int64) {
	f, err := os.Open(p)
	if err != nil {
		return "", -1
	}
	defer f.Close()
	h := sha256.New()
	n, _ := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n
}

// unsignedPayload signs a bulk upload's headers but not its body
// (UNSIGNED-PAYLOAD): the body's integrity is x-amz-checksum-sha256, which
// the store checks, so the SDK's own pass over the bytes to hash them for
// the signature is saved.
func unsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}
