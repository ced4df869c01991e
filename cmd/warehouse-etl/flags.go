package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(env *environment, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.stderr, "usage: warehouse-etl %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; extra positional arguments are a usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsageShown
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// logFlags are the logging flags every long-running command shares.
type logFlags struct {
	format string
	quiet  bool
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.format, "log-format", "text", "structured log format on stderr: text or json")
	fs.BoolVar(&l.quiet, "quiet", false, "log warnings and errors only")
}

// logger builds the slog logger the library packages receive.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	level := slog.LevelInfo
	if l.quiet {
		level = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, usageError{fmt.Errorf("--log-format %q: want text or json", l.format)}
	}
}
