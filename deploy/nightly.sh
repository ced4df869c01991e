#!/bin/sh
# nightly.sh CONFIG: one night of one pinned config, the same for every scheduler in
# deploy/ (the Kubernetes CronJob, the Slurm job, the systemd service):
#
#   1. build   warehouse-etl build --config CONFIG     publishes a new version and moves
#                                                      `latest`, or says "up to date"
#   2. verify  warehouse-etl verify --full             the version directory build printed
#   3. gc      warehouse-etl gc --keep N --keep-days D under that version's output root
#   4. report  warehouse-etl report --out REPORT_DIR/<version>: the viewer's pages as static
#                                                      HTML beside the build (REPORTS=0: skip)
#
# A step that fails stops the night, and the script exits with that step's exit code
# unchanged, so the scheduler can tell "retry" (1, 5) from "alert, do not retry"
# (2, 3, 4, 7): deploy/README.md has the table. gc does not run after a failed verify.
# A TERM or INT to this shell (Kubernetes signals only PID 1, which is this shell) stops
# the running step cleanly (it exits 130) and the script with it.
#
# Environment, all optional:
#   WAREHOUSE_ETL     the binary (default: warehouse-etl on PATH)
#   KEEP, KEEP_DAYS   gc --keep and --keep-days (default 3 and 7): keep versions at least
#                     as long as your longest training run (README: "Training")
#   LOCK_WAIT         build --lock-wait (default 30m)
#   VERIFY_FLAGS      verify flags (default --full; set it empty for the quick check)
#   METRICS_DIR       node_exporter's textfile collector directory: build writes
#                     warehouse-etl-build-NAME.prom there (--metrics-file) and this script
#                     warehouse-etl-nightly-NAME.prom (NAME: CONFIG's file name without
#                     its extension)
#   WAREHOUSE_CLEAR   passed on to build: 1 rebuilds the version and replaces it, changed
#                     rebuilds it only when its sources changed (README, docs/reuse.md)
#   REUSE             1 (default): build copies the samples whose input identity matches a
#                     sample of a version already under the output root instead of decoding
#                     them, so a night pays for what changed (docs/reuse.md); 0: --no-reuse
#   REUSE_FROM        another output root (or version directory) to reuse samples from
#   REPORT_DIR        where report writes (default: OUTPUT_ROOT/reports, ./reports for an
#                     s3:// root; one directory per version, named like it; gc does not
#                     remove them); REPORTS=0 skips it
#
# build --lock-wait and --metrics-file are new in issue 12: a binary older than them
# rejects them as a usage error (exit 2).
set -eu

if [ $# -ne 1 ]; then
	echo "usage: nightly.sh CONFIG   (see deploy/README.md)" >&2
	exit 2
fi
config=$1
bin=${WAREHOUSE_ETL:-warehouse-etl}
keep=${KEEP:-3}
keep_days=${KEEP_DAYS:-7}
lock_wait=${LOCK_WAIT:-30m}
verify_flags=${VERIFY_FLAGS---full}
metrics_dir=${METRICS_DIR:-}
reports=${REPORTS:-1}
reuse=${REUSE:-1}
reuse_from=${REUSE_FROM:-}
name=$(basename "$config")
name=${name%.*}

step=start     # the step running, then the one that failed; "done" after gc
child=         # its process id while it runs
interrupted=
out=$(mktemp "${TMPDIR:-/tmp}/warehouse-etl-nightly.XXXXXX") # build's stdout

# meaning CODE: what an exit code asks of the operator (README: "Exit codes").
meaning() {
	case $1 in
	1) echo "failure (I/O, internal error): retry" ;;
	2) echo "usage or config error: fix the config or the command, do not retry" ;;
	3) echo "a validation threshold was exceeded and nothing was published: look at the data" ;;
	4) echo "the sources changed since this version was built (the message says how much a rebuild would reuse): decide, then rerun with WAREHOUSE_CLEAR=1 or change the config" ;;
	5) echo "another build of this version still held its lock after --lock-wait: retry later" ;;
	7) echo "verify found problems: do not train on this version" ;;
	130) echo "interrupted" ;;
	*) echo "see warehouse-etl's README" ;;
	esac
}

# write_metrics CODE: the night's outcome for node_exporter, replaced atomically (the
# collector reads only *.prom files, so it never sees the temporary one).
write_metrics() {
	label=$(printf '%s' "$config" | sed 's/\\/\\\\/g; s/"/\\"/g')
	tmp=$metrics_dir/.warehouse-etl-nightly-$name.prom.tmp
	{
		echo "# HELP warehouse_etl_nightly_last_exit_code Exit code of the last nightly run (0: build, verify and gc succeeded); step is the step that set it."
		echo "# TYPE warehouse_etl_nightly_last_exit_code gauge"
		echo "warehouse_etl_nightly_last_exit_code{config=\"$label\",step=\"$step\"} $1"
		echo "# HELP warehouse_etl_nightly_last_run_timestamp_seconds Unix time the last nightly run ended."
		echo "# TYPE warehouse_etl_nightly_last_run_timestamp_seconds gauge"
		echo "warehouse_etl_nightly_last_run_timestamp_seconds{config=\"$label\"} $(date +%s)"
	} >"$tmp" && mv -f "$tmp" "$metrics_dir/warehouse-etl-nightly-$name.prom"
}

finish() {
	rc=$?
	rm -f "$out"
	if [ -n "$metrics_dir" ]; then
		write_metrics "$rc" || echo "nightly: could not write $metrics_dir/warehouse-etl-nightly-$name.prom" >&2
	fi
	exit "$rc"
}
trap finish EXIT

# TERM or INT: stop the running step with TERM (warehouse-etl exits 130 on either; a
# background command of a non-interactive shell starts with INT ignored, so INT would
# not reach it) and run no further step.
on_signal() {
	interrupted=1
	if [ -n "$child" ]; then
		kill -s TERM "$child" 2>/dev/null || true
	fi
}
trap on_signal TERM INT

# run STEP COMMAND...: runs COMMAND in the background, so that a signal to this shell
# reaches it, and returns its exit code.
run() {
	step=$1
	shift
	if [ -n "$interrupted" ]; then
		exit 130
	fi
	"$@" &
	child=$!
	rc=0
	wait "$child" || rc=$?
	while kill -0 "$child" 2>/dev/null; do # wait returned early for a signal
		rc=0
		wait "$child" || rc=$?
	done
	child=
	return "$rc"
}

# fail CODE: says which step failed and what that asks for, exits with CODE unchanged.
fail() {
	echo "nightly: $step failed with exit code $1: $(meaning "$1")" >&2
	exit "$1"
}

set -- build --config "$config" --lock-wait "$lock_wait"
if [ "$reuse" = 0 ]; then
	set -- "$@" --no-reuse
fi
if [ -n "$reuse_from" ]; then
	set -- "$@" --reuse-from "$reuse_from"
fi
if [ -n "$metrics_dir" ]; then
	set -- "$@" --metrics-file "$metrics_dir/warehouse-etl-build-$name.prom"
fi
run build "$bin" "$@" >"$out" || fail $?
dir=$(tail -n 1 "$out")
# On an s3:// output root build prints the version's URL: verify and report read it
# from the store, gc runs on the root's URL, reports go to a local directory.
case $dir in
s3://*/v*)
	root=${dir%/*}
	report_root=${REPORT_DIR:-reports}
	;;
*)
	if [ ! -d "$dir" ]; then
		echo "nightly: build printed no version directory (got '$dir')" >&2
		exit 1
	fi
	root=$(dirname "$dir")
	report_root=${REPORT_DIR:-$root/reports}
	;;
esac
echo "nightly: version $dir"

# shellcheck disable=SC2086 # verify_flags is a list of flags, possibly empty
run verify "$bin" verify --tensor-warehouse "$dir" $verify_flags || fail $?
run gc "$bin" gc --output-root "$root" --keep "$keep" --keep-days "$keep_days" || fail $?
if [ "$reports" != 0 ]; then
	report_dir=$report_root/$(basename "$dir")
	run report "$bin" report --tensor-warehouse "$dir" --out "$report_dir" || fail $?
	echo "nightly: report $report_dir/index.html"
fi
step='done'
if [ -n "$interrupted" ]; then
	exit 130
fi
# The pointers of the output root: latest, and latest-<config> of each config that
# publishes there (deploy/README.md, "Several configs in one output root").
pointers=
for p in "$root"/latest "$root"/latest-*; do # none on disk for an s3:// root
	[ -L "$p" ] && pointers="$pointers${pointers:+, }$(basename "$p") -> $(readlink "$p")"
done
case $dir in s3://*) pointers="latest in the store" ;; esac
echo "nightly: done: $dir verified; ${pointers:-no latest}"
