#!/usr/bin/env python3
"""Where a PostgreSQL backend's CPU went, by statement and by what the statement was doing.

    perf record -e cpu-clock -F 199 --call-graph dwarf,16384 -p BACKEND_PIDS -o FILE
    python3 bench/perf_attribution.py FILE

Reads `perf script` call stacks (needs the .eh_frame unwinding of --call-graph dwarf; Debian's
postgres has no frame pointers) and classifies each sample twice, by its ancestors:
  statement: COPY (DoCopy), the upsert or another query (the executor without DoCopy), COMMIT
             (CommitTransaction), other;
  component: GiST index, SP-GiST index, btree index (unique check separately), BRIN index,
             heap insert/update, input parsing (NextCopyFrom: jsonb, geometry and the other
             receive functions),
             staging/sort and the rest; WAL (XLogInsert) is shown separately as it runs inside
             the others.
Prints one table of shares of all samples. Standard library only.
"""

import collections
import subprocess
import sys

STATEMENTS = [
    ("COPY", ("DoCopy", "CopyFrom")),
    ("COMMIT", ("CommitTransaction", "CommitTransactionCommand")),
    ("INSERT … ON CONFLICT / other query", ("standard_ExecutorRun", "ExecutorRun")),
]
# First match wins, from the leaf upwards would pick helpers; from the root down picks the
# outermost, which is what we want: the access method the work was done for.
COMPONENTS = [
    ("input parsing (receive functions)", ("NextCopyFrom",)),
    ("unique check (ON CONFLICT arbiter)", ("ExecCheckIndexConstraints", "_bt_check_unique")),
    ("GiST index insert", ("gistinsert", "gistdoinsert")),
    ("SP-GiST index insert", ("spginsert", "spgdoinsert")),
    ("btree index insert", ("btinsert", "_bt_doinsert")),
    ("BRIN index insert", ("brininsert",)),
    ("heap update", ("heap_update", "ExecUpdate")),
    ("heap insert", ("heap_insert", "heap_multi_insert", "CopyMultiInsertBufferFlush",
                     "table_multi_insert")),
    ("WAL flush (commit)", ("XLogFlush", "XLogWrite")),
]


def classify(frames, table):
    """frames: root first. The first entry of `table` whose names appear, else None."""
    names = set(frames)
    for label, keys in table:
        if any(k in names for k in keys):
            return label
    return None


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    script = subprocess.run(["perf", "script", "-i", sys.argv[1], "-F", "comm,ip,sym"],
                            capture_output=True, text=True, check=True).stdout
    by_stmt = collections.Counter()
    by_both = collections.Counter()
    wal = collections.Counter()
    total = 0
    frames = []

    def flush():
        nonlocal total
        if not frames:
            return
        root_first = list(reversed(frames))
        stmt = classify(root_first, STATEMENTS) or "other"
        comp = classify(root_first, COMPONENTS) or "rest (executor, staging, buffers, …)"
        by_stmt[stmt] += 1
        by_both[(stmt, comp)] += 1
        if "XLogInsert" in frames or "XLogInsertRecord" in frames:
            wal[stmt] += 1
        total += 1

    for line in script.splitlines():
        s = line.strip()
        if not s:
            flush()
            frames = []
            continue
        parts = s.split(None, 1)
        if len(parts) == 2 and all(c in "0123456789abcdef" for c in parts[0]):
            frames.append(parts[1].split("+")[0])
        # else: the sample header line
    flush()
    if total == 0:
        print("no samples", file=sys.stderr)
        return 1
    print(f"{total} samples")
    print(f"{'statement':38} {'component':40} {'share':>7}")
    for stmt, n in by_stmt.most_common():
        print(f"{stmt:38} {'(all)':40} {100 * n / total:6.1f}%")
        for (s, comp), m in sorted(by_both.items(), key=lambda kv: -kv[1]):
            if s == stmt and 100 * m / total >= 0.5:
                print(f"{'':38} {comp:40} {100 * m / total:6.1f}%")
    print(f"{'WAL record insertion (XLogInsert), inside the above':79} "
          f"{100 * sum(wal.values()) / total:6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
