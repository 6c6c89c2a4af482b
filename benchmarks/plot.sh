#!/usr/bin/env bash
# Draws the benchmark plots from the CSV files of run_collectives.sh / run_training.sh (gnuplot,
# Debian package gnuplot-nox):
#   collectives_<backend>_latency.png   p50 latency against message size, idist and the raw call
#   collectives_<backend>_busbw.png     bus bandwidth against message size
#   collectives_<backend>_ratio.png     idist p50 / raw p50 against message size, with the target
#   training_<backend>_buckets.png      auto_model step time against bucket cap, per model, with
#                                       the status quo and no_sync as horizontal lines
# Usage: benchmarks/plot.sh <results-dir> <image-dir>
set -euo pipefail
in=${1:?results directory}
img=${2:?image directory}
command -v gnuplot > /dev/null || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
mkdir -p "$img"

# Value of CSV column <name> in the row whose column 2 is <config> (training files).
value() {  # value <file> <config> <column-name>
  awk -F, -v cfg="$2" -v name="$3" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next }
                                    $2 == cfg { print $c; exit }' "$1"
}

for b in mpi mpi_polled gloo; do
  ar=$in/collectives_${b}_all_reduce.csv
  ag=$in/collectives_${b}_all_gather.csv
  bc=$in/collectives_${b}_broadcast.csv
  [ -f "$ar" ] && [ -f "$ag" ] && [ -f "$bc" ] || continue
  gnuplot <<GP
set datafile separator ","
set terminal pngcairo size 900,560 font ",10"
set logscale x 2
set format x "%.0b%B"
set xlabel "message size (bytes; all\\\\_gather: the gathered output)"
set grid
set key top left
files = "$ar $ag $bc"
names = "all\\\\_reduce all\\\\_gather broadcast"

set output "$img/collectives_${b}_latency.png"
set title "${b/_/ }, 2 ranks: p50 latency (per-iteration max over ranks)"
set logscale y 10
set format y "10^{%L}"
set ylabel "p50 latency (µs)"
plot for [i=1:3] word(files, i) using "size_B":"p50_us" with linespoints lw 2 pt 7 ps 0.6 lc i title word(names, i)." idist", \
     for [i=1:3] word(files, i) using "size_B":"raw_p50_us" with linespoints lw 1 dt 2 pt 6 ps 0.6 lc i title word(names, i)." raw"

set output "$img/collectives_${b}_busbw.png"
set title "${b/_/ }, 2 ranks: bus bandwidth from p50 (nccl-tests factors)"
set format y "%g"
set ylabel "busbw (GB/s, 10^9 B/s)"
set key top left
plot for [i=1:3] word(files, i) using "size_B":"busbw_GBps" with linespoints lw 2 pt 7 ps 0.6 lc i title word(names, i)." idist", \
     for [i=1:3] word(files, i) using "size_B":"raw_busbw_GBps" with linespoints lw 1 dt 2 pt 6 ps 0.6 lc i title word(names, i)." raw"

set output "$img/collectives_${b}_ratio.png"
set title "${b/_/ }, 2 ranks: idist p50 / raw p50 (target: below the dashed line, or within 0.3 µs)"
unset logscale y
set ylabel "idist / raw"
set yrange [0:*]
plot for [i=1:3] word(files, i) using "size_B":"ratio_raw" with linespoints lw 2 pt 7 ps 0.6 lc i title word(names, i)." / blocking raw", \
     $( [[ $b == mpi* ]] && echo 'for [i=1:3] word(files, i) using "size_B":"ratio_raw_nb" with linespoints lw 1 dt 2 pt 6 ps 0.6 lc i title word(names, i)." / MPI\\_I* + MPI\\_Wait",' ) \
     1.03 with lines dt 2 lc "black" title "1.03", 1 with lines lc "gray" notitle
GP
  echo "plot.sh: $img/collectives_${b}_{latency,busbw,ratio}.png"
done

for b in mpi gloo; do
  files=()
  for m in cnn mlp32x512 mlp200x64; do
    [ -f "$in/training_${b}_$m.csv" ] && files+=("$m")
  done
  [ ${#files[@]} -gt 0 ] || continue
  script="set datafile separator \",\"
set terminal pngcairo size $((420 * ${#files[@]})),460 font \",10\"
set output \"$img/training_${b}_buckets.png\"
set multiplot layout 1,${#files[@]} title \"$b, 2 ranks: step time (p50) against auto\\\\_model's bucket cap\"
set logscale x 10
set xrange [0.7:150]
set xlabel \"bucket\\\\_cap\\\\_mb (MiB)\"
set ylabel \"step time p50 (ms)\"
set grid
set key below font \",8\"
set yrange [0:*]"
  for m in "${files[@]}"; do
    f=$in/training_${b}_$m.csv
    sqi=$(value "$f" status_quo_idist p50_ms)
    sqr=$(value "$f" status_quo_raw p50_ms)
    ns=$(value "$f" no_sync p50_ms)
    pts=$(awk -F, 'NR > 1 && $2 ~ /^auto_model:/ { printf "%s,%s\n", $3, $7 }' "$f" | sort -g)
    copy=$(awk -F, 'NR > 1 && $2 ~ /^auto_model_copy:/ { printf "%s,%s\n", $3, $7 }' "$f")
    script+="
\$d$m << EOD
$pts
EOD
\$c$m << EOD
${copy:-NaN,NaN}
EOD
set title \"$m\"
plot \$d$m using 1:2 with linespoints lw 2 pt 7 title \"auto\\\\_model\", \
     \$c$m using 1:2 with points pt 6 ps 1.5 lw 2 title \"auto\\\\_model, gradients copied (no bucket views)\", \
     ${sqi:-NaN} with lines dt 2 lw 2 title \"status quo (idist)\", \
     ${sqr:-NaN} with lines dt 3 lw 2 title \"status quo (raw)\", \
     ${ns:-NaN} with lines dt 4 lw 2 title \"no\\\\_sync (compute only)\""
  done
  script+="
unset multiplot"
  gnuplot <<< "$script"
  echo "plot.sh: $img/training_${b}_buckets.png"
done
