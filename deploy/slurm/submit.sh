#!/bin/bash
# submit.sh: submits tonight's build (build.sbatch: build -> verify -> gc) and a training
# job (train.sbatch) that Slurm starts only once the build job exited 0.
#
#   deploy/slurm/submit.sh [train.py flags...]        e.g. --steps 5000
#
# afterok: the training job waits for the build job to finish with exit code 0. Any
# other end (config error, thresholds, sources changed, verify findings, time limit)
# leaves the dependency unsatisfiable, and --kill-on-invalid-dep=yes cancels the
# training job instead of leaving it pending forever (DependencyNeverSatisfied).
# Environment (CONFIG, OUTPUT_ROOT, WAREHOUSE_ETL, WAREHOUSE_CLEAR, ...) reaches both
# jobs: sbatch exports the submitter's environment by default.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)

# --parsable prints "<jobid>" or, on a federation or multi-cluster setup,
# "<jobid>;<cluster>": keep the id.
build=$(sbatch --parsable --chdir="$repo" "$repo/deploy/slurm/build.sbatch")
build=${build%%;*}

train=$(sbatch --parsable --chdir="$repo" \
	--dependency="afterok:$build" --kill-on-invalid-dep=yes \
	"$repo/deploy/slurm/train.sbatch" "$@")
train=${train%%;*}

echo "submitted build job $build and training job $train (afterok:$build)"
echo "  squeue -j $build,$train    sacct -j $build --format=JobID,State,ExitCode"
