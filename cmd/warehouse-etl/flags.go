package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// newFlagSet returns a flag set that reports errors to w instead of
// exiting.
func newFlagSet(w io.Writer, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "usage: warehouse-etl %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// flagStep returns the step that runs a command from its arguments: it
// fills the command's options O from its flags ((*O).addFlags registers
// them) and, when O reads environment variables (envReader), from the
// process environment, then calls run with them. A run that stops at a
// missing required flag (requireFlags) gets the command's usage printed
// with it, as a bad flag does.
func flagStep[O any, P interface {
	*O
	addFlags(fs *flag.FlagSet)
}](name, synopsis string, run func(context.Context, O, streams) error) func(context.Context, *environment, []string) error {
	return func(ctx context.Context, env *environment, args []string) error {
		var opts O
		if r, ok := any(&opts).(envReader); ok {
			r.readEnv(env.getenv)
		}
		fs := newFlagSet(env.stderr, name, synopsis)
		P(&opts).addFlags(fs)
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		err := run(ctx, opts, env.streams)
		var missing missingFlagsError
		if errors.As(err, &missing) {
			fs.Usage()
		}
		return err
	}
}

// envReader is implemented by the options of a command that reads
// environment variables: the flag step is the one place a command reads
// them, through getenv, before its flags.
type envReader interface {
	readEnv(getenv func(string) string)
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

// flagValue is a string flag, by name (without dashes), and the value it
// was given.
type flagValue struct{ name, value string }

// missingFlagsError is a command run without a flag it requires.
type missingFlagsError struct {
	names []string // without dashes
	oneOf bool     // any one of names would do
}

func (e missingFlagsError) Error() string {
	list := "--" + e.names[0]
	for i, name := range e.names[1:] {
		switch {
		case i < len(e.names)-2:
			list += ", --" + name
		case e.oneOf:
			list += " or --" + name
		default:
			list += " and --" + name
		}
	}
	if len(e.names) > 1 && !e.oneOf {
		return list + " are required"
	}
	return list + " is required"
}

// requireFlags is the check of a command's required flags, the first thing
// its run function does: nil when every flag has a value, else the usage
// error naming all of them ("--a is required", "--a and --b are required").
func requireFlags(flags ...flagValue) error {
	return checkRequired(flags, false)
}

// requireOneFlag is requireFlags for alternatives: nil when at least one
// has a value ("--a or --b is required").
func requireOneFlag(flags ...flagValue) error {
	return checkRequired(flags, true)
}

func checkRequired(flags []flagValue, oneOf bool) error {
	names := make([]string, len(flags))
	given := 0
	for i, f := range flags {
		names[i] = f.name
		if f.value != "" {
			given++
		}
	}
	if given == len(flags) || (oneOf && given > 0) {
		return nil
	}
	return usageError{missingFlagsError{names: names, oneOf: oneOf}}
}

// logOptions are the logging flags every long-running command shares.
type logOptions struct {
	Format string
	Quiet  bool
}

func (l *logOptions) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&l.Format, "log-format", "text", "structured log format on stderr: text or json")
	fs.BoolVar(&l.Quiet, "quiet", false, "log warnings and errors only")
}

// logger builds the slog logger the library packages receive.
func (l logOptions) logger(w io.Writer) (*slog.Logger, error) {
	level := slog.LevelInfo
	if l.Quiet {
		level = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.Format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, usageError{fmt.Errorf("--log-format %q: want text or json", l.Format)}
	}
}
