package main

// The process environment is read in cmd only: the flag step hands a
// command its getenv, and these functions turn the variables into the
// values the library packages take (thresholds, a partition).

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"warehouse-etl/config"
	"warehouse-etl/pipeline"
	"warehouse-etl/validate"
)

// loadConfig loads a build config and applies the operator's threshold
// overrides from the environment to it; either failing is a usage error.
func loadConfig(path string, getenv func(string) string) (*config.Config, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, usageError{err}
	}
	if cfg.Thresholds, err = thresholdsFromEnv(cfg.Thresholds, getenv); err != nil {
		return nil, usageError{err}
	}
	return cfg, nil
}

// thresholdsFromEnv returns t with the operator's overrides from the
// environment applied. For each category C in INVALID, MISSING, EMPTY:
//
//	WAREHOUSE_MAX_C         max_count: an integer >= 0, or "off" for no limit
//	WAREHOUSE_MAX_C_RATIO   max_ratio: a number in [0,1], or "off" for no limit
//	WAREHOUSE_C_ACTION      action: fail or warn
//
// An unset or empty variable changes nothing. A malformed value is an
// error naming the variable; all malformed variables are reported at once.
func thresholdsFromEnv(t validate.Thresholds, getenv func(string) string) (validate.Thresholds, error) {
	var errs []error
	for _, cat := range []struct {
		name  string
		limit *validate.Limit
	}{{"invalid", &t.Invalid}, {"missing", &t.Missing}, {"empty", &t.Empty}} {
		up := strings.ToUpper(cat.name)
		if v, ok := envValue(getenv, "WAREHOUSE_MAX_"+up); ok {
			n, err := parseCountLimit(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("WAREHOUSE_MAX_%s=%q: %w", up, v, err))
			} else {
				cat.limit.MaxCount = n
			}
		}
		if v, ok := envValue(getenv, "WAREHOUSE_MAX_"+up+"_RATIO"); ok {
			r, err := parseRatioLimit(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("WAREHOUSE_MAX_%s_RATIO=%q: %w", up, v, err))
			} else {
				cat.limit.MaxRatio = r
			}
		}
		if v, ok := envValue(getenv, "WAREHOUSE_"+up+"_ACTION"); ok {
			switch a := validate.Action(v); a {
			case validate.ActionFail, validate.ActionWarn:
				cat.limit.Action = a
			default:
				errs = append(errs, fmt.Errorf("WAREHOUSE_%s_ACTION=%q: must be fail or warn", up, v))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return validate.Thresholds{}, err
	}
	return t, nil
}

// envValue returns the trimmed value of name and whether it is set to
// something.
func envValue(getenv func(string) string, name string) (string, bool) {
	v := strings.TrimSpace(getenv(name))
	return v, v != ""
}

func parseCountLimit(v string) (*int64, error) {
	if v == "off" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, errors.New(`must be an integer >= 0 or "off"`)
	}
	return &n, nil
}

func parseRatioLimit(v string) (*float64, error) {
	if v == "off" {
		return nil, nil
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(r) || r < 0 || r > 1 {
		return nil, errors.New(`must be a number in [0,1] or "off"`)
	}
	return &r, nil
}

// partitionFromEnv is --partition auto: the partition from the job engine's
// environment:
//
//   - Slurm job array: SLURM_ARRAY_TASK_ID, with SLURM_ARRAY_TASK_MIN and
//     SLURM_ARRAY_TASK_MAX (index = ID - MIN, count = MAX - MIN + 1; the
//     array must be dense, step 1) or else SLURM_ARRAY_TASK_COUNT with
//     0-based ids;
//   - Kubernetes Indexed Job: JOB_COMPLETION_INDEX, with the count from
//     WAREHOUSE_PARTITIONS or else configured (the config's "partitions";
//     the Job's completions, which Kubernetes does not pass to the pod).
func partitionFromEnv(getenv func(string) string, configured int) (pipeline.Partition, error) {
	num := func(name string) (int, bool, error) {
		v := getenv(name)
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, false, fmt.Errorf("%s=%q: not an integer", name, v)
		}
		return n, true, nil
	}
	if id, ok, err := num("SLURM_ARRAY_TASK_ID"); err != nil {
		return pipeline.Partition{}, err
	} else if ok {
		if step, ok, err := num("SLURM_ARRAY_TASK_STEP"); err != nil {
			return pipeline.Partition{}, err
		} else if ok && step != 1 {
			return pipeline.Partition{}, fmt.Errorf("SLURM_ARRAY_TASK_STEP=%d: the array must be dense (--array=0-7, not 0-14:2), or give --partition i/N", step)
		}
		lo, okLo, err1 := num("SLURM_ARRAY_TASK_MIN")
		hi, okHi, err2 := num("SLURM_ARRAY_TASK_MAX")
		count, okCount, err3 := num("SLURM_ARRAY_TASK_COUNT")
		if err := errors.Join(err1, err2, err3); err != nil {
			return pipeline.Partition{}, err
		}
		switch {
		case okLo && okHi:
			if okCount && count != hi-lo+1 {
				return pipeline.Partition{}, fmt.Errorf("SLURM_ARRAY_TASK_COUNT=%d but MIN..MAX is %d..%d: the array must be dense, or give --partition i/N", count, lo, hi)
			}
			return pipeline.NewPartition(id-lo, hi-lo+1)
		case okCount:
			return pipeline.NewPartition(id, count)
		}
		return pipeline.Partition{}, errors.New("SLURM_ARRAY_TASK_ID is set but neither SLURM_ARRAY_TASK_MIN/MAX nor SLURM_ARRAY_TASK_COUNT")
	}
	if id, ok, err := num("JOB_COMPLETION_INDEX"); err != nil {
		return pipeline.Partition{}, err
	} else if ok {
		n, okN, err := num("WAREHOUSE_PARTITIONS")
		if err != nil {
			return pipeline.Partition{}, err
		}
		if !okN {
			n = configured
		}
		if n == 0 {
			return pipeline.Partition{}, errors.New("JOB_COMPLETION_INDEX is set but the partition count is not: set WAREHOUSE_PARTITIONS to the Job's completions (or \"partitions\" in the config)")
		}
		return pipeline.NewPartition(id, n)
	}
	return pipeline.Partition{}, errors.New("--partition auto: no job engine in the environment (SLURM_ARRAY_TASK_ID or JOB_COMPLETION_INDEX)")
}
