#!/usr/bin/env bash
# bench/archive_compaction: full scans of the archive by PyIceberg and DuckDB before and after
# `trackd archive compact`, in one run, appended to bench/RESULTS.md.
#
#   bash bench/archive_compaction.sh [--commits N] [--rows-per-commit N] [--runs N] [--no-record]
#
# A scratch database gets N small batches (default 200 of 200 rows, 50 vehicles, rows of two
# days), each archived by its own `trackd archive --once`: the small files a streaming archive
# with a short commit interval makes (one per day partition per snapshot). Then
# bench/iceberg_scan.py times full scans (medians of --runs), `trackd archive compact` rewrites
# the small files, and the same scans are timed again. Wall times on a shared machine: indicative.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

commits=200
per_commit=200
runs=5
record=1
while (($#)); do
  case "$1" in
    --commits) commits="$2"; shift 2 ;;
    --rows-per-commit) per_commit="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    *) die "unknown argument $1" ;;
  esac
done

bench_build
bench_services
bench_python_env
db="trackd_bench_compact"
wh="$(mktemp -d)"
trap 'rm -rf "$wh"; drop_db "$db"' EXIT
create_db "$db"
dsn="$(dsn_of "$db")"
archive() {
  TRACKD_PG_DSN="$dsn" TRACKD_ARCHIVE_WAREHOUSE="$wh" "$bench_bin/server/trackd" archive "$@" 2>/dev/null
}

say "archiving $commits batches of $per_commit rows, one snapshot each"
t0="$(date +%s)"
for ((b = 1; b <= commits; b++)); do
  psql_at "$db" -c "
    INSERT INTO trackd.vehicle_telemetry_history
    SELECT 'veh-' || lpad((g % 50)::text, 3, '0'),
           date_trunc('day', now()) - (g % 2) * interval '1 day' + $b * interval '1 minute' + g * interval '1 millisecond',
           ST_SetSRID(ST_MakePoint(13.0 + g * 0.0001, 52.0 + $b * 0.0001, 30), 4326),
           (g % 120)::real, (g % 360)::real, 3.5,
           CASE WHEN g % 10 = 0 THEN '{\"driver\":\"d-' || (g % 7) || '\"}' END::jsonb,
           $b, $b % 4, $b * 100000 + g
      FROM generate_series(1, $per_commit) g" >/dev/null
  archive --once >/dev/null || die "trackd archive --once failed"
done
say "archived in $(($(date +%s) - t0)) s"

scan() { "$bench_python" "$bench_repo/bench/iceberg_scan.py" --pg "$dsn" --runs "$runs"; }
before="$(scan)"
t1="$(date +%s%N)"
compact_out="$(archive compact)"
t2="$(date +%s%N)"
after="$(scan)"
compact_s="$(calc "($t2 - $t1) / 1e9" "%.2f")"
get() { sed -n "s/^$2=//p" <<<"$1"; }
[[ "$(get "$before" rows)" == "$(get "$after" rows)" ]] || die "rows differ after compaction"
py_ratio="$(calc "$(get "$before" pyiceberg_s) / $(get "$after" pyiceberg_s)")"
duck_ratio="$(calc "$(get "$before" duckdb_s) / $(get "$after" duckdb_s)")"
echo
echo "rows: $(get "$before" rows) in $commits snapshots; $compact_out (${compact_s} s)"
echo "data files:        $(get "$before" data_files) -> $(get "$after" data_files)"
echo "PyIceberg scan:    $(get "$before" pyiceberg_s) s -> $(get "$after" pyiceberg_s) s  (x$py_ratio)"
echo "DuckDB scan:       $(get "$before" duckdb_s) s -> $(get "$after" duckdb_s) s  (x$duck_ratio)"
if ((record)); then
  {
    echo "- commit: $(git_describe)"
    echo "- machine: $(machine_description)"
    echo "- settings: $commits snapshots of $per_commit rows (two day partitions, one file each per snapshot), full scans (every column) medians of $runs runs, JDBC catalog, local warehouse; command: \`bash bench/archive_compaction.sh --commits $commits --rows-per-commit $per_commit --runs $runs\`"
    echo "- \`trackd archive compact\`: $compact_out; ${compact_s} s"
    echo "- data files: $(get "$before" data_files) before, $(get "$after" data_files) after"
    echo "- PyIceberg \`table.scan().to_arrow()\`: $(get "$before" pyiceberg_s) s before, $(get "$after" pyiceberg_s) s after: **x$py_ratio**"
    echo "- DuckDB \`iceberg_scan\` aggregating every column: $(get "$before" duckdb_s) s before, $(get "$after" duckdb_s) s after: **x$duck_ratio**"
  } | append_results "archive: full scans before and after compaction"
  say "appended to $bench_results"
fi
