// trackd-bench-freshness: how long each message took from the producer to a committed
// PostgreSQL transaction (bench/freshness, docs/benchmarks.md).
//
//   trackd-bench-freshness --brokers B --topic T --log FILE [--skip-first-s S] [--series OUT]
//
// FILE is trackd-bench-watch's log: "seen_us previous_poll_us partition next_offset" each time
// trackd.kafka_offsets moved. Every message of the topic is read back from Kafka for its
// timestamp (CreateTime: when the fleet produced it). A message at (partition, offset) was
// committed by the first logged change with next_offset > offset, after previous_poll_us and
// no later than seen_us. Freshness = seen_us - timestamp (an upper bound; the poll interval
// is the resolution). Messages produced in the first --skip-first-s seconds are left out
// (warm-up). Prints key=value lines (milliseconds), with the median of the first and of the last
// 10 s of production: it grows when trackd falls behind. --series writes one line per second of
// production, "second count p50_ms p99_ms max_ms" (second 0 = the first message measured), to
// find where in a run the tail comes from.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <librdkafka/rdkafka.h>

namespace {

struct Change {
    long long next_offset;
    long long seen_us;
    long long previous_us;
};

double percentile(std::vector<double>& v, double q) {
    if (v.empty()) return NAN;
    const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
    const auto idx = std::min(k, v.size() - 1);
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(idx), v.end());
    return v[idx];
}

int usage() {
    std::fprintf(stderr,
                 "usage: trackd-bench-freshness --brokers B --topic T --log FILE "
                 "[--skip-first-s S] [--series OUT]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    std::string brokers, topic, log_path, series_path;
    double skip_first_s = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has = i + 1 < argc;
        if (a == "--brokers" && has) {
            brokers = argv[++i];
        } else if (a == "--topic" && has) {
            topic = argv[++i];
        } else if (a == "--log" && has) {
            log_path = argv[++i];
        } else if (a == "--skip-first-s" && has) {
            skip_first_s = std::atof(argv[++i]);
        } else if (a == "--series" && has) {
            series_path = argv[++i];
        } else {
            return usage();
        }
    }
    if (brokers.empty() || topic.empty() || log_path.empty()) return usage();

    std::map<int, std::vector<Change>> changes;
    {
        std::ifstream in(log_path);
        long long seen = 0, prev = 0, off = 0;
        int p = 0;
        while (in >> seen >> prev >> p >> off) changes[p].push_back(Change{off, seen, prev});
    }

    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    const auto set = [&](const char* k, const char* v) {
        if (rd_kafka_conf_set(conf, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
            std::fprintf(stderr, "trackd-bench-freshness: %s\n", err);
            std::exit(1);
        }
    };
    set("bootstrap.servers", brokers.c_str());
    set("group.id", "trackd-bench-freshness");
    set("enable.auto.commit", "false");
    set("enable.partition.eof", "true");
    rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (rk == nullptr) {
        std::fprintf(stderr, "trackd-bench-freshness: %s\n", err);
        return 1;
    }
    rd_kafka_poll_set_consumer(rk);

    rd_kafka_topic_t* rkt = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        md->topic_cnt != 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        std::fprintf(stderr, "trackd-bench-freshness: no metadata for topic %s\n", topic.c_str());
        return 1;
    }
    const int partitions = md->topics[0].partition_cnt;
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);

    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
    std::map<int, long long> high;
    int remaining = 0;
    for (int p = 0; p < partitions; ++p) {
        int64_t lo = 0, hi = 0;
        rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &lo, &hi, 10000);
        high[p] = hi;
        if (hi > lo) {
            rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = lo;
            ++remaining;
        }
    }
    rd_kafka_assign(rk, list);
    rd_kafka_topic_partition_list_destroy(list);

    long long messages = 0, uncommitted = 0, skipped = 0;
    long long first_ts_ms = -1;
    std::vector<double> upper;
    std::vector<double> lower;
    std::vector<double> first_window;                    // produced in the first 10 s measured
    std::vector<double> last_window;                     // produced in the last 10 s
    std::map<long long, std::vector<double>> by_second;  // by the second it was produced in
    struct Pending {
        long long ts_ms;
        int partition;
        long long offset;
    };
    std::vector<Pending> all;
    std::map<int, bool> finished;
    while (remaining > 0) {
        rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 1000);
        if (m == nullptr) continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (!finished[m->partition]) {
                finished[m->partition] = true;
                --remaining;
            }
        } else if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
            std::fprintf(stderr, "trackd-bench-freshness: %s\n", rd_kafka_message_errstr(m));
        } else {
            rd_kafka_timestamp_type_t type;
            const long long ts = rd_kafka_message_timestamp(m, &type);
            all.push_back(Pending{ts, m->partition, m->offset});
            if (first_ts_ms < 0 || ts < first_ts_ms) first_ts_ms = ts;
            if (m->offset + 1 >= high[m->partition] && !finished[m->partition]) {
                finished[m->partition] = true;
                --remaining;
            }
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);

    const long long skip_before_ms = first_ts_ms + static_cast<long long>(skip_first_s * 1000);
    long long last_ts_ms = 0;
    for (const auto& m : all) last_ts_ms = std::max(last_ts_ms, m.ts_ms);
    for (const auto& m : all) {
        ++messages;
        if (m.ts_ms < skip_before_ms) {
            ++skipped;
            continue;
        }
        const auto& cs = changes[m.partition];
        auto it =
            std::upper_bound(cs.begin(), cs.end(), m.offset,
                             [](long long off, const Change& c) { return off < c.next_offset; });
        if (it == cs.end()) {
            ++uncommitted;
            continue;
        }
        const double ms = static_cast<double>(it->seen_us) / 1000.0 - static_cast<double>(m.ts_ms);
        upper.push_back(ms);
        if (m.ts_ms < skip_before_ms + 10000) first_window.push_back(ms);
        if (m.ts_ms >= last_ts_ms - 10000) last_window.push_back(ms);
        if (!series_path.empty()) by_second[(m.ts_ms - skip_before_ms) / 1000].push_back(ms);
        lower.push_back(std::max(
            0.0, static_cast<double>(it->previous_us) / 1000.0 - static_cast<double>(m.ts_ms)));
    }
    const auto measured = static_cast<long long>(upper.size());
    double mean = 0;
    for (const double v : upper) mean += v;
    if (measured > 0) mean /= static_cast<double>(measured);
    std::printf("messages=%lld\nmeasured=%lld\nskipped_warmup=%lld\nuncommitted=%lld\n", messages,
                measured, skipped, uncommitted);
    std::printf("produce_span_s=%.1f\n", static_cast<double>(last_ts_ms - first_ts_ms) / 1000.0);
    std::printf("mean_ms=%.1f\n", mean);
    std::printf("p50_ms=%.1f\np90_ms=%.1f\np99_ms=%.1f\np999_ms=%.1f\nmax_ms=%.1f\n",
                percentile(upper, 0.50), percentile(upper, 0.90), percentile(upper, 0.99),
                percentile(upper, 0.999), percentile(upper, 1.0));
    std::printf("p50_lower_ms=%.1f\np99_lower_ms=%.1f\n", percentile(lower, 0.50),
                percentile(lower, 0.99));
    // Whether trackd kept up: freshness grows from the first window to the last when it did not.
    std::printf("p50_first_10s_ms=%.1f\np50_last_10s_ms=%.1f\n", percentile(first_window, 0.5),
                percentile(last_window, 0.5));
    if (!series_path.empty()) {
        std::ofstream out(series_path);
        for (auto& [second, v] : by_second) {
            char line[128];
            std::snprintf(line, sizeof line, "%lld %zu %.1f %.1f %.1f\n", second, v.size(),
                          percentile(v, 0.5), percentile(v, 0.99), percentile(v, 1.0));
            out << line;
        }
    }
    return uncommitted == 0 ? 0 : 3;
}
