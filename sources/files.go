package sources

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
)

// ReadCapped reads a whole file of at most limit bytes. A file found
// larger, by Stat before reading or while reading (it may grow), is
// reported with tooBig and no data.
func ReadCapped(name string, limit int64) (data []byte, tooBig bool, err error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if st.Size() > limit {
		return nil, true, nil
	}
	var buf bytes.Buffer
	buf.Grow(int(st.Size()) + bytes.MinRead)
	if _, err := buf.ReadFrom(io.LimitReader(f, limit+1)); err != nil {
		return nil, false, err
	}
	if int64(buf.Len()) > limit {
		return nil, true, nil
	}
	return buf.Bytes(), false, nil
}

// EachIndex calls fn(i) for every i in [0, n) in GOMAXPROCS goroutines
// and returns when all calls did: ctx.Err() when ctx is done (it stops
// handing out indices then), else the error of the lowest i whose call
// failed, so that which error is reported does not depend on the
// scheduling. Results go into slices indexed by i, so the caller keeps its
// order.
func EachIndex(ctx context.Context, n int, fn func(i int) error) error {
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				errs[i] = fn(i)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// ImageFiler is a Source whose images are whole encoded files (capture
// runs, COCO, YOLO): its ReadImage returns the bytes of the file
// ImageFile names, refused when larger than limit. A build hashes such a
// file for the sample's identity straight from the file, and keeps the
// digest for the next build keyed by the file's status
// (pipeline/reuse_inputs.go).
type ImageFiler interface {
	ImageFile(smp *Sample) (path string, limit int64, err error)
}

// ReadImageFile is the ReadImage of an ImageFiler whose errors start with
// kind ("capture: image frame.jpg: ...").
func ReadImageFile(src ImageFiler, kind string, smp *Sample) (Image, error) {
	abs, limit, err := src.ImageFile(smp)
	if err != nil {
		return Image{}, err
	}
	data, tooBig, err := ReadCapped(abs, limit)
	if err != nil {
		return Image{}, fmt.Errorf("%s: image %s: %w", kind, smp.ImagePath, err)
	}
	if tooBig {
		return Image{}, fmt.Errorf("%s: image %s is larger than %d bytes", kind, smp.ImagePath, limit)
	}
	return Image{Encoded: data}, nil
}

// NotFound reports errors that mean "no such file here": absent, a path
// through a regular file, a name the system cannot hold, a symbolic link
// loop. The file-based sources make them a missing_file reason; any other
// error of the file system fails the scan.
func NotFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, syscall.ENAMETOOLONG) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.ELOOP)
}
