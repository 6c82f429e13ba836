#!/usr/bin/env bash
# bench/archive: the Iceberg archive's rows/s beside PostgreSQL's own `COPY ... TO` of the same
# rows in the same run, appended to bench/RESULTS.md.
#
#   bash bench/archive.sh [--rows N] [--runs N] [--no-record]
#
# A scratch database gets N history rows (1,000 vehicles, batches of 20,000 rows as the ingest
# writes them, 10% with attributes) through the history table, so the batch log is filled as in
# production. Then, alternating, each run measures:
#   copy_plain   COPY (SELECT <the archive's columns> FROM history) TO STDOUT (FORMAT binary)
#   copy_sorted  the same with the archive's ORDER BY (day, vehicle, time): what the archive reads
#   archive      `trackd archive --once` into an empty table: stamp, read, Parquet (zstd), manifests,
#                commit (target_file_bytes default, 128 MB)
# Wall times, medians over the runs; the machine is shared, so figures are indicative.
set -euo pipefail
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rows=1000000
runs=3
record=1
while (($#)); do
  case "$1" in
    --rows) rows="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --no-record) record=0; shift ;;
    *) die "unknown argument $1" ;;
  esac
done

bench_build
bench_services
db="trackd_bench_archive"
wh="$(mktemp -d)"
trap 'rm -rf "$wh"; drop_db "$db"' EXIT
create_db "$db"
dsn="$(dsn_of "$db")"

say "loading $rows history rows"
psql_at "$db" -c "
  INSERT INTO trackd.vehicle_telemetry_history
  SELECT 'veh-' || lpad((g % 1000)::text, 5, '0'),
         now() - interval '20 hours' + (g * interval '1 second') * (72000.0 / $rows),
         ST_SetSRID(ST_MakePoint(13.0 + (g % 1000) * 0.001 + g * 1e-9, 52.0 + (g % 997) * 0.001, (g % 50)::float8), 4326),
         (g % 120)::real, (g % 360)::real, 3.5, CASE WHEN g % 10 = 0 THEN '{\"driver\":\"d-' || (g % 77) || '\",\"fuel\":0.5}' END::jsonb,
         g / 20000, g % 4, g / 4
    FROM generate_series(1, $rows) g" >/dev/null
psql_at "$db" -c "VACUUM ANALYZE trackd.vehicle_telemetry_history" >/dev/null
batches="$(psql_at "$db" -c "SELECT count(*) FROM trackd.ingest_batches")"

cols="h.vehicle_id, h.recorded_at, ST_X(h.geom), ST_Y(h.geom), coalesce(ST_Z(h.geom), 0), h.speed_kmh, h.heading_deg, h.accuracy_m, h.attributes::text, h.kafka_partition, h.kafka_offset, h.ingest_batch_id"
order="ORDER BY date_trunc('day', h.recorded_at AT TIME ZONE 'UTC'), h.vehicle_id COLLATE \"C\", h.recorded_at, h.kafka_partition, h.kafka_offset"

now_ns() { date +%s%N; }
secs() { calc "($2 - $1) / 1e9" "%.3f"; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

plain=() sorted=() archive=() bytes=0 files=0
for ((i = 1; i <= runs; i++)); do
  t0="$(now_ns)"
  psql_at "$db" -c "COPY (SELECT $cols FROM trackd.vehicle_telemetry_history h) TO STDOUT (FORMAT binary)" >/dev/null
  t1="$(now_ns)"
  psql_at "$db" -c "COPY (SELECT $cols FROM trackd.vehicle_telemetry_history h $order) TO STDOUT (FORMAT binary)" >/dev/null
  t2="$(now_ns)"
  # An empty table and unstamped batches each run.
  rm -rf "${wh:?}"/*
  psql_at "$db" -c "DELETE FROM iceberg_tables; DELETE FROM iceberg_namespace_properties; DELETE FROM trackd.archive_progress; UPDATE trackd.ingest_batches SET archive_seq = NULL" >/dev/null
  t3="$(now_ns)"
  out="$(TRACKD_PG_DSN="$dsn" TRACKD_ARCHIVE_WAREHOUSE="$wh" "$bench_bin/server/trackd" archive --once 2>/dev/null)"
  t4="$(now_ns)"
  plain+=("$(secs "$t0" "$t1")")
  sorted+=("$(secs "$t1" "$t2")")
  archive+=("$(secs "$t3" "$t4")")
  bytes="$(sed -n 's/.*(\([0-9]*\) files, \([0-9]*\) bytes).*/\2/p' <<<"$out")"
  files="$(sed -n 's/.*(\([0-9]*\) files, \([0-9]*\) bytes).*/\1/p' <<<"$out")"
  archived="$(sed -n 's/^archived \([0-9]*\) rows.*/\1/p' <<<"$out")"
  [[ "$archived" == "$rows" ]] || die "archived ${archived:-?} rows, expected $rows: $out"
  say "run $i: copy ${plain[-1]} s, copy sorted ${sorted[-1]} s, archive ${archive[-1]} s ($files files, $bytes bytes)"
done

m_plain="$(printf '%s\n' "${plain[@]}" | median)"
m_sorted="$(printf '%s\n' "${sorted[@]}" | median)"
m_archive="$(printf '%s\n' "${archive[@]}" | median)"
r_plain="$(calc "$rows / $m_plain" "%.0f")"
r_sorted="$(calc "$rows / $m_sorted" "%.0f")"
r_archive="$(calc "$rows / $m_archive" "%.0f")"
heap="$(psql_at "$db" -c "SELECT pg_total_relation_size('trackd.vehicle_telemetry_history') + coalesce((SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits WHERE inhparent = 'trackd.vehicle_telemetry_history'::regclass), 0)")"
echo
echo "rows: $rows in $batches batches; medians of $runs runs"
echo "COPY TO (binary):              $m_plain s  $r_plain rows/s"
echo "COPY TO, archive's order:      $m_sorted s  $r_sorted rows/s"
echo "trackd archive --once:         $m_archive s  $r_archive rows/s  ($files Parquet files, $bytes bytes, $(calc "$bytes / $rows" "%.1f") bytes/row; PostGIS history incl. indexes $heap bytes)"
if ((record)); then
  {
    echo "- commit: $(git_describe)"
    echo "- machine: $(machine_description)"
    echo "- settings: $rows rows (1,000 vehicles, $batches batches, 10% with attributes), $runs runs, medians of wall time, client and server on the same 2 cores"
    echo "- COPY (SELECT the archive's 12 columns) TO STDOUT (FORMAT binary) into /dev/null: $m_plain s, **$r_plain rows/s**"
    echo "- the same in the archive's order (day, vehicle_id, recorded_at): $m_sorted s, **$r_sorted rows/s**"
    echo "- \`trackd archive --once\` (stamp, sorted binary COPY, Parquet zstd with field ids and GeoParquet metadata, Avro manifests, JDBC-catalog commit): $m_archive s, **$r_archive rows/s**; $files files, $bytes bytes ($(calc "$bytes / $rows" "%.1f") bytes/row; PostGIS history with indexes: $heap bytes)"
    echo "- runs (copy / sorted / archive, s): $(paste -d/ <(printf '%s\n' "${plain[@]}") <(printf '%s\n' "${sorted[@]}") <(printf '%s\n' "${archive[@]}") | paste -sd' ')"
  } | append_results "archive: trackd archive --once vs COPY TO"
  say "appended to $bench_results"
fi
