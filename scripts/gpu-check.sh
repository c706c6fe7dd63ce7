#!/usr/bin/env bash
# The GPU check: on a fresh GPU machine, install the suite with the README's command and measure
# every GPU path of it in one go, each part under its own time limit (at most 9 min 30 s in all).
#
#   bash scripts/gpu-check.sh [--out DIR] [--dry-run]
#
# Parts, in order (limit in seconds):
#   facts       (15)  nvidia-smi, driver, torch / CUDA / cuDNN versions, CPU, Python
#   install     (60)  a venv over the machine's Python (--system-site-packages: its CUDA torch stays)
#                     and the README's install command with the CPU pin dropped, `pip install -e .`;
#                     a machine without network installs from the wheels in .whl/ (PIP_NO_INDEX,
#                     PIP_FIND_LINKS), which scripts/gpu-wheels.sh downloads beforehand
#   cuda_tests  (110) python -m pytest -m cuda tests/gpu: every loss on CUDA against the CPU in float64,
#                     padding invariance, two runs bit-identical, train.amp, resume after a kill, the
#                     refit on train + validation, the soft rank's and soft sort's host round trip (PAV)
#   perf        (165) ltr-bench perf all --device cuda: losses (NeuralNDCG B=16 L=1000 <= 5 ms), the
#                     scaling grid L = 125..3,375, the trainer on an MSLR-sized fold (one RankNet epoch
#                     <= 2 s), peak GPU memory; nvidia-smi sampled every 0.5 s for the utilisation
#   xgboost     (60)  ltr-bench perf gbdt-devices: XGBoost on CUDA vs CPU on one prepared fold
#   plan        (60)  ltr-bench plan pirank_table1 --configfile config/paper.yaml --device cuda: the
#                     paper plan calibrated on this GPU for one table
#   study       (100) snakemake unified_table --config device=cuda on the default profile: equal-budget
#                     tuning end to end on the GPU (each method's configurations trained and chosen by
#                     its tune job, the chosen ones on every fold by its tuned_runs job, statistics, the table)
# A part that runs past its limit is stopped (SIGINT, then SIGKILL 10 s later) and the next one
# starts. Everything lands in DIR (default: $OUT when set, else reports/perf/gpu-check): summary.md
# (each part's status, seconds and GPU utilisation), gpu.md (perf all's device record and
# targets), gpu-check.log (everything printed) and gpu-check.tar.gz (every file the parts wrote).
#
# --dry-run (any machine, no GPU needed; tests/test_gpu_check.py runs it): every part is resolved
# (its commands, options, config and test files are checked without measuring; only a hang is
# stopped, at 600 s) and each part that needs CUDA prints a line saying it was skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SELF=$ROOT/scripts/gpu-check.sh
OUT_DIR=${OUT:-reports/perf/gpu-check}
DRY=0
STEP=""
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --out) OUT_DIR=$2; shift ;;
    --step) STEP=$2; shift ;;  # internal: run one part (under `timeout`)
    -h|--help) sed -n "2,36p" "$SELF"; exit 0 ;;
    *) echo "gpu-check: unknown option $1 (--out DIR, --dry-run)" >&2; exit 2 ;;
  esac
  shift
done

PARTS=(facts install cuda_tests perf xgboost plan study)
declare -A LIMIT=([facts]=15 [install]=60 [cuda_tests]=110 [perf]=165 [xgboost]=60 [plan]=60 [study]=100)
declare -A NEEDS_CUDA=([facts]=0 [install]=0 [cuda_tests]=1 [perf]=1 [xgboost]=1 [plan]=1 [study]=1)
STUDY_TARGET=unified_table
PLAN_TABLE=pirank_table1
VENV=${GPU_CHECK_VENV:-/tmp/ltr-bench-gpu-venv}

# ---------------------------------------------------------------- the parts (run: measure; resolve: check only)
run_facts() {
  if command -v nvidia-smi >/dev/null; then nvidia-smi; else echo "nvidia-smi: not found"; fi
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>/dev/null || true
  python3 -c 'import sys, torch; print("python", sys.version.split()[0]); print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None, "GPU visible:", torch.cuda.is_available())'
  lscpu 2>/dev/null | grep -E "^(Model name|CPU\(s\))" || true
}
resolve_facts() { run_facts; }

run_install() {
  python3 -m venv --system-site-packages "$VENV" && . "$VENV/bin/activate" || return 1
  if [ -d "$ROOT/.whl" ]; then
    export PIP_NO_INDEX=1 PIP_FIND_LINKS="$ROOT/.whl"
    echo "installing offline from .whl/ ($(ls "$ROOT/.whl" | wc -l) wheels)"
  fi
  pip install -e . && ltr-bench --help >/dev/null && echo "installed: $(command -v ltr-bench)"
}
resolve_install() {
  test -f pyproject.toml || { echo "no pyproject.toml"; return 1; }
  python3 -c 'import bench.cli' || return 1
  echo "would run: python3 -m venv --system-site-packages $VENV && pip install -e .$( [ -d .whl ] && echo " (offline, from .whl/)")"
}

run_cuda_tests() { python -m pytest -m cuda tests/gpu -q -rfE -p no:cacheprovider --junitxml="$WORK/cuda-tests.xml"; }
resolve_cuda_tests() { python -m pytest -m cuda tests/gpu -q --collect-only -p no:cacheprovider | tail -1; }

run_perf() { ltr-bench perf all --device cuda --out-dir "$WORK/perf" --figure-dir "$WORK/perf"; }
resolve_perf() {
  python - <<'EOF'
from bench.perf.all_suites import DEVICE_SUITES, GPU_PLANS
from bench.perf.suites import suite_namespace
for name in DEVICE_SUITES:
    suite_namespace(name, [*GPU_PLANS[name], "--device", "cuda", "--out", "/dev/null"])
print("perf all --device cuda: the plans of", ", ".join(DEVICE_SUITES), "parse")
EOF
}

run_xgboost() { ltr-bench perf gbdt-devices --device cuda --out "$WORK/gbdt-devices.md"; }
resolve_xgboost() {
  ltr-bench perf gbdt-devices --help >/dev/null || return 1
  python -c 'from bench.perf.gbdt_devices import xgboost_cuda_build as b; v, c = b(); print(f"XGBoost {v}, built with CUDA: {c}")'
}

run_plan() {
  ltr-bench plan "$PLAN_TABLE" --configfile config/paper.yaml --device cuda \
    --calibration-dir "$WORK/calibration" --json "$WORK/plan-$PLAN_TABLE.json"
}
resolve_plan() { ltr-bench plan "$PLAN_TABLE" --configfile config/paper.yaml --no-calibrate | tail -3; }

# in this checkout (the study's results/ and reports/ are its own), every core, the GPU shared by the jobs
run_study() {
  snakemake --cores "$(nproc)" "$STUDY_TARGET" --config device=cuda && \
    cp "reports/tables/$STUDY_TARGET.md" "$WORK/$STUDY_TARGET.md" && \
    python -c 'import json, pathlib; runs = [json.loads(p.read_text()) for p in pathlib.Path("results/runs/unified").glob("*/*/*/seed*/run.json")]; print(len(runs), "unified runs; devices", sorted({str(r.get("device")) for r in runs}))' \
    | tee "$WORK/$STUDY_TARGET-runs.txt"
}
resolve_study() { snakemake -n "$STUDY_TARGET" --config device=cuda --quiet rules | grep -E "^(tune|tuned_runs|train|total) "; }

# ---------------------------------------------------------------- one part, under its limit
if [ -n "$STEP" ]; then
  WORK=${GPU_CHECK_WORK:?}
  [ -f "$VENV/bin/activate" ] && [ "$STEP" != install ] && . "$VENV/bin/activate"
  if [ "$DRY" = 1 ]; then "resolve_$STEP"; else "run_$STEP"; fi
  exit $?
fi

# ---------------------------------------------------------------- all parts
# refused before anything is created: a CPU machine keeps no empty work or output folder
has_cuda=$(python3 -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
if [ "$DRY" = 0 ] && [ "$has_cuda" != 1 ]; then
  echo "gpu-check: no CUDA device here (torch.cuda.is_available() is False); on a CPU machine use --dry-run" >&2
  exit 2
fi
WORK=$(mktemp -d -t gpu-check.XXXXXX)  # $TMPDIR, else /tmp
DONE=0
leave_work() {  # on exit: removed once copied to OUT_DIR; an interrupted run's partial output is kept and named
  if [ "$DONE" = 1 ] || rmdir "$WORK" 2>/dev/null; then
    rm -rf "$WORK"
  else
    echo "gpu-check: stopped before the end; what the parts wrote so far is in $WORK" >&2
  fi
}
trap leave_work EXIT
export GPU_CHECK_WORK=$WORK GPU_CHECK_VENV=$VENV PYTHONUNBUFFERED=1
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
LOG=$WORK/gpu-check.log
started=$SECONDS
{
  echo "# GPU check"
  echo
  echo "- $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$( [ -n "$(git status --porcelain 2>/dev/null)" ] && echo " (uncommitted changes)")"
  echo "- mode: $( [ "$DRY" = 1 ] && echo "dry run (resolve every part, measure nothing)" || echo "measure")"
  echo
  echo "| part | status | seconds | limit | GPU utilisation (mean / max %) |"
  echo "|---|---|---|---|---|"
} > "$WORK/summary.md"
failed=0
for part in "${PARTS[@]}"; do
  echo "== gpu-check: $part (limit ${LIMIT[$part]} s)" | tee -a "$LOG"
  t0=$SECONDS
  util="-"
  if [ "$DRY" = 1 ] && [ "${NEEDS_CUDA[$part]}" = 1 ]; then
    echo "$part: skipped, needs CUDA (dry run); resolving its commands only" | tee -a "$LOG"
  fi
  sampler=""
  if [ "$DRY" = 0 ] && command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits -lms 500 \
      > "$WORK/nvidia-smi-$part.csv" 2>/dev/null &
    sampler=$!
  fi
  limit=${LIMIT[$part]}
  [ "$DRY" = 1 ] && limit=600  # resolving measures nothing: only a hang is stopped (a loaded CI box is slow)
  timeout --signal=INT --kill-after=10 "$limit" bash "$SELF" --step "$part" $( [ "$DRY" = 1 ] && echo --dry-run ) \
    >> "$LOG" 2>&1
  rc=$?
  if [ -n "$sampler" ]; then
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
    util=$(awk -F', *' 'NF >= 1 && $1 ~ /^[0-9]+$/ {s += $1; n++; if ($1 > m) m = $1} END {if (n) printf "%.0f / %d (%d samples)", s / n, m, n; else print "-"}' "$WORK/nvidia-smi-$part.csv")
  fi
  case $rc in
    0) status=ok ;;
    124|137) status="stopped at its limit"; failed=1 ;;
    *) status="failed (exit $rc)"; failed=1 ;;
  esac
  [ "$DRY" = 1 ] && [ "$rc" = 0 ] && status=$( [ "${NEEDS_CUDA[$part]}" = 1 ] && echo "resolved; skipped (needs CUDA)" || echo "resolved" )
  echo "| $part | $status | $((SECONDS - t0)) | ${LIMIT[$part]} | $util |" >> "$WORK/summary.md"
  echo "$part: $status in $((SECONDS - t0)) s" | tee -a "$LOG"
done
echo "" >> "$WORK/summary.md"
echo "Total: $((SECONDS - started)) s. Files: every part's output in gpu-check.tar.gz; the log in gpu-check.log." >> "$WORK/summary.md"
[ -f "$WORK/perf/gpu.md" ] && cp "$WORK/perf/gpu.md" "$OUT_DIR/gpu.md"
cp "$WORK/summary.md" "$OUT_DIR/summary.md"
cp "$LOG" "$OUT_DIR/gpu-check.log"
tar -czf "$OUT_DIR/gpu-check.tar.gz" -C "$WORK" --exclude=calibration/*.lock .
cat "$WORK/summary.md"
echo "gpu-check: wrote $OUT_DIR/{summary.md,gpu-check.log,gpu-check.tar.gz}$( [ -f "$OUT_DIR/gpu.md" ] && echo ",gpu.md")"
DONE=1
exit $failed
