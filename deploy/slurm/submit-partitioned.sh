#!/bin/bash
# submit-partitioned.sh: a partitioned build on a Slurm cluster: N array tasks
# (partition.sbatch) and the commit (commit.sbatch) that Slurm starts only after every
# task exited 0.
#
#   deploy/slurm/submit-partitioned.sh N [extra sbatch flags...]     e.g. 32 --partition=big
#
# afterok on an array job waits for all of its tasks. A task that fails leaves the
# dependency unsatisfiable and --kill-on-invalid-dep=yes cancels the commit; rerun the
# failed tasks (sbatch --array=<their ids> ...) and submit the commit again: complete
# shards are kept. CONFIG and WAREHOUSE_ETL reach both jobs through the environment
# (sbatch exports the submitter's by default).
set -euo pipefail

n=${1:?usage: submit-partitioned.sh N [sbatch flags...]}
shift
case $n in '' | *[!0-9]* | 0) echo "submit-partitioned.sh: N must be a positive integer" >&2; exit 2 ;; esac
repo=$(cd "$(dirname "$0")/../.." && pwd)

# --parsable prints "<jobid>" or "<jobid>;<cluster>": keep the id.
array=$(sbatch --parsable --chdir="$repo" --array="0-$((n - 1))" "$@" "$repo/deploy/slurm/partition.sbatch")
array=${array%%;*}
commit=$(sbatch --parsable --chdir="$repo" --dependency="afterok:$array" --kill-on-invalid-dep=yes "$@" \
	"$repo/deploy/slurm/commit.sbatch")
commit=${commit%%;*}

echo "$array $commit"
echo "submitted partitions $array (array 0-$((n - 1))) and commit $commit (afterok:$array)" >&2
