package outputroot

import (
	"fmt"
	"regexp"
)

// FailedSuffix names the report a build that failed its thresholds leaves
// in its output root, ".<version>.failed": the plan's samples.jsonl and
// samples.parquet, every input sample with its reasons and their causes
// (docs/format/manifest.md, "The report of a failed build"). The next
// failed build of the version replaces it, its successful build removes
// it, and gc removes every one whose version is not being built.
const FailedSuffix = ".failed"

// FailedDir is the name of version name's failed-build report in its
// output root.
func FailedDir(name string) string { return "." + name + FailedSuffix }

var failedDirName = regexp.MustCompile(`^\.(v[0-9a-f]{16})\.failed$`)

// cleanFailed removes the failed-build reports whose version no build is
// running (a running build may be writing a new one).
func cleanFailed(s Storage, entries []Entry, dryRun bool, rep *GCReport) error {
	for _, e := range entries {
		m := failedDirName.FindStringSubmatch(e.Name)
		if m == nil || !e.Dir {
			continue
		}
		v := m[1]
		lock, ok, err := tryLock(s, "."+v+buildLockSuffix)
		if err != nil {
			return err
		}
		if !ok {
			rep.Kept = append(rep.Kept, Kept{e.Name, "a build of " + v + " is running"})
			continue
		}
		bytes, _ := s.Usage(e.Name)
		r := Removed{Path: s.Path(e.Name), Bytes: bytes, Why: "report of a failed build of " + v}
		if !dryRun {
			err = s.Remove(e.Name)
		}
		lock.Release()
		if err != nil {
			return fmt.Errorf("remove %s: %w", r.Path, err)
		}
		rep.Removed = append(rep.Removed, r)
	}
	return nil
}
