// trackd-bench-copy-limit: the COPY limit of bench/ingest (docs/benchmarks.md).
//
//   trackd-bench-copy-limit export --dsn SRC --dir DIR [--order time|vehicle|space]
//       For every ingest batch trackd committed in SRC, in commit order, writes two binary COPY
//       files: BATCHID-pPARTITION.history.copy (the batch's history rows in (vehicle_id,
//       recorded_at) order, as trackd sends them, with --order time in time order, as
//       trackd sent them before 2026-12-01, or with --order space in the Morton order of the
//       position, as trackd sends them with postgis.defer_indexes; PARTITION is the batch's
//       lowest Kafka partition) and
//       BATCHID-pPARTITION.current.copy (the batch's latest row per vehicle: the staging rows
//       of trackd's current-state upsert). Adds a btree index on ingest_batch_id to SRC first.
//   trackd-bench-copy-limit load --dsn DST --dir DIR [--no-upsert] [--explain-batch N]
//                                [--connections N] [--layout closed|hot]
//                                [--history-target parent|partition]
//       Loads those files batch by batch into DST (a fresh `trackd migrate`d database), each
//       batch one transaction: COPY (FORMAT binary) into trackd.vehicle_telemetry_history, COPY
//       into a temporary staging table, the same INSERT ... ON CONFLICT as trackd's sink, COMMIT.
//       Nothing else: no Kafka, no decoding, no validation, no offsets, no dead letters. With
//       --connections N, batches are spread over N connections committing in parallel by their
//       Kafka partition (p % N), as trackd spreads partitions over batch.writers.
//       Files are read before the clock starts. Prints key=value lines: rows, batches, seconds
//       (wall time of all connections), the time spent in each statement (summed over the
//       connections) and the CPU their backends used (read from /proc: the database must be on
//       this machine, else -1). --explain-batch N runs the upsert of the N-th batch (from 1)
//       as EXPLAIN (ANALYZE, BUFFERS, WAL) and prints the plan to stderr (it still executes).
//       --layout hot first gives DST's partitions not yet past the hot indexes of
//       postgis.defer_indexes instead of the closed ones (the new layout's COPY limit); the
//       default, closed, loads into the schema as migrated (every index maintained).
//       --history-target partition COPYs each batch straight into the time partition that
//       holds all its rows, after inserting its trackd.ingest_batches row, as trackd's sink does
//       (the default, parent, COPYs into the partitioned table, whose ledger trigger then
//       records the batch); a batch whose rows span partitions still goes through the parent.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <libpq-fe.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kColumns =
    "vehicle_id, recorded_at, geom, speed_kmh, heading_deg, accuracy_m, attributes, "
    "ingest_batch_id, kafka_partition, kafka_offset";
constexpr const char* kStageColumns =
    "vehicle_id, last_updated, geom, speed_kmh, heading_deg, accuracy_m, attributes, "
    "ingest_batch_id, kafka_partition, kafka_offset";

// The upsert of server/sink/postgis/postgis_sink.cpp as the performance issue measured it
// (ORDER BY vehicle_id: one lock order for concurrent connections). trackd now sorts by
// vehicle_id COLLATE "C" (the same order on a C or C.UTF-8 database), COPYs a batch of
// vehicles it has never seen straight into the current state, and UPDATEs the stored vehicles
// before it upserts the rest: the limit of trackd's own design does none of these, so it is a
// conservative limit where the current state is much of the work (each vehicle once, live
// streams).
constexpr const char* kUpsert =
    "INSERT INTO trackd.vehicle_current_state AS s (vehicle_id, last_updated, geom, "
    "speed_kmh, heading_deg, accuracy_m, attributes, ingest_batch_id, "
    "kafka_partition, kafka_offset) "
    "SELECT vehicle_id, last_updated, geom, speed_kmh, heading_deg, accuracy_m, "
    "attributes, ingest_batch_id, kafka_partition, kafka_offset FROM current_stage "
    "ORDER BY vehicle_id "
    "ON CONFLICT (vehicle_id) DO UPDATE SET last_updated = EXCLUDED.last_updated, "
    "geom = EXCLUDED.geom, speed_kmh = EXCLUDED.speed_kmh, "
    "heading_deg = EXCLUDED.heading_deg, accuracy_m = EXCLUDED.accuracy_m, "
    "attributes = EXCLUDED.attributes, ingest_batch_id = EXCLUDED.ingest_batch_id, "
    "kafka_partition = EXCLUDED.kafka_partition, "
    "kafka_offset = EXCLUDED.kafka_offset "
    "WHERE (EXCLUDED.last_updated, EXCLUDED.kafka_offset) > (s.last_updated, s.kafka_offset)";

[[noreturn]] void die(const std::string& what) { throw std::runtime_error(what); }

class Db {
  public:
    explicit Db(const std::string& dsn) : conn_(PQconnectdb(dsn.c_str())) {
        if (PQstatus(conn_) != CONNECTION_OK) die(std::string("connect: ") + PQerrorMessage(conn_));
    }
    ~Db() { PQfinish(conn_); }
    Db(const Db&) = delete;
    Db& operator=(const Db&) = delete;

    void exec(const std::string& sql) {
        PGresult* r = PQexec(conn_, sql.c_str());
        const auto st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            const std::string msg = PQresultErrorMessage(r);
            PQclear(r);
            die(sql.substr(0, 60) + ": " + msg);
        }
        PQclear(r);
    }

    void print(const std::string& sql, FILE* out) {
        const auto lines = column(sql);
        for (const auto& l : lines) std::fprintf(out, "%s\n", l.c_str());
    }

    std::vector<std::string> column(const std::string& sql) {
        PGresult* r = PQexec(conn_, sql.c_str());
        if (PQresultStatus(r) != PGRES_TUPLES_OK) {
            const std::string msg = PQresultErrorMessage(r);
            PQclear(r);
            die(sql.substr(0, 60) + ": " + msg);
        }
        std::vector<std::string> out;
        for (int i = 0; i < PQntuples(r); ++i) out.emplace_back(PQgetvalue(r, i, 0));
        PQclear(r);
        return out;
    }

    // COPY ... TO STDOUT into a file; returns the bytes written.
    std::size_t copy_out(const std::string& sql, const fs::path& file) {
        PGresult* r = PQexec(conn_, sql.c_str());
        if (PQresultStatus(r) != PGRES_COPY_OUT) {
            const std::string msg = PQresultErrorMessage(r);
            PQclear(r);
            die(sql.substr(0, 60) + ": " + msg);
        }
        PQclear(r);
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        std::size_t bytes = 0;
        char* buf = nullptr;
        int n = 0;
        while ((n = PQgetCopyData(conn_, &buf, 0)) > 0) {
            out.write(buf, n);
            bytes += static_cast<std::size_t>(n);
            PQfreemem(buf);
        }
        if (n == -2) die(std::string("COPY TO: ") + PQerrorMessage(conn_));
        finish_copy(sql);
        if (!out) die("cannot write " + file.string());
        return bytes;
    }

    // COPY ... FROM STDIN of an already encoded buffer.
    void copy_in(const std::string& sql, const std::string& data) {
        PGresult* r = PQexec(conn_, sql.c_str());
        if (PQresultStatus(r) != PGRES_COPY_IN) {
            const std::string msg = PQresultErrorMessage(r);
            PQclear(r);
            die(sql.substr(0, 60) + ": " + msg);
        }
        PQclear(r);
        if (PQputCopyData(conn_, data.data(), static_cast<int>(data.size())) != 1 ||
            PQputCopyEnd(conn_, nullptr) != 1) {
            die(std::string("COPY FROM: ") + PQerrorMessage(conn_));
        }
        finish_copy(sql);
    }

  private:
    void finish_copy(const std::string& sql) {
        PGresult* r = nullptr;
        while ((r = PQgetResult(conn_)) != nullptr) {
            if (PQresultStatus(r) != PGRES_COMMAND_OK) {
                const std::string msg = PQresultErrorMessage(r);
                PQclear(r);
                die(sql.substr(0, 60) + ": " + msg);
            }
            PQclear(r);
        }
    }

    PGconn* conn_;
};

// CPU seconds (user + system) a local process has used so far, from /proc; -1 if unknown.
double process_cpu_s(const std::string& pid) {
    std::ifstream in("/proc/" + pid + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos) return -1;
    std::istringstream fields(stat.substr(paren + 2));
    std::string f;
    double ticks = 0;
    // After "pid (comm) ": state is field 1, utime 12, stime 13.
    for (int i = 1; i <= 13 && fields >> f; ++i) {
        if (i >= 12) ticks += std::atof(f.c_str());
    }
    return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) die("cannot read " + p.string());
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

enum class Order { time, vehicle, space };

int run_export(const std::string& dsn, const fs::path& dir, Order row_order) {
    Db db(dsn);
    fs::create_directories(dir);
    // trackd's BRIN on ingest_batch_id does not help here: ranges written since the last VACUUM
    // are not summarized, so every batch would scan nearly the whole partition. A btree does.
    db.exec("SET client_min_messages = warning");
    db.exec(
        "CREATE INDEX IF NOT EXISTS bench_export_batch_idx ON trackd.vehicle_telemetry_history "
        "(ingest_batch_id)");
    // The batch's lowest Kafka partition goes into the file name: the loader spreads batches over
    // its connections by partition, as trackd spreads partitions over its writers.
    const auto ids = db.column(
        "SELECT ingest_batch_id || ' ' || min(kafka_partition) FROM "
        "trackd.vehicle_telemetry_history GROUP BY ingest_batch_id ORDER BY ingest_batch_id");
    std::size_t bytes = 0;
    for (const auto& line : ids) {
        const auto space = line.find(' ');
        const std::string id = line.substr(0, space);
        char name[48];
        std::snprintf(name, sizeof name, "%08lld-p%04d", std::atoll(id.c_str()),
                      std::atoi(line.c_str() + space + 1));
        // (vehicle, time) order, as trackd sends them (server/sink/postgis/postgis_sink.cpp);
        // time order, as it did before; or with postgis.defer_indexes, Morton order of the
        // position (ST_GeoHash interleaves the bits the same way, longitude first).
        const char* order =
            row_order == Order::vehicle ? " ORDER BY vehicle_id, recorded_at, kafka_offset"
            : row_order == Order::space
                ? " ORDER BY ST_GeoHash(geom, 12) COLLATE \"C\", vehicle_id, recorded_at"
                : " ORDER BY recorded_at, kafka_partition, kafka_offset";
        bytes +=
            db.copy_out(std::string("COPY (SELECT ") + kColumns +
                            " FROM trackd.vehicle_telemetry_history WHERE ingest_batch_id = " + id +
                            order + ") TO STDOUT (FORMAT binary)",
                        dir / (std::string(name) + ".history.copy"));
        // The newest row per vehicle (ties: the later message), as batch::latest_per_vehicle.
        bytes += db.copy_out(
            std::string("COPY (SELECT * FROM (SELECT DISTINCT ON (vehicle_id) ") + kColumns +
                " FROM trackd.vehicle_telemetry_history WHERE ingest_batch_id = " + id +
                " ORDER BY vehicle_id, recorded_at DESC, kafka_offset DESC) latest"
                " ORDER BY kafka_partition, kafka_offset) TO STDOUT (FORMAT binary)",
            dir / (std::string(name) + ".current.copy"));
    }
    std::printf("batches=%zu\nbytes=%zu\n", ids.size(), bytes);
    return 0;
}

// What a binary COPY file of history rows holds: rows, the range of recorded_at (field 1,
// microseconds since 2000-01-01) and the batch id (field 7, the same in every row).
struct CopyScan {
    std::size_t rows = 0;
    std::int64_t min_time = 0;
    std::int64_t max_time = 0;
    std::int64_t batch_id = 0;
};

std::int64_t be64(const std::string& data, std::size_t at) {
    std::uint64_t v = 0;
    for (int k = 0; k < 8; ++k) v = (v << 8U) | static_cast<unsigned char>(data[at + k]);
    return static_cast<std::int64_t>(v);
}

// Binary COPY: 19-byte header, then per tuple an int16 field count and the fields.
CopyScan scan_copy(const std::string& data) {
    CopyScan s;
    std::size_t at = 19;
    while (at + 2 <= data.size()) {
        const auto fields = static_cast<std::int16_t>((static_cast<unsigned char>(data[at]) << 8U) |
                                                      static_cast<unsigned char>(data[at + 1]));
        at += 2;
        if (fields < 0) break;
        for (int f = 0; f < fields; ++f) {
            std::uint32_t len = 0;
            for (int k = 0; k < 4; ++k)
                len = (len << 8U) | static_cast<unsigned char>(data[at + k]);
            at += 4;
            if (len == 8 && f == 1) {
                const auto t = be64(data, at);
                s.min_time = s.rows == 0 ? t : std::min(s.min_time, t);
                s.max_time = s.rows == 0 ? t : std::max(s.max_time, t);
            } else if (len == 8 && f == 7) {
                s.batch_id = be64(data, at);
            }
            if (len != 0xFFFFFFFFU) at += len;
        }
        ++s.rows;
    }
    return s;
}
std::size_t count_rows(const std::string& data) { return scan_copy(data).rows; }

struct LoadBatch {
    std::string name;
    int partition = 0;
    std::string history;
    std::string current;
    std::size_t rows = 0;
    std::size_t stage_rows = 0;
    // With --history-target partition: the time partition holding every row (empty: the
    // parent table) and the batch id for the ledger row.
    std::string target;
    std::int64_t batch_id = 0;
};

struct LoadTotals {
    double begin = 0, history = 0, stage = 0, upsert = 0, commit = 0, backend_cpu = 0;
};

// One connection's share, in order, one transaction per batch.
void load_connection(const std::string& dsn, const std::vector<const LoadBatch*>& batches,
                     bool upsert, const std::string& explain_name, LoadTotals& totals,
                     std::atomic<int>& ready, int connections, std::string& error) {
    try {
        Db db(dsn);
        db.exec("SET application_name = 'trackd-bench-copy-limit'");
        const std::string backend_pid = db.column("SELECT pg_backend_pid()").at(0);
        db.exec(
            "CREATE TEMP TABLE current_stage "
            "(LIKE trackd.vehicle_current_state INCLUDING DEFAULTS) ON COMMIT DELETE ROWS");
        const std::string copy_history = std::string("COPY trackd.vehicle_telemetry_history (") +
                                         kColumns + ") FROM STDIN (FORMAT binary)";
        const std::string copy_stage =
            std::string("COPY current_stage (") + kStageColumns + ") FROM STDIN (FORMAT binary)";
        const auto secs = [](Clock::time_point a, Clock::time_point b) {
            return std::chrono::duration<double>(b - a).count();
        };
        // Every connection starts together.
        ++ready;
        while (ready.load() < connections) std::this_thread::yield();
        const double cpu_start = process_cpu_s(backend_pid);
        for (const auto* b : batches) {
            const auto t0 = Clock::now();
            db.exec("BEGIN");
            const auto t1 = Clock::now();
            if (b->target.empty()) {
                db.copy_in(copy_history, b->history);
            } else {
                // As trackd's sink: the batch's ledger row itself, then the rows straight into
                // their partition (no routing, no transition table, multi-row inserts).
                db.exec(
                    "INSERT INTO trackd.ingest_batches (ingest_batch_id, history_rows) VALUES (" +
                    std::to_string(b->batch_id) + ", " + std::to_string(b->rows) + ")");
                db.copy_in(
                    "COPY trackd." + b->target + " (" + kColumns + ") FROM STDIN (FORMAT binary)",
                    b->history);
            }
            const auto t2 = Clock::now();
            auto t3 = t2;
            auto t4 = t2;
            if (upsert) {
                db.copy_in(copy_stage, b->current);
                t3 = Clock::now();
                if (b->name == explain_name) {
                    std::fprintf(stderr, "EXPLAIN of the upsert of batch %s:\n", b->name.c_str());
                    db.print(std::string("EXPLAIN (ANALYZE, BUFFERS, WAL) ") + kUpsert, stderr);
                } else {
                    db.exec(kUpsert);
                }
                t4 = Clock::now();
            }
            db.exec("COMMIT");
            const auto t5 = Clock::now();
            totals.begin += secs(t0, t1);
            totals.history += secs(t1, t2);
            totals.stage += secs(t2, t3);
            totals.upsert += secs(t3, t4);
            totals.commit += secs(t4, t5);
        }
        const double cpu_end = process_cpu_s(backend_pid);
        totals.backend_cpu = cpu_start < 0 || cpu_end < 0 ? -1 : cpu_end - cpu_start;
    } catch (const std::exception& e) {
        error = e.what();
        ++ready;  // never leave the others waiting
    }
}

// The layout of postgis.defer_indexes on a migrated database: every partition not yet past
// gets the hot indexes instead of the closed ones (as create_history_partitions(..., p_hot)
// makes them), so that the rows, all recent, land in hot partitions.
constexpr const char* kHotLayout =
    "DO $hot$ DECLARE r record; i record; BEGIN "
    "FOR r IN SELECT partition_name FROM trackd.history_partitions() "
    "WHERE NOT is_default AND range_to > now() LOOP "
    "FOR i IN SELECT * FROM trackd.history_closed_indexes() LOOP "
    "EXECUTE format('DROP INDEX IF EXISTS trackd.%I', r.partition_name || i.suffix); END LOOP; "
    "FOR i IN SELECT * FROM trackd.history_hot_indexes() LOOP "
    "EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON trackd.%I %s', "
    "r.partition_name || i.suffix, r.partition_name, i.definition); END LOOP; "
    "END LOOP; END $hot$";

// A time partition by its bounds in microseconds since 2000-01-01 (binary COPY's timestamps).
struct PartitionBounds {
    std::string name;
    std::int64_t from = 0;
    std::int64_t to = 0;
};

std::vector<PartitionBounds> history_partitions(const std::string& dsn) {
    std::vector<PartitionBounds> out;
    for (const auto& line : Db(dsn).column(
             "SELECT partition_name || ' ' || ((extract(epoch FROM range_from) - 946684800) * "
             "1000000)::int8 || ' ' || ((extract(epoch FROM range_to) - 946684800) * "
             "1000000)::int8 "
             "FROM trackd.history_partitions() WHERE NOT is_default")) {
        std::istringstream in(line);
        PartitionBounds p;
        in >> p.name >> p.from >> p.to;
        out.push_back(p);
    }
    return out;
}

int run_load(const std::string& dsn, const fs::path& dir, bool upsert, std::size_t explain_batch,
             int connections, bool hot, bool to_partition) {
    if (hot) Db(dsn).exec(kHotLayout);
    const auto partitions = to_partition ? history_partitions(dsn) : std::vector<PartitionBounds>{};
    std::size_t routed = 0;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) {
        const auto name = e.path().filename().string();
        if (name.size() > 13 && name.ends_with(".history.copy")) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) die("no *.history.copy files in " + dir.string());

    // Everything is read before the clock starts: the limit is the database's, not the disk's.
    std::vector<LoadBatch> batches;
    batches.reserve(files.size());
    std::size_t rows = 0, stage_rows = 0, bytes = 0;
    for (const auto& f : files) {
        LoadBatch b;
        b.name = f.filename().string();
        b.name.resize(b.name.size() - std::string(".history.copy").size());
        const auto p = b.name.find("-p");
        b.partition = p == std::string::npos ? 0 : std::atoi(b.name.c_str() + p + 2);
        b.history = read_file(f);
        if (upsert) b.current = read_file(dir / (b.name + ".current.copy"));
        const auto scan = scan_copy(b.history);
        b.rows = scan.rows;
        b.batch_id = scan.batch_id;
        for (const auto& part : partitions) {
            if (scan.rows > 0 && scan.min_time >= part.from && scan.max_time < part.to) {
                b.target = part.name;
            }
        }
        if (to_partition && b.target.empty()) ++routed;
        b.stage_rows = upsert ? count_rows(b.current) : 0;
        rows += b.rows;
        stage_rows += b.stage_rows;
        bytes += b.history.size() + b.current.size();
        batches.push_back(std::move(b));
    }
    const std::string explain_name = explain_batch >= 1 && explain_batch <= batches.size()
                                         ? batches[explain_batch - 1].name
                                         : std::string();
    // Partition p goes to connection p % connections, as in trackd (batch.writers).
    std::vector<std::vector<const LoadBatch*>> shares(static_cast<std::size_t>(connections));
    for (const auto& b : batches) {
        shares[static_cast<std::size_t>(b.partition % connections)].push_back(&b);
    }
    std::vector<LoadTotals> totals(shares.size());
    std::vector<std::string> errors(shares.size());
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    Clock::time_point start;
    for (std::size_t i = 0; i < shares.size(); ++i) {
        threads.emplace_back(load_connection, std::cref(dsn), std::cref(shares[i]), upsert,
                             std::cref(explain_name), std::ref(totals[i]), std::ref(ready),
                             connections, std::ref(errors[i]));
    }
    while (ready.load() < connections) std::this_thread::yield();
    start = Clock::now();
    for (auto& t : threads) t.join();
    const double wall = std::chrono::duration<double>(Clock::now() - start).count();
    for (const auto& e : errors) {
        if (!e.empty()) die(e);
    }
    LoadTotals sum;
    for (const auto& t : totals) {
        sum.begin += t.begin;
        sum.history += t.history;
        sum.stage += t.stage;
        sum.upsert += t.upsert;
        sum.commit += t.commit;
        sum.backend_cpu =
            sum.backend_cpu < 0 || t.backend_cpu < 0 ? -1 : sum.backend_cpu + t.backend_cpu;
    }
    std::printf(
        "rows=%zu\nstage_rows=%zu\nbatches=%zu\nbytes=%zu\nconnections=%d\nseconds=%.3f\n"
        "rows_per_s=%.0f\n",
        rows, stage_rows, batches.size(), bytes, connections, wall,
        static_cast<double>(rows) / wall);
    // Statement times are summed over the connections (connection-seconds).
    std::printf(
        "begin_s=%.3f\ncopy_history_s=%.3f\ncopy_stage_s=%.3f\nupsert_s=%.3f\ncommit_s=%.3f\n"
        "backend_cpu_s=%.2f\nbatches_through_parent=%zu\n",
        sum.begin, sum.history, sum.stage, sum.upsert, sum.commit, sum.backend_cpu,
        to_partition ? routed : batches.size());
    return 0;
}

int usage() {
    std::fprintf(stderr,
                 "usage: trackd-bench-copy-limit export --dsn DSN --dir DIR [--order "
                 "time|vehicle|space]\n"
                 "       trackd-bench-copy-limit load --dsn DSN --dir DIR [--no-upsert] "
                 "[--explain-batch N] [--connections N] [--layout closed|hot] "
                 "[--history-target parent|partition]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) return usage();
    const std::string cmd = argv[1];
    std::string dsn;
    std::string dir;
    bool upsert = true;
    std::size_t explain_batch = 0;
    int connections = 1;
    Order order = Order::vehicle;
    bool hot = false;
    bool to_partition = false;
    for (int i = 2; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--dsn" && i + 1 < argc) {
            dsn = argv[++i];
        } else if (a == "--dir" && i + 1 < argc) {
            dir = argv[++i];
        } else if (a == "--explain-batch" && i + 1 < argc) {
            explain_batch = static_cast<std::size_t>(std::atoll(argv[++i]));
        } else if (a == "--connections" && i + 1 < argc) {
            connections = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--order" && i + 1 < argc) {
            const std::string o = argv[++i];
            if (o != "time" && o != "vehicle" && o != "space") return usage();
            order = o == "vehicle" ? Order::vehicle : o == "space" ? Order::space : Order::time;
        } else if (a == "--layout" && i + 1 < argc) {
            const std::string l = argv[++i];
            if (l != "closed" && l != "hot") return usage();
            hot = l == "hot";
        } else if (a == "--history-target" && i + 1 < argc) {
            const std::string t = argv[++i];
            if (t != "parent" && t != "partition") return usage();
            to_partition = t == "partition";
        } else if (a == "--no-upsert") {
            upsert = false;
        } else {
            return usage();
        }
    }
    if (dsn.empty() || dir.empty()) return usage();
    try {
        if (cmd == "export") return run_export(dsn, dir, order);
        if (cmd == "load")
            return run_load(dsn, dir, upsert, explain_batch, connections, hot, to_partition);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "trackd-bench-copy-limit: %s\n", e.what());
        return 1;
    }
    return usage();
}
