package warehouse

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// mkdirTemp creates a new directory dir/prefix<random> with mode 0777 as
// the umask allows (0755 under the usual 022), unlike os.MkdirTemp, whose
// 0700 would make a published version unreadable to a training job of
// another user.
func mkdirTemp(dir, prefix string) (string, error) {
	for range 100 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		p := filepath.Join(dir, prefix+hex.EncodeToString(b[:]))
		err := os.Mkdir(p, 0o777)
		if err == nil {
			return p, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", errors.New("warehouse: no unused temporary directory name in " + dir)
}
