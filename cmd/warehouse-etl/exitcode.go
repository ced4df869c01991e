package main

import (
	"context"
	"errors"
	"flag"

	"warehouse-etl/analytics"
	"warehouse-etl/objstore"
	"warehouse-etl/outputroot"
	"warehouse-etl/pipeline"
	"warehouse-etl/validate"
	"warehouse-etl/verify"
)

// Exit codes; the usage text in main.go lists them for users.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitThreshold   = 3
	exitStale       = 4
	exitLocked      = 5
	exitDrift       = 6
	exitFindings    = 7
	exitIncomplete  = 8
	exitPublished   = 9
	exitInterrupted = 130
)

// usageError marks bad flags or a bad config: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// errUsageShown is returned after the flag package already printed why.
var errUsageShown = usageError{errors.New("usage")}

// exitCode is the one place that maps errors to exit codes.
func exitCode(ctx context.Context, err error) int {
	var (
		threshold *validate.ThresholdError
		stale     *pipeline.StaleError
		drift     *analytics.DriftError
		findings  *verify.FindingsError
		usage     usageError
		config    *pipeline.ConfigError
		partial   *pipeline.IncompleteError
		published *outputroot.PublishedError
		corrupt   *objstore.ChecksumError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &threshold):
		return exitThreshold
	case errors.As(err, &stale):
		return exitStale
	case errors.As(err, &partial):
		return exitIncomplete
	case errors.As(err, &published):
		return exitPublished
	case errors.Is(err, outputroot.ErrLocked):
		return exitLocked
	case errors.As(err, &drift):
		return exitDrift
	case errors.As(err, &findings), errors.As(err, &corrupt):
		return exitFindings
	case errors.As(err, &usage), errors.As(err, &config):
		return exitUsage
	default:
		return exitFailure
	}
}
