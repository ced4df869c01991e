package objstore

import (
	"strings"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

// FuzzObjectBodies feeds arbitrary bytes to the parsers of what a reader
// or gc takes from the store (a pointer object, a lease object) and
// arbitrary text to ParseLocation. Nothing may panic; a pointer accepted
// names a version; a lease accepted names a version; a location accepted
// round-trips and has no empty, "." or ".." segment. The seeds in
// testdata/fuzz/FuzzObjectBodies are the shapes docs/format/s3.md defines
// and a few broken ones.
func FuzzObjectBodies(f *testing.F) {
	f.Add([]byte("v0123456789abcdef\n"), "s3://warehouses/team/demo")
	f.Add([]byte(`{"version":"v0123456789abcdef","holder":"host:1:ab","expires_unix_ms":1}`), "s3://b")
	f.Add([]byte("../etc\n"), "s3:///x//y")
	f.Fuzz(func(t *testing.T, body []byte, loc string) {
		fuzzmem.Check(t, 4*fuzzmem.MiB+16*uint64(len(body)+len(loc)), func() {
			if v, err := ParsePointer(body); err == nil && !IsVersionName(v) {
				t.Fatalf("pointer %q accepted as %q", body, v)
			}
			if lb, ok := parseLease(body); ok && !IsVersionName(lb.Version) {
				t.Fatalf("lease %q accepted for %q", body, lb.Version)
			}
			l, err := ParseLocation(loc)
			if err != nil {
				return
			}
			if l.Bucket == "" || strings.Contains(l.Bucket, "/") {
				t.Fatalf("%q: bucket %q", loc, l.Bucket)
			}
			again, err := ParseLocation(l.String())
			if err != nil || again != l {
				t.Fatalf("%q -> %v -> %q -> %v, %v", loc, l, l.String(), again, err)
			}
			if l.Prefix != "" {
				for _, seg := range strings.Split(l.Prefix, "/") {
					if seg == "" || seg == "." || seg == ".." {
						t.Fatalf("%q: prefix %q has segment %q", loc, l.Prefix, seg)
					}
				}
			}
		})
	})
}
