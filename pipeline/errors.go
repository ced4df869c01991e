package pipeline

import "fmt"

// StaleError is returned when the version directory exists but its sources
// changed since it was built; WAREHOUSE_CLEAR=1 rebuilds it.
type StaleError struct {
	Dir    string
	Change string
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("sources changed since %s was built: %s; rerun with WAREHOUSE_CLEAR=1 to rebuild and replace it", e.Dir, e.Change)
}

// ConfigError is a build that cannot start because of its configuration:
// a source the config names that cannot be opened as that kind, or a bad
// threshold override in the environment.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }
