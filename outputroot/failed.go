package outputroot

import (
	"regexp"
	"time"
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
		err := removeIdle(s, e.Name, v, dryRun, rep, "a build of "+v+" is running",
			func(time.Time) (string, string) { return "report of a failed build of " + v, "" })
		if err != nil {
			return err
		}
	}
	return nil
}
