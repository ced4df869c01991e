// Command warehouse-etl builds, checks and serves versioned tensor
// warehouses. Each subcommand lives in its own cmd_<name>.go: the options
// its flags (and the environment variables it reads) fill, and its testable
// run function, run<Name>(ctx, opts, streams); flagStep fills the options
// from the arguments and calls it. Exit codes are decided in exitCode
// alone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// command is one subcommand; run runs it from its arguments.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *environment, args []string) error
}

// streams are what a command's run function writes to.
type streams struct {
	stdout, stderr io.Writer
	stderrIsTTY    bool
}

// environment is what main hands a command: its streams and the process
// environment, injectable for tests. main is the one place that reads the
// process environment (os.Getenv); a command's flag step reads the
// variables it needs through getenv into its options (envReader), and its
// run function and the library packages get them from there.
type environment struct {
	streams
	getenv func(string) string
}

var commands = []command{
	{"build", "build (or confirm up to date) the warehouse version a config describes", flagStep("build", buildSynopsis, runBuild)},
	{"validate", "check a config's inputs against its thresholds (--decode: every decode too) without building; exit 3 as build", flagStep("validate", validateSynopsis, runValidate)},
	{"commit", "publish a version whose partitions (build --partition i/N) have all finished; exit 8 if some have not", flagStep("commit", commitSynopsis, runCommit)},
	{"version", "print the code version", flagStep("version", "", runVersion)},
	{"verify", "check a warehouse version (--full: re-hash and read every value); exit 7 on findings", flagStep("verify", verifySynopsis, runVerify)},
	{"inspect", "summarize a warehouse version; --sample N --png FILE renders a sample with its boxes", flagStep("inspect", inspectSynopsis, runInspect)},
	{"load", "read a warehouse the way training does and report throughput", flagStep("load", loadSynopsis, runLoad)},
	{"export", "write a version's exports: export parquet (analytics), export zarr (Zarr v3 store)", exportCommand},
	{"diff", "compare two versions; exit 6 past the drift limits", flagStep("diff", diffSynopsis, runDiff)},
	{"serve", "serve a read-only web viewer of a version (samples, rejections, runs, drift) on 127.0.0.1", flagStep("serve", serveSynopsis, runServe)},
	{"report", "write the viewer's overview and sample pages as static HTML with images (--out DIR)", flagStep("report", reportSynopsis, runReport)},
	{"gc", "remove old versions and unfinished builds' temporaries under an output root (--keep N)", flagStep("gc", gcSynopsis, runGC)},
}

const usageText = `usage: warehouse-etl <command> [flags]

commands:
%s
exit codes:
  0    success (including "up to date")
  1    failure: I/O error, corrupt input the build cannot continue past, internal error
  2    usage or configuration error
  3    validation thresholds exceeded: nothing was published (build), or the
       warehouse's recorded summary exceeds its thresholds (load)
  4    sources changed since this version was built: rerun with WAREHOUSE_CLEAR=1
  5    another build of the same version holds its lock
  6    diff: a drift limit was exceeded
  7    verify found problems: do not train on this version (the output says what to run next)
  8    commit: some shards are not built or do not check out (the output names the
       partitions to rerun): nothing was published
  9    build/commit: the version is published and complete, but a step after it
       failed (fsync of the root, moving latest): rerun the build to finish
  130  interrupted (SIGINT/SIGTERM): nothing was published

Run 'warehouse-etl <command> -h' (or 'warehouse-etl help <command>') for a command's flags;
'warehouse-etl --version' is 'warehouse-etl version'.
`

func usage(w io.Writer) {
	var list string
	for _, c := range commands {
		list += fmt.Sprintf("  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, usageText, list)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := &environment{
		streams: streams{stdout: os.Stdout, stderr: os.Stderr, stderrIsTTY: isTerminal(os.Stderr)},
		getenv:  os.Getenv,
	}
	code := run(ctx, env, os.Args[1:])
	stop()
	os.Exit(code)
}

// run dispatches to a subcommand and maps its error to an exit code.
func run(ctx context.Context, env *environment, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		// help <command> [<format>] is <command> [<format>] -h: that
		// command's usage.
		if len(args) >= 2 && args[0] == "help" && findCommand(args[1]) != nil {
			return run(ctx, env, append(slices.Clone(args[1:]), "-h"))
		}
		usage(env.stderr)
		if len(args) == 0 {
			return exitUsage
		}
		if len(args) > 1 {
			fmt.Fprintf(env.stderr, "\nwarehouse-etl help: unknown command %q\n", args[1])
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "--version", "-version", "-v":
		args = append([]string{"version"}, args[1:]...)
	}
	if c := findCommand(args[0]); c != nil {
		// A version in an object store is read from a checked local copy.
		rest, cenv, done, err := fetchS3Args(ctx, env, c.name, args[1:])
		if err == nil {
			err = c.run(ctx, cenv, rest)
		}
		done()
		code := exitCode(ctx, err)
		if err != nil && !errors.Is(err, errUsageShown) && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(env.stderr, "warehouse-etl %s: %v\n", c.name, err)
		}
		return code
	}
	fmt.Fprintf(env.stderr, "warehouse-etl: unknown command %q\n\n", args[0])
	usage(env.stderr)
	return exitUsage
}

// findCommand is the command named name, or nil.
func findCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
