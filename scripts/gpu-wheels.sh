#!/usr/bin/env bash
# Wheels for a GPU machine without network: everything `pip install -e .` needs that the machine's
# image lacks, for its Python and platform, in .whl/ (git-ignored), where scripts/gpu-check.sh's
# install part finds them (PIP_NO_INDEX, PIP_FIND_LINKS).
#
#   bash scripts/gpu-wheels.sh [--have FILE] [--python 3.12] [--max-mib 56]
#
# The project's dependencies are resolved here (pip's resolver, --dry-run, this machine's Python:
# the same names a 3.12 install resolves unless a marker differs), then each one the target does
# not have is downloaded as a binary wheel for CPython --python on manylinux x86_64. The target's
# packages: --have FILE, one distribution name per line (`pip list --format=freeze` output works;
# versions are ignored), default scripts/gpu-image-packages.txt (the lent GPU machines' image).
# torch and the CUDA libraries are never downloaded: the GPU machine's own CUDA build stays.
# The wheels must fit what travels to that machine: the script fails above --max-mib in all.
set -euo pipefail
cd "$(dirname "$0")/.."
HAVE=scripts/gpu-image-packages.txt
PY=3.12
MAX_MIB=56
while [ $# -gt 0 ]; do
  case $1 in
    --have) HAVE=$2; shift ;;
    --python) PY=$2; shift ;;
    --max-mib) MAX_MIB=$2; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "gpu-wheels: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
test -f "$HAVE" || { echo "gpu-wheels: --have $HAVE: no such file" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

python3 -m pip install --quiet --dry-run --ignore-installed --report "$tmp/report.json" -e . setuptools wheel
python3 - "$tmp/report.json" "$HAVE" > "$tmp/wanted.txt" <<'EOF'
import json, re, sys

def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()

report, have_file = sys.argv[1:]
have = {norm(re.split(r"[=<>~! ]", line.strip(), maxsplit=1)[0]) for line in open(have_file)
        if line.strip() and not line.startswith("#")}
for item in json.load(open(report))["install"]:
    meta = item["metadata"]
    name = norm(meta["name"])
    if name == "ltr-bench" or name in have or name.startswith(("torch", "nvidia-", "triton")):
        continue
    print(f"{meta['name']}=={meta['version']}")
EOF
echo "gpu-wheels: $(wc -l < "$tmp/wanted.txt") distributions the image lacks: $(tr '\n' ' ' < "$tmp/wanted.txt")"
mkdir -p .whl
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
while read -r spec; do
  # a distribution published as source only is pure Python here: built into a py3-none-any wheel
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
    "${platforms[@]}" -d .whl "$spec" 2>/dev/null || python3 -m pip wheel --quiet --no-deps -w .whl "$spec"
done < "$tmp/wanted.txt"
mib=$(du -sm .whl | cut -f1)
ls -S -l .whl | awk 'NR > 1 {printf "  %6.1f MiB  %s\n", $5 / 1048576, $9}'
echo "gpu-wheels: .whl/ holds $(ls .whl | wc -l) wheels, $mib MiB"
if [ "$mib" -gt "$MAX_MIB" ]; then
  echo "gpu-wheels: $mib MiB is over --max-mib $MAX_MIB (what travels to a lent GPU machine is capped)" >&2
  exit 1
fi
