#!/usr/bin/env bash
# Draws the multi-host training plot from run_training_cluster.sh's results (gnuplot):
#   cluster_<model>.png   per backend and link rate, auto_model's step time against the bucket cap,
#                         with no_sync (the floor) and the per-parameter status quo as dashed lines.
# Usage: benchmarks/plot_cluster.sh <results-dir> <image-dir> [model]
set -euo pipefail
in=${1:?results directory}
img=${2:?image directory}
model=${3:-mlp32x512}
command -v gnuplot > /dev/null || { echo "plot_cluster.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
mkdir -p "$img"
data=$(mktemp)
png=$(mktemp)
trap 'rm -f "$data" "$png"' EXIT

# One block per (rate, backend): "bucket_MiB p50_ms no_sync_ms status_quo_ms", blocks separated by two blank lines.
titles=()
for dir in "$in"/cluster_*; do
  rate=${dir##*/cluster_}
  for b in gloo mpi; do
    f=$dir/training_${b}_$model.csv
    [ -f "$f" ] || continue
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
      { cfg = $(c["config"]); p = $(c["p50_ms"]) }
      cfg == "no_sync" { ns = p } cfg == "status_quo_idist" { sq = p }
      cfg ~ /^auto_model:/ { n++; mb[n] = $(c["bucket_MiB"]); v[n] = p }
      END { for (i = 1; i <= n; i++) print mb[i], v[i], ns, sq; print ""; print "" }' "$f" >> "$data"
    titles+=("$b $rate")
  done
done
[ ${#titles[@]} -gt 0 ] || { echo "plot_cluster.sh: no cluster_*/training_*_$model.csv under $in" >&2; exit 1; }
# A run without the bucket sweep (only ZeroRedundancyOptimizer's configurations, say) has nothing to draw;
# the image in place is kept.
grep -q '^[0-9]' "$data" || { echo "plot_cluster.sh: no auto_model:<MiB> results under $in; $img/cluster_$model.png kept"; exit 0; }
gnuplot <<GP
set terminal pngcairo size 900,560 font ",10" noenhanced
set output "$png"
set title "$model across 2 emulated hosts (tbf-shaped links), 1 rank per host: p50 step time"
set logscale x 2
set xlabel "auto_model bucket cap (MiB)"
set ylabel "p50 step (ms)"
set yrange [0:*]
set grid
set key outside right
titles = "${titles[*]// /:}"
n = words(titles)
plot for [i=0:n-1] "$data" index i using 1:2 with linespoints lw 2 pt 7 lc i+1 title "auto_model ".word(titles, i+1), \
     for [i=0:n-1] "$data" index i using 1:3 with lines dt 3 lc i+1 title "no_sync ".word(titles, i+1), \
     for [i=0:n-1] "$data" index i using 1:4 with lines dt 2 lc i+1 title "status quo ".word(titles, i+1)
GP
# Drawn aside and moved in place, so that a failed gnuplot never leaves an empty image behind.
chmod 644 "$png"
mv "$png" "$img/cluster_$model.png"
echo "plot_cluster.sh: $img/cluster_$model.png"
