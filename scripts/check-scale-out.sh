#!/usr/bin/env bash
# Tries docs/scale-out.md as far as one machine allows: parses the Kubernetes manifest's YAML
# (python3-yaml) and checks it is an Indexed Job whose --shard-count equals its completions;
# runs the Slurm script once per array task with the environment Slurm sets (srun stood in by a
# shell function); runs the GNU parallel line as written. Each time the shards' --json reports
# must list every input of a generated folder exactly once.
# Usage: scripts/check-scale-out.sh [VIPSLOAD_BINARY]   (default: builds and uses .build/debug/vipsload)
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
doc=docs/scale-out.md
binary=${1:-}
if [ -z "$binary" ]; then
  swift build --product vipsload 2>&1 | { grep -v "prohibited flag(s): -pthread" || true; } | tail -n 1
  binary=$(swift build --show-bin-path)/vipsload
fi
binary=$(realpath "$binary")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/photos/trip"
ln -s "$binary" "$work/bin/vipsload"
export PATH="$work/bin:$PATH"
for i in $(seq 1 30); do
  sub=""; [ $((i % 4)) -eq 0 ] && sub=trip/
  vips gaussnoise "$work/photos/${sub}p$i.jpg" 64 48
done
inputs=$(find "$work/photos" -name '*.jpg' | wc -l)

# The inputs a set of reports wrote: each exactly once, all of them.
check_reports() {
  local what=$1; shift
  local written unique
  written=$(cat "$@" | grep -c '"status": "written"' || true)
  unique=$(cat "$@" | grep '"status": "written"' | sed 's/.*"input": "\([^"]*\)".*/\1/' | sort -u | wc -l)
  if [ "$written" -ne "$inputs" ] || [ "$unique" -ne "$inputs" ]; then
    echo "check-scale-out: $what: $written written, $unique distinct, of $inputs inputs" >&2
    exit 1
  fi
  echo "check-scale-out: $what: $inputs inputs, each written by exactly one shard"
}

block() { awk -v lang="$1" '$0 == "```" lang {on=1; next} /^```/ {on=0} on' "$doc"; }

# Kubernetes: the manifest parses, is an Indexed Job, and its shard count matches completions.
block yaml > "$work/job.yaml"
if python3 -c 'import yaml' 2>/dev/null; then
  python3 - "$work/job.yaml" <<'EOF'
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job", "not a batch/v1 Job"
spec = job["spec"]
assert spec["completionMode"] == "Indexed", "not an Indexed Job"
container = spec["template"]["spec"]["containers"][0]
args = container["command"] + container["args"]
count = int(args[args.index("--shard-count") + 1])
assert count == spec["completions"], f"--shard-count {count} != completions {spec['completions']}"
assert spec["template"]["spec"]["restartPolicy"] in ("Never", "OnFailure")
mounts = {m["name"] for m in container["volumeMounts"]}
volumes = {v["name"] for v in spec["template"]["spec"]["volumes"]}
assert mounts <= volumes, f"mounts {mounts - volumes} have no volume"
EOF
  python3 - "$work/job.yaml" > "$work/job.args" <<'EOF'
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
c = job["spec"]["template"]["spec"]["containers"][0]
print("\n".join(c["command"][1:] + c["args"]))
EOF
  completions=$(python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["spec"]["completions"])' "$work/job.yaml")
  mapfile -t args < "$work/job.args"
  # The pods' command, with the volumes at folders of this machine.
  for ((index = 0; index < completions; index++)); do
    mapped=()
    for a in "${args[@]}"; do mapped+=("${a//\/data/$work/k8s-data}"); done
    mapped=("${mapped[@]//\/cache/$work/k8s-cache}")
    mkdir -p "$work/k8s-data" && [ -e "$work/k8s-data/photos" ] || ln -s "$work/photos" "$work/k8s-data/photos"
    JOB_COMPLETION_INDEX=$index vipsload "${mapped[@]}" > "$work/k8s-$index.jsonl"
  done
  check_reports "Kubernetes Indexed Job ($completions pods)" "$work"/k8s-*.jsonl
else
  echo "check-scale-out: python3-yaml is not installed; the manifest was not parsed" >&2
fi

# Slurm: the batch script, once per array task, with the variables Slurm sets.
block bash > "$work/thumbnails.sbatch"
range=$(sed -n 's/^#SBATCH --array=\([0-9]*-[0-9]*\).*/\1/p' "$work/thumbnails.sbatch")
first=${range%-*}; last=${range#*-}
sed -e "s|/shared/photos|$work/photos|g" -e "s|/shared/thumbnails|$work/slurm-out|g" "$work/thumbnails.sbatch" > "$work/task.sh"
for ((task = first; task <= last; task++)); do
  SLURM_ARRAY_TASK_ID=$task SLURM_ARRAY_TASK_MIN=$first SLURM_ARRAY_TASK_MAX=$last \
    SLURM_ARRAY_TASK_COUNT=$((last - first + 1)) SLURM_CPUS_PER_TASK=1 \
    bash -c 'srun() { "$@"; }; export -f srun; source "$0"' "$work/task.sh" > "$work/slurm-$task.jsonl"
done
check_reports "Slurm array $range" "$work"/slurm-*.jsonl

# GNU parallel: the line as written, in a folder holding photos/.
if command -v parallel >/dev/null && parallel --version 2>/dev/null | grep -q "GNU parallel"; then
  line=$(block sh | grep '^parallel ')
  (cd "$work" && eval "$line")
  check_reports "GNU parallel" "$work/report.jsonl"
else
  echo "check-scale-out: GNU parallel is not installed (apt-get install parallel); its line was not run" >&2
fi
