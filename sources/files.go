package sources

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
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

// NotFound reports errors that mean "no such file here": absent, a path
// through a regular file, a name the system cannot hold, a symbolic link
// loop. The file-based sources make them a missing_file reason; any other
// error of the file system fails the scan.
func NotFound(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) ||
		errors.Is(err, syscall.ENAMETOOLONG) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.ELOOP)
}
