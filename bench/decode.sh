#!/usr/bin/env bash
# bench/decode: decode + validate alone, messages/s on one core (Google Benchmark,
# bench/decode_bench.cpp), appended to bench/RESULTS.md.
#
#   bash bench/decode.sh [--no-record] [Google Benchmark options, e.g. --benchmark_min_time=2]
#
# No services needed. The realistic mix is corpus 0 (the fleet's stream: 1% bad, 20,000
# vehicles); corpora 4 and 5 are the same stream as Protobuf, plain and Confluent-framed.
# BM_Decode is decode alone, so validate's share is the difference.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

record=1
args=()
for a in "$@"; do
  if [[ "$a" == --no-record ]]; then record=0; else args+=("$a"); fi
done

bench_build
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
"$bench_bin/bench/trackd-bench-decode" --benchmark_min_time=2 --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true "${args[@]}" | tee "$out"

# "name mean items/s" for the median rows.
# Google Benchmark prints items_per_second=881.457k/s: turned into a plain number.
summary="$(awk '/_median/ { for (i = 1; i <= NF; i++) if ($i ~ /^items_per_second=/) {
    split($i, a, "="); v = a[2]; sub(/\/s$/, "", v); m = 1;
    if (v ~ /k$/) m = 1e3; else if (v ~ /M$/) m = 1e6; else if (v ~ /G$/) m = 1e9;
    sub(/[kMG]$/, "", v); printf "%s %.0f\n", $1, v * m } }' "$out")"
mix="$(awk '$1 ~ /^BM_DecodeValidate\/corpus:0_median/ { print $2 }' <<<"$summary")"
pb="$(awk '$1 ~ /^BM_DecodeValidate\/corpus:4_median/ { print $2 }' <<<"$summary")"
pbf="$(awk '$1 ~ /^BM_DecodeValidate\/corpus:5_median/ { print $2 }' <<<"$summary")"
ratio="$(awk -v a="$pb" -v b="$mix" 'BEGIN { if (b > 0) printf "%.2f", a / b }')"
std="$(awk '$1 ~ /^BM_DecodeValidateStdMap\/corpus:0_median/ { print $2 }' <<<"$summary")"
std_ratio="$(awk -v a="$mix" -v b="$std" 'BEGIN { if (b > 0) printf "%.2f", a / b }')"
echo
echo "decode + validate on the realistic mix: $mix messages/s on one core (CPU time)"
echo "with the latest positions in std::unordered_map instead: $std messages/s (core::StringTable / std::unordered_map = ${std_ratio}, same run)"
echo "the same mix as Protobuf: $pb plain, $pbf framed messages/s (${ratio}x JSON, same run)"
if ((record)); then
  {
    echo "- commit: $(git_describe)"
    echo "- machine: $(nproc) cores ($(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)), load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- settings: Google Benchmark, --benchmark_min_time=2, 3 repetitions, medians of items/s by CPU time; one thread ${args[*]:-}"
    echo "- **decode + validate, realistic mix (fleet, 1% bad): $mix messages/s per core**"
    echo "- **the same mix as Protobuf (trackd.v1.Position): $pb plain, $pbf Confluent-framed messages/s per core (${ratio}x JSON)**"
    echo "- the latest positions in core::StringTable / in std::unordered_map (as before): ${std_ratio} on the realistic mix"
    echo
    echo "| benchmark | corpus | messages/s (median) |"
    echo "|---|---|---:|"
    awk '{ split($1, a, "/"); c = a[2]; sub(/_median/, "", c);
      names["corpus:0"] = "fleet mix"; names["corpus:1"] = "fleet, valid only";
      names["corpus:2"] = "fixtures valid"; names["corpus:3"] = "fixtures rejected";
      names["corpus:4"] = "fleet mix, Protobuf"; names["corpus:5"] = "fleet mix, Protobuf framed";
      printf "| %s | %s | %s |\n", a[1], names[c], $2 }' <<<"$summary"
  } | append_results "bench/decode.sh"
  say "appended to bench/RESULTS.md"
fi
