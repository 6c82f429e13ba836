#!/usr/bin/env python3
"""Full-scan times of the archive table by PyIceberg and DuckDB, for bench/archive_compaction.sh.

  iceberg_scan.py --pg DSN [--table NS.T] [--runs N]

Prints key=value lines: data_files, rows, pyiceberg_s and duckdb_s (medians of N runs; each a
full scan: PyIceberg table.scan().to_arrow() of every column, DuckDB aggregating every column
but geometry of iceberg_scan(<current metadata>) — DuckDB 1.5 reads the GeoParquet column as
GEOMETRY and refuses it as the table's binary type —, extensions loaded offline from their PyPI
packages).
"""
import argparse
import glob
import importlib
import os
import statistics
import time

from pyiceberg.catalog.sql import SqlCatalog


def duckdb_connection():
    import duckdb

    con = duckdb.connect(config={"autoinstall_known_extensions": False,
                                 "autoload_known_extensions": False})
    for name in ("avro", "iceberg"):
        mod = importlib.import_module("duckdb_extension_" + name)
        path = glob.glob(os.path.join(os.path.dirname(mod.__file__), "extensions", "*",
                                      "*.duckdb_extension"))[0]
        con.execute(f"LOAD '{path}'")
    return con


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pg", required=True)
    p.add_argument("--table", default="trackd.vehicle_positions")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    cat = SqlCatalog("trackd", uri=args.pg.replace("postgresql://", "postgresql+psycopg2://", 1))
    table = cat.load_table(args.table)
    files = len(list(table.scan().plan_files()))
    con = duckdb_connection()
    query = ("SELECT count(*), count(DISTINCT vehicle_id), sum(epoch_us(recorded_at)), "
             "sum(longitude), sum(latitude), sum(altitude), "
             "sum(bbox.xmin), sum(speed_kmh), sum(heading_deg), sum(accuracy_m), "
             "sum(length(attributes)), sum(kafka_partition), sum(kafka_offset), "
             "sum(ingest_batch_id) FROM iceberg_scan(?)")
    py, duck = [], []
    rows = 0
    for _ in range(args.runs):
        t0 = time.perf_counter()
        rows = table.scan().to_arrow().num_rows
        t1 = time.perf_counter()
        n = con.execute(query, [table.metadata_location]).fetchone()[0]
        t2 = time.perf_counter()
        assert n == rows, (n, rows)
        py.append(t1 - t0)
        duck.append(t2 - t1)
    print(f"data_files={files}")
    print(f"rows={rows}")
    print(f"pyiceberg_s={statistics.median(py):.3f}")
    print(f"duckdb_s={statistics.median(duck):.3f}")


if __name__ == "__main__":
    main()
