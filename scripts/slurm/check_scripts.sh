#!/bin/bash
# Static checks of the Slurm batch scripts (run by CTest as slurm_scripts_syntax):
#   - every scripts/slurm/*.sbatch parses (bash -n);
#   - each has the #SBATCH lines a Perlmutter GPU job needs (-C gpu, -A, -q,
#     -N, --ntasks-per-node=4, --gpus-per-node=4, --cpus-per-task=32, -t);
#   - each loads the modules mrmf links and exports the environment
#     variables multi-rank runs need (SRUN_CPUS_PER_TASK among them: srun no
#     longer inherits --cpus-per-task), and launches through srun --cpu-bind=cores;
#   - every configs/*.yaml or scripts/slurm/*.yaml path it mentions exists
#     (the YAML contents are parsed by the unit test "slurm: ... configs parse").
# Usage: check_scripts.sh [repo root]   (default: two levels above this script)
set -u
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 1
fail=0
err() { echo "FAIL: $*"; fail=1; }

shopt -s nullglob
scripts=(scripts/slurm/*.sbatch)
[ ${#scripts[@]} -ge 3 ] || err "expected at least 3 scripts under scripts/slurm, found ${#scripts[@]}"

for s in "${scripts[@]}"; do
  bash -n "$s" || err "$s: bash -n failed"
  head -1 "$s" | grep -q '^#!/bin/bash' || err "$s: first line must be #!/bin/bash"
  for re in '^#SBATCH -C gpu$' '^#SBATCH -A [A-Za-z0-9_]+$' '^#SBATCH -q regular$' '^#SBATCH -N [0-9]+$' \
            '^#SBATCH --ntasks-per-node=4$' '^#SBATCH --gpus-per-node=4$' '^#SBATCH --cpus-per-task=32$' \
            '^#SBATCH -t [0-9]+:[0-9]{2}:[0-9]{2}$'; do
    grep -Eq -- "$re" "$s" || err "$s: no line matching '$re'"
  done
  # Slurm stops reading #SBATCH at the first command: all of them must come first.
  last_sbatch=$(grep -n '^#SBATCH' "$s" | tail -1 | cut -d: -f1)
  first_cmd=$(grep -nEv '^[[:space:]]*(#|$)' "$s" | head -1 | cut -d: -f1)
  [ -n "$last_sbatch" ] && [ -n "$first_cmd" ] && [ "$last_sbatch" -lt "$first_cmd" ] ||
    err "$s: an #SBATCH line follows a command (Slurm ignores it)"
  grep -Eq '^module load cudatoolkit cudnn nccl cray-hdf5' "$s" || err "$s: missing 'module load cudatoolkit cudnn nccl cray-hdf5'"
  grep -Eq '^export HDF5_USE_FILE_LOCKING=FALSE' "$s" || err "$s: missing export HDF5_USE_FILE_LOCKING=FALSE"
  grep -Eq '^export MPICH_GPU_SUPPORT_ENABLED=0' "$s" || err "$s: missing export MPICH_GPU_SUPPORT_ENABLED=0"
  # Slurm >= 22.05: srun does not inherit --cpus-per-task from sbatch.
  grep -Eq '^export SRUN_CPUS_PER_TASK=' "$s" || err "$s: missing export SRUN_CPUS_PER_TASK (srun would give each rank one core)"
  grep -Eq '^srun --cpu-bind=cores "\$MRMF_BIN" (train|experiment) ' "$s" || err "$s: no 'srun --cpu-bind=cores \$MRMF_BIN train|experiment' line"
  grep -q -- '--out' "$s" || err "$s: the srun line needs --out"
  # libgomp's binding pins the main thread, and so every thread it starts, to one CPU.
  # (OMP_PLACES alone turns binding on; GOMP_CPU_AFFINITY pins the same way.)
  ! grep -Eiq '^[^#]*(OMP_PROC_BIND=["'"'"']?(true|spread|close|master|primary)|OMP_PLACES=|GOMP_CPU_AFFINITY=)' "$s" ||
    err "$s: sets OpenMP thread binding (pins the loader's threads to the main thread's CPU)"
  # Referenced configuration files must exist.
  refs=$(grep -Eo '(configs|scripts/slurm)/[A-Za-z0-9_./-]+\.yaml' "$s" | sort -u)
  [ -n "$refs" ] || err "$s: references no configuration file"
  for c in $refs; do
    [ -f "$c" ] || err "$s: references $c, which does not exist"
  done
done
# Experiment files under scripts/slurm: their base configuration must exist.
for y in scripts/slurm/*.yaml; do
  b=$(sed -n 's/^base:[[:space:]]*\([^[:space:]#]*\).*/\1/p' "$y")
  [ -z "$b" ] || [ -f "$b" ] || [ -f "$(dirname "$y")/$b" ] || err "$y: base $b does not exist"
done
[ $fail -eq 0 ] && echo "slurm scripts: ${#scripts[@]} checked, OK"
exit $fail
