#!/usr/bin/env bash
# Regenerate the LETOR oracle fixtures of tests/test_metrics_letor.py with the official
# evaluation scripts, which are not part of this repository (they ship with the LETOR 3.0
# and 4.0 datasets; copies sit in public repositories).
#
#   scripts/letor_oracle.sh DIR [--new-input]
#
# DIR holds Eval-Score-3.0.pl and Eval-Score-4.0.pl (the 4.0 version whose line pattern
# reads the "#docid = ... inc = ... prob = ..." tails of LETOR 4.0 files). Without
# --new-input the committed input (random.test.txt, random.scores.txt) is kept and only the
# oracle outputs are rewritten; with it a new seeded input is drawn first.
#
# Input:  tests/fixtures/letor/random.test.txt    LETOR 4.0 lines, CRLF line ends
#         tests/fixtures/letor/random.scores.txt  one score per line, same line order
# Output: tests/fixtures/letor/eval-3.0.txt        Eval-Score-3.0.pl ... 1 (per query)
#         tests/fixtures/letor/eval-4.0.txt        Eval-Score-4.0.pl ... 1 (per query)
#
# Eval-Score-3.0.pl matches "#docid = <id>" at the very end of a line, and perl on Linux
# keeps the CR of a CRLF line (on Windows the CRLF layer removes it), so it is given the same
# lines without the inc/prob tail and without the CR; labels, qids, docids and line order
# are unchanged.
set -euo pipefail
dir=${1:?usage: scripts/letor_oracle.sh DIR_WITH_OFFICIAL_SCRIPTS [--new-input]}
here=$(cd "$(dirname "$0")/.." && pwd)
fx=$here/tests/fixtures/letor
for s in Eval-Score-3.0.pl Eval-Score-4.0.pl; do
    [[ -f $dir/$s ]] || { echo "letor_oracle.sh: $dir/$s not found" >&2; exit 2; }
done
if [[ ${2:-} == --new-input ]]; then
    python3 - "$fx" <<'PY'
import random, sys
from pathlib import Path
fx = Path(sys.argv[1])
rng = random.Random(20261123)
lines, scores = [], []
for q in range(60):
    qid = 100 + 7 * q if q % 5 else 9000 - q          # qids not sorted in the file
    n = rng.choice([1, 2, 3, 5, 9, 10, 11, 16, 17, 40]) if q < 20 else rng.randint(1, 40)
    p_rel = 0.0 if q % 11 == 3 else rng.choice([0.2, 0.4, 0.7])   # some queries without relevant docs
    for d in range(n):
        label = 0 if rng.random() >= p_rel else rng.choice([1, 2])
        feats = " ".join(f"{i}:{rng.random():.6f}" for i in range(1, 4))
        lines.append(f"{label} qid:{qid} {feats} #docid = Q{qid}-D{d:02d} inc = {rng.random():.4f} prob = {rng.random():.6f}")
        s = round(rng.gauss(0, 1), 1) if q % 3 else float(rng.choice([0, 1, 2]))  # many ties
        scores.append(repr(s) if rng.random() > 0.05 else f"{s:.3e}")
(fx / "random.test.txt").write_bytes(("\r\n".join(lines) + "\r\n").encode())
(fx / "random.scores.txt").write_text("\n".join(scores) + "\n")
PY
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -e 's/ inc = [^ ]* prob = [^ ]*//' -e 's/\r$//' "$fx/random.test.txt" > "$tmp/test3.txt"
perl "$dir/Eval-Score-3.0.pl" "$tmp/test3.txt" "$fx/random.scores.txt" "$fx/eval-3.0.txt" 1
perl "$dir/Eval-Score-4.0.pl" "$fx/random.test.txt" "$fx/random.scores.txt" "$fx/eval-4.0.txt" 1
echo "wrote $fx/eval-3.0.txt and $fx/eval-4.0.txt"
