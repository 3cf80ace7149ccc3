#!/usr/bin/env bash
# Makes the documents the plot examples are drawn from (tests/fixtures/plots/*.json: tHu's fit,
# limit, scan, ranking and post-fit yields; the 1Lbb signal grid's limits, when the public
# likelihood is at ../shared/fixtures/external/1Lbb; the event-level example's distributions when
# its events are made) and draws every kind into docs/plots/ as PNG
# and SVG. Usage: scripts/plot_examples.sh [path/to/histfit]
set -euo pipefail
cd "$(dirname "$0")/.."
H=${1:-target/release/histfit}
W=tests/fixtures/workspace_tHu.json
D=tests/fixtures/plots
P=docs/plots
mkdir -p "$D" "$P"
"$H" fit "$W" --json -o "$D/fit_tHu.json"
"$H" limit "$W" --scan 0:0.8:17 --json -o "$D/limit_tHu.json" 2>/dev/null
"$H" scan "$W" --poi-range -0.4:0.4 --points 17 --json -o "$D/scan_tHu.json"
"$H" ranking "$W" --json -o "$D/ranking_tHu.json"
"$H" yields "$W" --postfit --json -o "$D/yields_postfit_tHu.json"
# The event-level example (its events: python examples/unbinned/make_events.py).
if [ -f examples/unbinned/events.parquet ]; then
    "$H" distributions examples/unbinned/model.json --json -o "$D/distributions_unbinned.json"
fi
LBB=../shared/fixtures/external/1Lbb
if [ -f "$LBB/BkgOnly.json" ]; then
    "$H" limit "$LBB/BkgOnly.json" --patchset "$LBB/patchset.json" --bounds mu_SIG=0:10000 \
        --json -o /tmp/histfit-grid-1Lbb.json
    # The contour needs each point's values and limits only: drop the limit searches' evaluations.
    python3 - <<'PY'
import json
d = json.load(open("/tmp/histfit-grid-1Lbb.json"))
for p in d["points"]:
    p.pop("evaluations", None)
d["workspace"] = "1Lbb/BkgOnly.json"
d["patchset"] = "1Lbb/patchset.json"
json.dump(d, open("tests/fixtures/plots/grid_1Lbb.json", "w"), indent=1)
PY
fi
for pair in brazil:limit_tHu scan:scan_tHu pulls:fit_tHu ranking:ranking_tHu correlation:fit_tHu \
            yields:yields_postfit_tHu contour:grid_1Lbb distributions:distributions_unbinned; do
    kind=${pair%%:*}
    doc=$D/${pair##*:}.json
    extra=()
    case $kind in pulls) extra=(--top 25) ;; correlation) extra=(--top 15) ;; esac
    for ext in png; do
        "$H" plot "$kind" "$doc" -o "$P/$kind.$ext" "${extra[@]}"
    done
done
