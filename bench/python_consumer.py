#!/usr/bin/env python3
"""The usual Python consumer, for bench/ingest.sh: what many teams deploy today.

confluent-kafka poll() one message at a time, json.loads, the checks a careful hand-written
consumer makes (types, ranges, timestamps, srid 4326 only, geom_hex points), psycopg2
execute_values in 500-row pages with an ST_SetSRID(ST_MakePoint(...)) template into the
history, then the same forward-only current-state upsert as trackd (the batch deduplicated
per vehicle first, or PostgreSQL refuses it), one transaction per batch, and the Kafka commit
after the database commit. It does not detect speed jumps or redelivered duplicates (trackd's
stateful checks), so it stores a few more rows than trackd; refused messages are only
counted (no dead-letter table).

Batches: up to --batch-messages messages or --batch-ms milliseconds (trackd's defaults), the
same transaction size trackd uses, so the comparison is about the code, not the batch size.

Stops after --max-messages messages, after --max-seconds seconds, or when every partition is
at its end. Prints key=value lines.
"""

import argparse
import binascii
import json
import math
import os
import resource
import struct
import sys
import time
from datetime import datetime, timedelta, timezone

import psycopg2
import psycopg2.extras
from confluent_kafka import Consumer, KafkaError, TopicPartition

HISTORY_SQL = (
    "INSERT INTO trackd.vehicle_telemetry_history (vehicle_id, recorded_at, geom, speed_kmh,"
    " heading_deg, accuracy_m, attributes, ingest_batch_id, kafka_partition, kafka_offset)"
    " VALUES %s"
)
CURRENT_SQL = (
    "INSERT INTO trackd.vehicle_current_state AS s (vehicle_id, last_updated, geom, speed_kmh,"
    " heading_deg, accuracy_m, attributes, ingest_batch_id, kafka_partition, kafka_offset)"
    " VALUES %s"
    " ON CONFLICT (vehicle_id) DO UPDATE SET last_updated = EXCLUDED.last_updated,"
    " geom = EXCLUDED.geom, speed_kmh = EXCLUDED.speed_kmh, heading_deg = EXCLUDED.heading_deg,"
    " accuracy_m = EXCLUDED.accuracy_m, attributes = EXCLUDED.attributes,"
    " ingest_batch_id = EXCLUDED.ingest_batch_id, kafka_partition = EXCLUDED.kafka_partition,"
    " kafka_offset = EXCLUDED.kafka_offset"
    " WHERE EXCLUDED.last_updated > s.last_updated"
)
TEMPLATE = "(%s, %s, ST_SetSRID(ST_MakePoint(%s, %s, %s), 4326), %s, %s, %s, %s, %s, %s, %s)"
PAGE_SIZE = 500
MAX_PAYLOAD = 65536
KNOWN = ("vehicle_id", "timestamp", "latitude", "longitude", "geom_hex", "srid", "altitude_m",
         "speed_kmh", "heading_deg", "accuracy_m")


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def optional_number(d, key):
    v = d.get(key)
    if v is None:
        return None
    if not number(v):
        raise ValueError(key)
    return float(v)


def ewkb_point(hexstr):
    """(x, y, z or None, srid or None) of a hex WKB/EWKB point, or ValueError."""
    b = binascii.unhexlify(hexstr)
    if len(b) < 21:
        raise ValueError("short wkb")
    endian = "<" if b[0] == 1 else ">"
    (kind,) = struct.unpack_from(endian + "I", b, 1)
    at = 5
    srid = None
    if kind & 0x20000000:
        (srid,) = struct.unpack_from(endian + "I", b, at)
        at += 4
    has_z = bool(kind & 0x80000000) or 1000 <= (kind & 0xFFFF) < 2000
    if (kind & 0xFFFF) % 1000 != 1:
        raise ValueError("not a point")
    if has_z:
        x, y, z = struct.unpack_from(endian + "ddd", b, at)
    else:
        (x, y), z = struct.unpack_from(endian + "dd", b, at), None
    return x, y, z, srid


def parse(value, partition, offset, now):
    """A history row tuple (without the batch id), or None when the message is refused."""
    if value is None or len(value) > MAX_PAYLOAD:
        return None
    try:
        d = json.loads(value)
        if not isinstance(d, dict):
            return None
        vid = d.get("vehicle_id")
        if not isinstance(vid, str) or not vid or len(vid) > 64:
            return None
        ts = d.get("timestamp")
        if isinstance(ts, int) and not isinstance(ts, bool):
            recorded = datetime.fromtimestamp(ts / 1000, tz=timezone.utc)
        elif isinstance(ts, str):
            recorded = datetime.fromisoformat(ts)
            if recorded.tzinfo is None:
                return None
        else:
            return None
        if recorded > now + timedelta(seconds=300) or recorded < now - timedelta(days=30):
            return None
        srid = d.get("srid", 4326)
        if srid != 4326:
            return None
        alt = optional_number(d, "altitude_m")
        if d.get("geom_hex") is not None:
            lon, lat, z, wkb_srid = ewkb_point(d["geom_hex"])
            if wkb_srid not in (None, 4326):
                return None
            if z is not None:
                alt = z
        else:
            lat, lon = d.get("latitude"), d.get("longitude")
            if not number(lat) or not number(lon):
                return None
        if not (-90 <= lat <= 90 and -180 <= lon <= 180) or (lat == 0 and lon == 0):
            return None
        speed = optional_number(d, "speed_kmh")
        heading = optional_number(d, "heading_deg")
        accuracy = optional_number(d, "accuracy_m")
        if (speed is not None and speed < 0) or (accuracy is not None and accuracy < 0):
            return None
        if heading is not None and not 0 <= heading < 360:
            return None
        extra = {k: v for k, v in d.items() if k not in KNOWN}
        attributes = json.dumps(extra) if extra else None
    except (ValueError, TypeError, KeyError, OverflowError, struct.error, binascii.Error):
        return None
    return [vid, recorded, lon, lat, alt or 0.0, speed, heading, accuracy, attributes,
            None, partition, offset]


def process_cpu_s(pid):
    """CPU seconds a local process has used (its PostgreSQL backend), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--batch-messages", type=int, default=20000)
    ap.add_argument("--batch-ms", type=int, default=500)
    ap.add_argument("--max-messages", type=int, default=0, help="0: no limit")
    ap.add_argument("--max-seconds", type=float, default=0, help="0: no limit")
    args = ap.parse_args()

    conn = psycopg2.connect(args.dsn, application_name="bench-python-consumer")
    cur = conn.cursor()
    cur.execute("SELECT pg_backend_pid()")
    (backend_pid,) = cur.fetchone()
    backend_cpu_start = process_cpu_s(backend_pid)
    consumer = Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": args.group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
    })
    consumer.subscribe([args.topic])
    meta = consumer.list_topics(args.topic, timeout=10).topics[args.topic]
    partitions = len(meta.partitions)

    started = time.time()
    first_commit = None
    messages = rows = refused = batches = 0
    rows_at_first_commit = 0
    at_eof = set()
    batch, batch_started = [], None

    def flush():
        nonlocal batch, batch_started, batches, rows, first_commit, rows_at_first_commit
        if batch:
            cur.execute("SELECT nextval('trackd.ingest_batch_id_seq')")
            (batch_id,) = cur.fetchone()
            latest = {}
            for r in batch:
                r[9] = batch_id
                seen = latest.get(r[0])
                if seen is None or (r[1], r[11]) > (seen[1], seen[11]):
                    latest[r[0]] = r
            psycopg2.extras.execute_values(cur, HISTORY_SQL, batch, template=TEMPLATE,
                                           page_size=PAGE_SIZE)
            psycopg2.extras.execute_values(cur, CURRENT_SQL, list(latest.values()),
                                           template=TEMPLATE, page_size=PAGE_SIZE)
        conn.commit()
        consumer.commit(asynchronous=False)
        rows += len(batch)
        batches += 1
        if first_commit is None:
            first_commit = time.time()
            rows_at_first_commit = rows
        batch, batch_started = [], None

    pending = 0  # messages read since the last commit
    while True:
        now_s = time.time()
        if args.max_seconds and now_s - started >= args.max_seconds:
            break
        if args.max_messages and messages >= args.max_messages:
            break
        if len(at_eof) == partitions and pending == 0:
            break
        msg = consumer.poll(0.1)
        if msg is not None:
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_eof.add(msg.partition())
                else:
                    print(f"kafka error: {msg.error()}", file=sys.stderr)
            else:
                at_eof.discard(msg.partition())
                messages += 1
                pending += 1
                if batch_started is None:
                    batch_started = now_s
                row = parse(msg.value(), msg.partition(), msg.offset(),
                            datetime.now(timezone.utc))
                if row is None:
                    refused += 1
                else:
                    batch.append(row)
        if pending and (pending >= args.batch_messages or len(at_eof) == partitions or
                        (batch_started and (time.time() - batch_started) * 1000 >= args.batch_ms)):
            flush()
            pending = 0
    if pending:
        flush()
    done = time.time()
    backend_cpu = process_cpu_s(backend_pid) - backend_cpu_start
    consumer.close()
    conn.close()
    seconds = done - started
    steady = (done - first_commit) if first_commit else 0
    print(f"messages={messages}\nrows={rows}\nrefused={refused}\nbatches={batches}")
    print(f"seconds={seconds:.3f}\nrows_per_s={rows / seconds if seconds else 0:.0f}")
    steady_rows = rows - rows_at_first_commit
    print(f"steady_rows_per_s={steady_rows / steady if steady else 0:.0f}")
    print(f"complete={'yes' if len(at_eof) == partitions else 'no'}")
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"cpu_s={ru.ru_utime + ru.ru_stime:.2f}\nmax_rss_kib={ru.ru_maxrss}")
    print(f"backend_cpu_s={backend_cpu:.2f}")


if __name__ == "__main__":
    main()
