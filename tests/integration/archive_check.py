#!/usr/bin/env python3
"""Reads trackd's Iceberg archive back with independent readers, for archive_test.cpp.

Prints `key=value` lines that the C++ test asserts on; exits non-zero only when a reader fails.

  compare  PostGIS history vs. PyIceberg (SqlCatalog on the same PostgreSQL): the exact set of
           (vehicle_id, recorded_at, longitude, latitude), duplicates by Kafka coordinates, a
           filtered scan that exercises the manifests' column bounds, and DuckDB's iceberg_scan
           count on the current metadata file (extensions loaded from their PyPI packages).
  avro     fastavro reads every manifest and manifest list under the table's metadata/ and
           checks that every record field carries a field-id.
  table    the current metadata: snapshot count, manifests of the current snapshot.
  touch    commits a property change with PyIceberg (another writer of the same table).
  files    every file the current metadata references (metadata log, each snapshot's manifest
           list, manifests and data files, statistics files) and how many are missing; the
           statistics entries whose snapshot is gone; the current snapshot id, metadata location
           and progress, to compare with trackd.archive_progress.
  stats    names a statistics file and a partition statistics file for the current snapshot in
           the metadata, as another engine would (their paths: statistics_path=,
           partition_statistics_path=).
  ls       every file under --dir (`file=<uri>` lines, then `files=N`, `parquet=N`, `avro=N`).
  put      writes a small file at --uri that nothing references (an orphan).
  exists   whether a file is at --uri (exists=1 or 0).
  uploads  the multipart uploads begun under an s3:// --dir and neither completed nor aborted
           (`upload=<key>` lines, then `uploads=N`), which no listing of objects shows.

With --s3 ENDPOINT, s3:// locations are read from that S3 server (PyIceberg through pyarrow's
S3 filesystem, DuckDB through its httpfs extension, path-style, the tests' key pair).

  serve --socket PATH  imports the readers once and answers each request on the Unix socket in
           a process forked from it (scripts/test.sh starts one for the whole suite, and the tests
           find it through TEST_ARCHIVE_CHECK_SOCKET): most of a check's CPU was Python importing
           PyIceberg, SQLAlchemy and DuckDB. A request is one line, the arguments as a shell
           would split them; the answer is the command's output, then a NUL byte and its exit
           status.
"""
import argparse
import glob
import importlib
import json
import os
import sys


ARGS = None

# pyarrow's S3 filesystem (the AWS SDK) asks the EC2 instance metadata service for a region and
# credentials unless told: the tests give both, and never reach for anything off loopback.
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"


def local(uri):
    """A file URI as a path: file:///x, file:/x (as Hadoop writes it) or /x."""
    if uri.startswith("file://"):
        return uri[len("file://"):]
    if uri.startswith("file:"):
        return uri[len("file:"):]
    return uri


# The key pair the tests give trackd and the REST catalog server (moto accepts any).
S3_KEY_ID = "trackd-test"
S3_SECRET = "trackd-test-secret"


def s3_endpoint():
    return getattr(ARGS, "s3", None) if ARGS is not None else None


def s3_properties():
    """PyIceberg's FileIO properties for the test S3 server (none without --s3)."""
    endpoint = s3_endpoint()
    if not endpoint:
        return {}
    return {"s3.endpoint": endpoint, "s3.access-key-id": S3_KEY_ID,
            "s3.secret-access-key": S3_SECRET, "s3.region": "us-east-1"}


def filesystem(uri):
    """(pyarrow filesystem, path) for a local path, file:// URI or s3:// URI."""
    from pyarrow import fs

    if uri.startswith("s3://") or uri.startswith("s3a://"):
        endpoint = s3_endpoint()
        scheme, host = endpoint.split("://", 1)
        s3 = fs.S3FileSystem(access_key=S3_KEY_ID, secret_key=S3_SECRET, region="us-east-1",
                             endpoint_override=host, scheme=scheme)
        return s3, uri.split("://", 1)[1]
    return fs.LocalFileSystem(), local(uri)


def read_bytes(uri):
    fsys, path = filesystem(uri)
    with fsys.open_input_file(path) as f:
        return f.read()


def exists(uri):
    from pyarrow import fs

    fsys, path = filesystem(uri)
    return fsys.get_file_info(path).type == fs.FileType.File


def list_files(prefix):
    """Every file under a directory URI, as URIs in the prefix's scheme."""
    from pyarrow import fs

    fsys, path = filesystem(prefix)
    infos = fsys.get_file_info(fs.FileSelector(path, recursive=True, allow_not_found=True))
    scheme = "s3://" if prefix.startswith("s3") else ""
    return sorted(scheme + i.path for i in infos if i.type == fs.FileType.File)


def catalog(pg_dsn):
    """PyIceberg's RestCatalog with --rest, else its SqlCatalog on trackd's PostgreSQL."""
    if ARGS is not None and getattr(ARGS, "rest", None):
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog("rest", uri=ARGS.rest, **s3_properties())
    from pyiceberg.catalog.sql import SqlCatalog

    uri = pg_dsn.replace("postgresql://", "postgresql+psycopg2://", 1)
    return SqlCatalog("trackd", uri=uri, **s3_properties())


def duckdb_connection():
    import duckdb

    # Offline: the extensions come from the duckdb-extension-* wheels, never from the network.
    con = duckdb.connect(config={"autoinstall_known_extensions": False,
                                 "autoload_known_extensions": False})
    names = ("avro", "iceberg") + (("httpfs",) if s3_endpoint() else ())
    for name in names:
        mod = importlib.import_module("duckdb_extension_" + name)
        path = glob.glob(os.path.join(os.path.dirname(mod.__file__), "extensions", "*",
                                      "*.duckdb_extension"))[0]
        con.execute(f"LOAD '{path}'")
    if s3_endpoint():
        scheme, host = s3_endpoint().split("://", 1)
        con.execute(f"CREATE SECRET test_s3 (TYPE s3, KEY_ID '{S3_KEY_ID}', SECRET '{S3_SECRET}', "
                    f"REGION 'us-east-1', ENDPOINT '{host}', URL_STYLE 'path', "
                    f"USE_SSL {'true' if scheme == 'https' else 'false'})")
    return con


def compare(args):
    import psycopg2
    from pyiceberg.expressions import EqualTo

    pg = psycopg2.connect(args.pg)
    cur = pg.cursor()
    cur.execute("SELECT vehicle_id, (extract(epoch FROM recorded_at) * 1000000)::bigint, "
                "ST_X(geom), ST_Y(geom), kafka_partition, kafka_offset "
                "FROM trackd.vehicle_telemetry_history")
    pg_rows = cur.fetchall()
    pg_set = {(r[0], r[1], r[2], r[3]) for r in pg_rows}

    table = catalog(args.pg).load_table(args.table)
    data = table.scan(selected_fields=("vehicle_id", "recorded_at", "longitude", "latitude",
                                       "kafka_partition", "kafka_offset")).to_arrow()
    times = data.column("recorded_at").cast("int64").to_pylist()
    ice = list(zip(data.column("vehicle_id").to_pylist(), times,
                   data.column("longitude").to_pylist(), data.column("latitude").to_pylist()))
    ice_set = set(ice)
    coords = set(zip(data.column("kafka_partition").to_pylist(),
                     data.column("kafka_offset").to_pylist()))
    print(f"pg_rows={len(pg_rows)}")
    print(f"pg_distinct={len(pg_set)}")
    print(f"iceberg_rows={len(ice)}")
    print(f"iceberg_distinct={len(ice_set)}")
    print(f"iceberg_distinct_kafka={len(coords)}")
    print(f"missing={len(pg_set - ice_set)}")
    print(f"extra={len(ice_set - pg_set)}")

    # A filtered scan: planning prunes files by the bounds trackd wrote, so wrong bounds show
    # up as missing rows here.
    vehicle = min(r[0] for r in pg_rows) if pg_rows else ""
    cur.execute("SELECT count(*) FROM trackd.vehicle_telemetry_history WHERE vehicle_id = %s",
                (vehicle,))
    print(f"pg_vehicle_rows={cur.fetchone()[0]}")
    print(f"iceberg_vehicle_rows={table.scan(row_filter=EqualTo('vehicle_id', vehicle)).to_arrow().num_rows}")

    snapshot = table.current_snapshot()
    summary = snapshot.summary if snapshot else None
    print(f"summary_total_records={summary['total-records'] if summary else 0}")
    print(f"summary_archive_seq={summary['trackd.archive-seq'] if summary else ''}")
    print(f"property_archive_seq={table.properties.get('trackd.archive-seq', '')}")
    offsets = json.loads(table.properties.get("kafka.offsets", "{}"))
    cur.execute("SELECT kafka_partition, max(kafka_offset) + 1 FROM trackd.vehicle_telemetry_history "
                "GROUP BY 1")
    expected = {str(p): o for p, o in cur.fetchall()}
    print(f"kafka_offsets_match={int(offsets == expected)}")

    con = duckdb_connection()
    count = con.execute("SELECT count(*) FROM iceberg_scan(?)", [table.metadata_location]).fetchone()[0]
    print(f"duckdb_rows={count}")


def values(args):
    """Every column of every row, PostGIS against Iceberg, as multisets; and data files per
    partition."""
    import collections
    import struct

    import psycopg2

    pg = psycopg2.connect(args.pg)
    cur = pg.cursor()
    cur.execute("SELECT vehicle_id, (extract(epoch FROM recorded_at) * 1000000)::bigint, "
                "ST_X(geom), ST_Y(geom), coalesce(ST_Z(geom), 0), speed_kmh, heading_deg, "
                "accuracy_m, attributes::text, kafka_partition, kafka_offset, ingest_batch_id "
                "FROM trackd.vehicle_telemetry_history")
    pg_rows = collections.Counter(cur.fetchall())
    table = catalog(args.pg).load_table(args.table)
    data = table.scan().to_arrow()
    cols = [data.column(n).to_pylist() for n in (
        "vehicle_id", "recorded_at", "longitude", "latitude", "altitude", "speed_kmh",
        "heading_deg", "accuracy_m", "attributes", "kafka_partition", "kafka_offset",
        "ingest_batch_id")]
    cols[1] = data.column("recorded_at").cast("int64").to_pylist()
    ice_rows = collections.Counter(zip(*cols))
    geometry = data.column("geometry").to_pylist()
    bad_wkb = sum(1 for g, x, y, z in zip(geometry, cols[2], cols[3], cols[4])
                  if g != struct.pack("<BIddd", 1, 1001, x, y, z))
    print(f"pg_rows={sum(pg_rows.values())}")
    print(f"iceberg_rows={sum(ice_rows.values())}")
    print(f"values_match={int(pg_rows == ice_rows)}")
    print(f"values_missing={sum((pg_rows - ice_rows).values())}")
    print(f"values_extra={sum((ice_rows - pg_rows).values())}")
    print(f"bad_wkb={bad_wkb}")
    per_partition = collections.Counter(tuple(t.file.partition) for t in table.scan().plan_files())
    print(f"partitions={len(per_partition)}")
    print(f"data_files={sum(per_partition.values())}")
    print(f"max_files_per_partition={max(per_partition.values()) if per_partition else 0}")


def field_ids_missing(schema):
    missing = 0
    if isinstance(schema, list):
        return sum(field_ids_missing(s) for s in schema)
    if not isinstance(schema, dict):
        return 0
    if schema.get("type") == "record":
        for f in schema["fields"]:
            if "field-id" not in f:
                missing += 1
            missing += field_ids_missing(f["type"])
    elif schema.get("type") == "array":
        missing += field_ids_missing(schema["items"])
    return missing


def avro(args):
    import fastavro

    import io

    files = [f for f in list_files(args.dir.rstrip("/") + "/metadata") if f.endswith(".avro")]
    lists = manifests = records = missing = bad_meta = 0
    for path in files:
        with io.BytesIO(read_bytes(path)) as fh:
            reader = fastavro.reader(fh)
            schema = reader.writer_schema
            records += sum(1 for _ in reader)
            missing += field_ids_missing(schema)
            meta = reader.metadata
            if schema["name"] == "manifest_file":
                lists += 1
                bad_meta += int(meta.get("format-version") != "2" or "snapshot-id" not in meta)
            else:
                manifests += 1
                for key in ("schema", "schema-id", "partition-spec", "partition-spec-id"):
                    bad_meta += int(key not in meta)
                bad_meta += int(meta.get("format-version") != "2" or meta.get("content") != "data")
    print(f"avro_files={len(files)}")
    print(f"manifest_lists={lists}")
    print(f"manifests={manifests}")
    print(f"avro_records={records}")
    print(f"fields_without_id={missing}")
    print(f"bad_metadata_keys={bad_meta}")


def table_info(args):
    import io

    import fastavro

    table = catalog(args.pg).load_table(args.table)
    md = table.metadata
    print(f"snapshots={len(md.snapshots)}")
    print(f"snapshot_log={len(md.snapshot_log)}")
    snapshot = table.current_snapshot()
    with io.BytesIO(read_bytes(snapshot.manifest_list)) as fh:
        print(f"current_manifests={sum(1 for _ in fastavro.reader(fh))}")
    print(f"current_operation={snapshot.summary.operation.value}")
    print(f"rows={table.scan().to_arrow().num_rows}")
    print(f"duckdb_rows={duckdb_connection().execute('SELECT count(*) FROM iceberg_scan(?)', [table.metadata_location]).fetchone()[0]}")
    print("snapshot_ids=" + ",".join(str(s.snapshot_id) for s in md.snapshots))
    print(f"analyst_note={table.properties.get('analyst.note', '')}")
    spec = table.spec()
    print("partition_fields=" + ",".join(f"{f.name}:{f.transform}" for f in spec.fields))
    tasks = list(table.scan().plan_files())
    print(f"data_files={len(tasks)}")
    print(f"partitions={len({tuple(t.file.partition) for t in tasks})}")
    folders = {os.path.basename(os.path.dirname(local(t.file.file_path))) for t in tasks}
    print("partition_folders=" + ",".join(sorted(folders)))


def touch_rest(args):
    # Through a REST catalog a properties-only commit does not move main, so it is no conflict
    # for trackd's commit (which asserts main): another writer here commits a snapshot, as a
    # compaction by another engine would (same data: a "replace" snapshot of the same manifests,
    # carrying the summary over), plus the property, straight through the REST API.
    import time
    import uuid

    import requests

    table = catalog(args.pg).load_table(args.table)
    md = table.metadata
    current = table.current_snapshot()
    ns, name = args.table.split(".")
    new_id = int(uuid.uuid4().int >> 65)
    old_list = current.manifest_list
    new_list = old_list.rsplit("/", 1)[0] + f"/snap-{new_id}-1-{uuid.uuid4()}.avro"
    fsys, src = filesystem(old_list)
    fsys.copy_file(src, filesystem(new_list)[1])
    summary = {k: v for k, v in current.summary.additional_properties.items()}
    summary["operation"] = "replace"
    snapshot = {"snapshot-id": new_id, "parent-snapshot-id": current.snapshot_id,
                "sequence-number": md.last_sequence_number + 1,
                "timestamp-ms": max(int(time.time() * 1000), md.last_updated_ms),
                "manifest-list": new_list, "summary": summary, "schema-id": current.schema_id}
    body = {"identifier": {"namespace": [ns], "name": name},
            "requirements": [{"type": "assert-table-uuid", "uuid": str(md.table_uuid)},
                             {"type": "assert-ref-snapshot-id", "ref": "main",
                              "snapshot-id": current.snapshot_id}],
            "updates": [{"action": "add-snapshot", "snapshot": snapshot},
                        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                         "snapshot-id": new_id},
                        {"action": "set-properties", "updates": {"analyst.note": "kept"}}]}
    r = requests.post(f"{args.rest}/v1/namespaces/{ns}/tables/{name}", json=body, timeout=30)
    r.raise_for_status()
    print(f"metadata_location={r.json()['metadata-location']}")


def touch(args):
    if args.rest:
        return touch_rest(args)
    # A commit by another writer (PyIceberg through the same JDBC catalog): trackd's next commit
    # must build on it, keeping the property.
    table = catalog(args.pg).load_table(args.table)
    with table.transaction() as tx:
        tx.set_properties({"analyst.note": "kept"})
    print(f"metadata_location={catalog(args.pg).load_table(args.table).metadata_location}")


def files(args):
    table = catalog(args.pg).load_table(args.table)
    md = table.metadata
    refs = {table.metadata_location}
    refs.update(e.metadata_file for e in md.metadata_log)
    for s in md.snapshots:
        refs.add(s.manifest_list)
        if not exists(s.manifest_list):
            continue
        for m in s.manifests(table.io):
            refs.add(m.manifest_path)
            if not exists(m.manifest_path):
                continue
            refs.update(e.data_file.file_path for e in m.fetch_manifest_entry(table.io))
    statistics = [st.statistics_path for st in md.statistics]
    partition_statistics = [st.statistics_path for st in md.partition_statistics]
    refs.update(statistics + partition_statistics)
    # Entries for a snapshot the table no longer has (expiry must drop them, as the spec says).
    snapshot_ids = {s.snapshot_id for s in md.snapshots}
    dangling = [st for st in md.statistics + md.partition_statistics
                if st.snapshot_id not in snapshot_ids]
    missing = sorted(p for p in refs if not exists(p))
    print(f"statistics_files={len(statistics)}")
    print(f"partition_statistics_files={len(partition_statistics)}")
    print(f"dangling_statistics={len(dangling)}")
    print(f"referenced_files={len(refs)}")
    print(f"missing_files={len(missing)}")
    for p in missing[:20]:
        print(f"missing: {p}")
    snapshot = table.current_snapshot()
    print(f"snapshots={len(md.snapshots)}")
    print(f"current_snapshot_id={snapshot.snapshot_id if snapshot else ''}")
    print(f"metadata_location={table.metadata_location}")
    print(f"property_archive_seq={table.properties.get('trackd.archive-seq', '')}")


def stats(args):
    # Another engine's statistics for the current snapshot, named in the table's metadata: a
    # Puffin file (`statistics`, as Trino's ANALYZE writes) and a partition statistics file
    # (`partition-statistics`, as Spark's compute_partition_stats writes). The bytes are not
    # read by anyone here.
    import uuid

    from pyiceberg.table.statistics import PartitionStatisticsFile, StatisticsFile
    from pyiceberg.table.update import SetPartitionStatisticsUpdate

    table = catalog(args.pg).load_table(args.table)
    snapshot = table.current_snapshot()
    prefix = f"{table.metadata.location}/metadata/{snapshot.snapshot_id}-{uuid.uuid4()}"
    path, partition_path = prefix + ".stats", prefix + "-partition-stats.parquet"
    body = b"PFA1" + b"\0" * 8 + b"PFA1"
    for p in (path, partition_path):
        fsys, local_path = filesystem(p)
        with fsys.open_output_stream(local_path) as out:
            out.write(body)
    with table.transaction() as tx:
        with tx.update_statistics() as update:
            update.set_statistics(StatisticsFile(snapshot_id=snapshot.snapshot_id,
                                                 statistics_path=path,
                                                 file_size_in_bytes=len(body),
                                                 file_footer_size_in_bytes=8, blob_metadata=[]))
        # PyIceberg has no public API for it yet: the update itself.
        tx._apply((SetPartitionStatisticsUpdate(partition_statistics=PartitionStatisticsFile(
            snapshot_id=snapshot.snapshot_id, statistics_path=partition_path,
            file_size_in_bytes=len(body))),))
    print(f"statistics_path={path}")
    print(f"partition_statistics_path={partition_path}")


def exists_command(args):
    print(f"exists={int(exists(args.uri))}")


def ls(args):
    found = list_files(args.dir)
    for f in found:
        print(f"file={f}")
    print(f"files={len(found)}")
    print(f"parquet={sum(1 for f in found if f.endswith('.parquet'))}")
    print(f"avro={sum(1 for f in found if f.endswith('.avro'))}")


def put(args):
    fsys, path = filesystem(args.uri)
    if fsys.type_name == "local":
        fsys.create_dir(os.path.dirname(path), recursive=True)
    with fsys.open_output_stream(path) as out:
        out.write(b"not referenced by anything")
    print(f"put={args.uri}")


def uploads(args):
    import boto3

    bucket, _, prefix = args.dir.split("://", 1)[1].partition("/")
    client = boto3.client("s3", endpoint_url=s3_endpoint(), aws_access_key_id=S3_KEY_ID,
                          aws_secret_access_key=S3_SECRET, region_name="us-east-1")
    # The whole bucket's, then those under the prefix: MinIO lists an upload under a prefix only
    # when the prefix is its whole key.
    found = [u for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=bucket)
             for u in page.get("Uploads", []) if u["Key"].startswith(prefix)]
    for u in found:
        print(f"upload={u['Key']}")
    print(f"uploads={len(found)}")


def keys(args):
    # Every object under the prefix as S3 lists it, folder markers ("…/") included.
    import boto3

    bucket, _, prefix = args.dir.split("://", 1)[1].partition("/")
    client = boto3.client("s3", endpoint_url=s3_endpoint(), aws_access_key_id=S3_KEY_ID,
                          aws_secret_access_key=S3_SECRET, region_name="us-east-1")
    found = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix) for o in page.get("Contents", [])]
    print(f"keys={len(found)}")
    print(f"folder_markers={sum(1 for k in found if k.endswith('/'))}")
    print(f"clock_keys={sum(1 for k in found if '.trackd-clock' in k)}")


# What the commands import, imported once by `serve` before it forks.
READERS = ("pyarrow", "pyarrow.fs", "pyarrow.parquet", "pyiceberg.catalog.sql",
           "pyiceberg.catalog.rest", "pyiceberg.expressions", "duckdb", "fastavro", "psycopg2",
           "boto3", "requests")


def serve(path):
    import shlex
    import signal
    import socket
    import traceback

    for name in READERS:
        importlib.import_module(name)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children reaped by the kernel
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path + ".new")
    listener.listen(64)
    os.rename(path + ".new", path)  # there once it answers
    print(f"archive_check: serving on {path}", flush=True)
    while True:
        conn, _ = listener.accept()
        if os.fork() != 0:
            conn.close()
            continue
        listener.close()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        code = 1
        try:
            request = conn.makefile("rb").readline().decode()
            os.dup2(conn.fileno(), 1)
            os.dup2(conn.fileno(), 2)
            sys.argv = ["archive_check.py"] + shlex.split(request)
            code = main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # a request's failure is its answer
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os.write(1, b"\0" + str(code).encode())
        os._exit(0)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("--pg", required=True)
    c.add_argument("--table", default="trackd.vehicle_positions")
    a = sub.add_parser("avro")
    a.add_argument("--dir", required=True)
    t = sub.add_parser("table")
    t.add_argument("--pg", required=True)
    t.add_argument("--table", default="trackd.vehicle_positions")
    w = sub.add_parser("touch")
    w.add_argument("--pg", required=True)
    w.add_argument("--table", default="trackd.vehicle_positions")
    f = sub.add_parser("files")
    f.add_argument("--pg", required=True)
    f.add_argument("--table", default="trackd.vehicle_positions")
    st = sub.add_parser("stats")
    st.add_argument("--pg", required=True)
    st.add_argument("--table", default="trackd.vehicle_positions")
    for sp in (c, t, w, f, st):
        sp.add_argument("--rest", help="the REST catalog's URI (else the JDBC catalog in --pg)")
    v = sub.add_parser("values")
    v.add_argument("--pg", required=True)
    v.add_argument("--table", default="trackd.vehicle_positions")
    v.add_argument("--rest")
    lp = sub.add_parser("ls")
    lp.add_argument("--dir", required=True)
    pp = sub.add_parser("put")
    pp.add_argument("--uri", required=True)
    ep = sub.add_parser("exists")
    ep.add_argument("--uri", required=True)
    up = sub.add_parser("uploads")
    up.add_argument("--dir", required=True)
    kp = sub.add_parser("keys")
    kp.add_argument("--dir", required=True)
    sv = sub.add_parser("serve")
    sv.add_argument("--socket", required=True)
    p.add_argument("--s3", help="the S3 server's endpoint URL, for s3:// locations")
    args = p.parse_args()
    global ARGS
    ARGS = args
    if args.cmd == "serve":
        return serve(args.socket)
    {"compare": compare, "avro": avro, "table": table_info, "touch": touch,
     "files": files, "values": values, "ls": ls, "put": put, "uploads": uploads,
     "stats": stats, "keys": keys, "exists": exists_command}[args.cmd](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
