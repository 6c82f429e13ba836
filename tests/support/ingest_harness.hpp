// End-to-end ingest tests: a fresh database and topic, the simulated fleet's manifest of what it
// sent, trackd processes, and the exact accounting every ingest test ends with.
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "support/child_process.hpp"
#include "support/kafka_admin.hpp"
#include "support/process.hpp"
#include "support/services.hpp"
#include "support/test_database.hpp"

namespace trackd::test {

struct ManifestEntry {
    int partition = 0;
    std::int64_t offset = 0;
    std::string kind;
    std::string reason;  // empty: trackd must accept it
    std::string vehicle_id;
    std::optional<std::int64_t> recorded_at_us;
};

using Coord = std::pair<int, std::int64_t>;

inline std::vector<std::string> split_csv(const std::string& line) {
    std::vector<std::string> out;
    std::string field;
    std::istringstream in(line);
    while (std::getline(in, field, ',')) out.push_back(field);
    if (!line.empty() && line.back() == ',') out.emplace_back();
    return out;
}

inline std::vector<ManifestEntry> read_manifest(const std::string& path) {
    std::vector<ManifestEntry> out;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#' || line.rfind("partition", 0) == 0) continue;
        auto f = split_csv(line);
        f.resize(6);
        ManifestEntry e;
        e.partition = std::stoi(f[0]);
        e.offset = std::stoll(f[1]);
        e.kind = f[2];
        e.reason = f[3];
        e.vehicle_id = f[4];
        if (!f[5].empty()) e.recorded_at_us = std::stoll(f[5]);
        out.push_back(std::move(e));
    }
    return out;
}

// The messages the fleet placed, by (partition, offset). A message librdkafka reported
// delivered without an offset (trackd-fleet says so; its line has offset -1001) has no place:
// see unplaced_messages().
inline std::map<Coord, ManifestEntry> load_manifest(const std::string& path) {
    std::map<Coord, ManifestEntry> out;
    for (auto& e : read_manifest(path)) {
        if (e.offset >= 0) out[{e.partition, e.offset}] = std::move(e);
    }
    return out;
}

// Messages reported delivered without an offset: each may be in the log (somewhere in its
// partition) or not at all. The accounting takes one only where the database holds a row at an
// offset no placed message has, with the same content.
inline std::vector<ManifestEntry> unplaced_messages(const std::string& path) {
    std::vector<ManifestEntry> out;
    for (auto& e : read_manifest(path)) {
        if (e.offset < 0) out.push_back(std::move(e));
    }
    return out;
}

class IngestHarness {
  public:
    // `group`: the consumer group (default trackd-<tag>). Tests with static members give one
    // of their own per run: the broker keeps static members past their stop, and a member that
    // comes back within session.timeout.ms gets its previous assignment back, even one of the
    // previous run's topic (docs/operations.md, `kafka.instance_id`).
    // The topic, and the directory after it, are named by the process and a count, so that a test
    // run again in the same process (--gtest_repeat) starts on an empty topic of its own: deleting
    // a topic is asynchronous, and one created again under its name may still hold its messages.
    explicit IngestHarness(const std::string& tag, int partitions, std::string group = {})
        : db_(tag, Schema::migrated),
          topic_("trackd-" + tag + "-" + std::to_string(getpid()) + "-" +
                 std::to_string(instances_++)),
          group_(group.empty() ? "trackd-" + tag : std::move(group)),
          dir_(::testing::TempDir() + topic_) {
        run_command("mkdir -p " + shell_quote(dir_));
        try {
            KafkaAdmin().create_topic(topic_, partitions);
        } catch (const std::exception& e) {
            ADD_FAILURE() << e.what();
        }
    }
    ~IngestHarness() {
        try {
            KafkaAdmin().delete_topic(topic_);
        } catch (...) {  // NOLINT(bugprone-empty-catch): best effort in a destructor
        }
    }

    [[nodiscard]] const TestDatabase& db() const { return db_; }
    [[nodiscard]] const std::string& topic() const { return topic_; }
    [[nodiscard]] const std::string& group() const { return group_; }
    [[nodiscard]] std::string manifest_path() const { return dir_ + "/manifest.csv"; }
    [[nodiscard]] std::string log_path() const { return dir_ + "/trackd.log"; }

    // `extra`: more trackd-fleet options (e.g. --start). `manifest`: where the fleet writes
    // what it sent; empty: manifest_path().
    std::vector<std::string> fleet_command(int vehicles, int messages, int rate = 0,
                                           const std::vector<std::string>& extra = {},
                                           const std::string& manifest = {}) const {
        std::vector<std::string> cmd = {std::string(TRACKD_BINARY_DIR) + "/tools/trackd-fleet",
                                        "--brokers",
                                        kafka_brokers(),
                                        "--topic",
                                        topic_,
                                        "--vehicles",
                                        std::to_string(vehicles),
                                        "--messages",
                                        std::to_string(messages),
                                        "--rate",
                                        std::to_string(rate),
                                        "--seed",
                                        "7",
                                        "--manifest",
                                        manifest.empty() ? manifest_path() : manifest,
                                        "--quiet"};
        cmd.insert(cmd.end(), extra.begin(), extra.end());
        return cmd;
    }

    // Runs the fleet to completion.
    void produce(int vehicles, int messages) {
        ChildProcess fleet(fleet_command(vehicles, messages), {}, dir_ + "/fleet.log");
        ASSERT_EQ(fleet.wait(), 0) << read_file(dir_ + "/fleet.log");
    }

    std::map<std::string, std::string> trackd_env() const {
        return {{"TRACKD_PG_DSN", db_.dsn()},
                {"TRACKD_KAFKA_BROKERS", kafka_brokers()},
                {"TRACKD_KAFKA_TOPIC", topic_},
                {"TRACKD_KAFKA_GROUP", group_},
                {"TRACKD_HTTP_ENABLED", "false"},
                // A killed instance leaves the group after this (the broker minimum is 6 s).
                {"TRACKD_KAFKA_PROPERTIES_SESSION_TIMEOUT_MS", "6000"}};
    }

    // `log`: where its output goes (default log_path(); give each of several instances its own).
    std::unique_ptr<ChildProcess> start_trackd(std::map<std::string, std::string> extra = {},
                                               const std::string& log = {}) {
        auto env = trackd_env();
        for (auto& [k, v] : extra) env[k] = v;
        return std::make_unique<ChildProcess>(std::vector<std::string>{trackd_binary(), "run"}, env,
                                              log.empty() ? log_path() : log);
    }
    [[nodiscard]] std::string dir() const { return dir_; }

    // Sum of stored next offsets for the topic.
    std::int64_t committed_messages() {
        db::Connection conn(db_.dsn(), "test");
        return std::stoll(conn.query("SELECT coalesce(sum(greatest(next_offset, 0)), 0) FROM "
                                     "trackd.kafka_offsets WHERE topic = $1 AND "
                                     "consumer_group = $2",
                                     {topic_, group_})
                              .at(0, 0));
    }

    // Each partition's stored next offset and owner epoch, one line each: what a failed drain
    // prints.
    std::string offsets_report() {
        db::Connection conn(db_.dsn(), "test");
        const auto r = conn.query(
            "SELECT kafka_partition, next_offset, owner_epoch FROM "
            "trackd.kafka_offsets WHERE topic = $1 AND consumer_group = $2 "
            "ORDER BY kafka_partition",
            {topic_, group_});
        std::string out = "stored offsets (partition next_offset owner_epoch):\n";
        for (int i = 0; i < r.rows(); ++i) {
            out += "  " + r.at(i, 0) + " " + r.at(i, 1) + " " + r.at(i, 2) + "\n";
        }
        return out;
    }

    // The highest owner epoch of the topic's partitions: it rises each time an instance claims.
    std::int64_t max_epoch() {
        db::Connection conn(db_.dsn(), "test");
        return std::stoll(conn.query("SELECT coalesce(max(owner_epoch), 0) FROM "
                                     "trackd.kafka_offsets WHERE topic = $1",
                                     {topic_})
                              .at(0, 0));
    }

    // Waits until the database holds offsets for every message sent. When the fleet has
    // messages without an offset (unplaced_messages), those may never have reached the log:
    // then drained means past every placed message of each partition, and all but those.
    bool wait_drained(std::int64_t messages, std::chrono::seconds timeout) {
        const auto until = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < until) {
            if (drained(messages)) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return false;
    }

    bool drained(std::int64_t messages) {
        const auto committed = committed_messages();
        if (committed >= messages) return true;
        const auto unplaced = static_cast<std::int64_t>(unplaced_messages(manifest_path()).size());
        if (unplaced == 0 || committed < messages - unplaced) return false;
        std::map<int, std::int64_t> ends;
        for (const auto& [coord, e] : load_manifest(manifest_path())) {
            ends[coord.first] = std::max(ends[coord.first], coord.second + 1);
        }
        db::Connection conn(db_.dsn(), "test");
        auto o = conn.query(
            "SELECT kafka_partition, next_offset FROM trackd.kafka_offsets WHERE topic = $1 AND "
            "consumer_group = $2",
            {topic_, group_});
        std::map<int, std::int64_t> stored;
        for (int i = 0; i < o.rows(); ++i) stored[std::stoi(o.at(i, 0))] = std::stoll(o.at(i, 1));
        for (const auto& [p, end] : ends) {
            if (stored[p] < end) return false;
        }
        return true;
    }

    static std::string read_file(const std::string& path) {
        std::ifstream in(path);
        std::ostringstream s;
        s << in.rdbuf();
        std::string text = s.str();
        return text.size() > 20000 ? text.substr(text.size() - 20000) : text;
    }

    // The exact accounting: history = accepted set, dead letters = rejected set with the right
    // reasons, no duplicates, current state = latest accepted per vehicle, offsets = end.
    // `with_rejected`: the fleet sent bad messages too (false: it sent only accepted ones).
    // The SIGKILL loop: while `fleet` produces, trackd (with `env`) is started, killed with
    // SIGKILL at a random moment once it has claimed its partitions and committed a batch of its
    // own (or 5 s passed), and started again, at least `min_kills` times and until the fleet is
    // done; then it runs once more until `messages` are drained and stops with SIGTERM.
    struct KillReport {
        int kills = 0;
        int after_progress = 0;  // kills after a commit of the killed instance's own
        bool drained = false;
    };
    KillReport kill_and_restart_until_drained(ChildProcess& fleet, std::int64_t messages,
                                              const std::map<std::string, std::string>& env,
                                              int min_kills, unsigned seed) {
        KillReport report;
        std::mt19937 rng(seed);
        std::uniform_int_distribution<int> run_ms(0, 400);
        while (report.kills < min_kills || fleet.running()) {
            const auto epoch_before = max_epoch();
            auto trackd = start_trackd(env);
            // Kill only once it owns its partitions and has committed a batch of its own, so
            // that each kill lands in the middle of ingest (reading, validating, committing).
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while (max_epoch() == epoch_before && std::chrono::steady_clock::now() < until) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
            if (max_epoch() == epoch_before) {
                ADD_FAILURE() << "trackd claimed nothing within 60 s\n" << read_file(log_path());
                return report;
            }
            const auto committed_at_claim = committed_messages();
            const auto progress_until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
            bool progressed = false;
            while (!progressed && std::chrono::steady_clock::now() < progress_until) {
                progressed = committed_messages() > committed_at_claim;
                if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(run_ms(rng)));
            if (!trackd->running()) {
                ADD_FAILURE() << "trackd stopped by itself\n" << read_file(log_path());
                return report;
            }
            trackd->kill(SIGKILL);
            trackd->wait();
            ++report.kills;
            if (progressed) ++report.after_progress;
            if (report.kills >= 200) {
                ADD_FAILURE() << "200 kills and the fleet is still producing";
                return report;
            }
        }
        EXPECT_EQ(fleet.wait(), 0);
        auto trackd = start_trackd(env);
        report.drained = wait_drained(messages, std::chrono::seconds(300));
        EXPECT_TRUE(report.drained) << read_file(log_path());
        trackd->kill(SIGTERM);
        EXPECT_TRUE(trackd->wait_for(std::chrono::seconds(30)))
            << "trackd did not stop within 30 s of SIGTERM\n"
            << read_file(log_path());
        return report;
    }

    void check_accounting(const std::map<Coord, ManifestEntry>& manifest,
                          bool with_rejected = true) {
        db::Connection conn(db_.dsn(), "test");
        std::map<Coord, const ManifestEntry*> accepted;
        std::map<Coord, const ManifestEntry*> rejected;
        std::map<int, std::int64_t> end_offsets;
        for (const auto& [coord, e] : manifest) {
            (e.reason.empty() ? accepted : rejected)[coord] = &e;
            end_offsets[coord.first] = std::max(end_offsets[coord.first], coord.second + 1);
        }
        ASSERT_FALSE(accepted.empty());
        ASSERT_EQ(rejected.empty(), !with_rejected);
        // Messages delivered without an offset that are in the database after all: placed where
        // the database has a row no placed message accounts for, with the same content.
        const auto unplaced = unplaced_messages(manifest_path());
        std::vector<ManifestEntry> placed;
        placed.reserve(unplaced.size());
        if (!unplaced.empty()) {
            std::vector<bool> used(unplaced.size(), false);
            const auto place = [&](const Coord& c, const auto& matches) {
                for (std::size_t i = 0; i < unplaced.size(); ++i) {
                    if (used[i] || unplaced[i].partition != c.first || !matches(unplaced[i])) {
                        continue;
                    }
                    used[i] = true;
                    placed.push_back(unplaced[i]);
                    placed.back().offset = c.second;
                    (placed.back().reason.empty() ? accepted : rejected)[c] = &placed.back();
                    end_offsets[c.first] = std::max(end_offsets[c.first], c.second + 1);
                    return;
                }
            };
            auto hu = conn.query(
                "SELECT kafka_partition, kafka_offset, vehicle_id, "
                "(extract(epoch FROM recorded_at) * 1000000)::bigint FROM "
                "trackd.vehicle_telemetry_history");
            for (int i = 0; i < hu.rows(); ++i) {
                const Coord c{std::stoi(hu.at(i, 0)), std::stoll(hu.at(i, 1))};
                if (manifest.count(c) != 0) continue;
                place(c, [&](const ManifestEntry& e) {
                    return e.reason.empty() && e.vehicle_id == hu.at(i, 2) && e.recorded_at_us &&
                           *e.recorded_at_us == std::stoll(hu.at(i, 3));
                });
            }
            auto du = conn.query(
                "SELECT kafka_partition, kafka_offset, reason_code FROM trackd.dead_letters "
                "WHERE topic = $1",
                {topic_});
            for (int i = 0; i < du.rows(); ++i) {
                const Coord c{std::stoi(du.at(i, 0)), std::stoll(du.at(i, 1))};
                if (manifest.count(c) != 0) continue;
                place(c, [&](const ManifestEntry& e) { return e.reason == du.at(i, 2); });
            }
        }

        auto h = conn.query(
            "SELECT kafka_partition, kafka_offset, vehicle_id, "
            "(extract(epoch FROM recorded_at) * 1000000)::bigint FROM "
            "trackd.vehicle_telemetry_history");
        std::set<Coord> history;
        int history_mismatch = 0;
        for (int i = 0; i < h.rows(); ++i) {
            const Coord c{std::stoi(h.at(i, 0)), std::stoll(h.at(i, 1))};
            EXPECT_TRUE(history.insert(c).second)
                << "duplicate history row " << c.first << "/" << c.second;
            auto it = accepted.find(c);
            if (it == accepted.end()) {
                ADD_FAILURE() << "history holds a message that should not be there: " << c.first
                              << "/" << c.second;
                continue;
            }
            if (it->second->vehicle_id != h.at(i, 2) ||
                it->second->recorded_at_us != std::stoll(h.at(i, 3))) {
                ++history_mismatch;
            }
        }
        EXPECT_EQ(history_mismatch, 0) << "history rows whose vehicle or time differ";
        EXPECT_EQ(history.size(), accepted.size()) << "accepted messages missing from history";

        auto d = conn.query(
            "SELECT kafka_partition, kafka_offset, reason_code FROM trackd.dead_letters "
            "WHERE topic = $1",
            {topic_});
        std::set<Coord> dead;
        int wrong_reason = 0;
        std::string example;
        for (int i = 0; i < d.rows(); ++i) {
            const Coord c{std::stoi(d.at(i, 0)), std::stoll(d.at(i, 1))};
            EXPECT_TRUE(dead.insert(c).second) << "duplicate dead letter";
            auto it = rejected.find(c);
            if (it == rejected.end()) {
                ADD_FAILURE() << "dead letter for a message that should be accepted: " << c.first
                              << "/" << c.second << " " << d.at(i, 2) << " kind "
                              << (manifest.count(c) != 0 ? manifest.at(c).kind : "unknown");
                continue;
            }
            if (it->second->reason != d.at(i, 2)) {
                ++wrong_reason;
                example =
                    it->second->kind + " expected " + it->second->reason + " got " + d.at(i, 2);
            }
        }
        EXPECT_EQ(wrong_reason, 0) << "e.g. " << example;
        EXPECT_EQ(dead.size(), rejected.size()) << "rejected messages missing from dead letters";

        // Current state: latest accepted per vehicle by timestamp, later offset on a tie.
        std::map<std::string, const ManifestEntry*> latest;
        for (const auto& [c, e] : accepted) {
            auto& best = latest[e->vehicle_id];
            if (best == nullptr || *e->recorded_at_us > *best->recorded_at_us ||
                (*e->recorded_at_us == *best->recorded_at_us && e->offset > best->offset)) {
                best = e;
            }
        }
        auto s = conn.query(
            "SELECT vehicle_id, (extract(epoch FROM last_updated) * 1000000)::bigint, "
            "kafka_partition, kafka_offset FROM trackd.vehicle_current_state");
        EXPECT_EQ(static_cast<size_t>(s.rows()), latest.size());
        int state_mismatch = 0;
        for (int i = 0; i < s.rows(); ++i) {
            auto it = latest.find(s.at(i, 0));
            if (it == latest.end() || *it->second->recorded_at_us != std::stoll(s.at(i, 1)) ||
                it->second->partition != std::stoi(s.at(i, 2)) ||
                it->second->offset != std::stoll(s.at(i, 3))) {
                ++state_mismatch;
            }
        }
        EXPECT_EQ(state_mismatch, 0) << "vehicles whose current state is not their latest";

        auto o = conn.query(
            "SELECT kafka_partition, next_offset FROM trackd.kafka_offsets WHERE topic = $1",
            {topic_});
        std::map<int, std::int64_t> stored;
        for (int i = 0; i < o.rows(); ++i) {
            stored[std::stoi(o.at(i, 0))] = std::stoll(o.at(i, 1));
        }
        EXPECT_EQ(stored, end_offsets);
    }

  private:
    static inline std::atomic<int> instances_{0};
    TestDatabase db_;
    std::string topic_;
    std::string group_;
    std::string dir_;
};

}  // namespace trackd::test
