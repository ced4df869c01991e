package pipeline

import "fmt"

// StaleError is returned when the version directory exists but its sources
// changed since it was built; WAREHOUSE_CLEAR=1 rebuilds it.
type StaleError struct {
	Dir    string
	Change string
	// Planned and Changed, when Estimated: the new build's planned
	// samples and how many of them no published version has (the rest
	// the rebuild copies instead of decoding; reuse.go).
	Planned, Changed int64
	Estimated        bool
	// EstimatedBy, when not Estimated, names the run that estimates instead
	// (partition 0 of a partitioned build; the others would repeat its scan).
	EstimatedBy string
}

func (e *StaleError) Error() string {
	reuse := ""
	if e.Estimated {
		reuse = fmt.Sprintf("; %s of %s samples changed; the rebuild reuses the rest", thousands(e.Changed), thousands(e.Planned))
	} else if e.EstimatedBy != "" {
		reuse = "; " + e.EstimatedBy + " says how much of it the rebuild reuses"
	}
	return fmt.Sprintf("sources changed since %s was built: %s%s; rerun with WAREHOUSE_CLEAR=1 to rebuild and replace it", e.Dir, e.Change, reuse)
}

// ConfigError is a build that cannot start because of its configuration:
// a source the config names that cannot be opened as that kind, or a bad
// threshold override in the environment.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }
