// The fault suite (docs/reliability.md): trackd ingesting while the fleet produces, under process,
// database and broker faults, each case ending with the exact accounting of the ingest tests
// (history = accepted set, dead letters = rejected set with reasons, no duplicates, current
// state = latest per vehicle, stored offsets = end of each partition).
//
// Cases that stop or restart a service start their own PostgreSQL or Kafka (scripts/pg.sh,
// scripts/kafka.sh with a private state folder and free ports), so they never disturb other tests.
// Run on its own: `ctest --preset release -L faults`.
#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "support/archive_fixture.hpp"
#include "support/http_client.hpp"
#include "support/ingest_harness.hpp"
#include "support/log_wait.hpp"
#include "support/offsets_sampler.hpp"
#include "support/own_services.hpp"
#include "support/trackd_group.hpp"

namespace trackd::test {
namespace {

constexpr int kVehicles = 1000;

// Toxiproxy (scripts/toxiproxy.sh) on a free API port: TCP proxies in front of PostgreSQL and
// Kafka whose traffic the test slows down, resets or black-holes.
class Toxiproxy {
  public:
    Toxiproxy()
        : api_port_(free_port()),
          process_({binary(), "-host", "127.0.0.1", "-port", std::to_string(api_port_)}, {},
                   ::testing::TempDir() + "toxiproxy-" + std::to_string(getpid()) + ".log"),
          api_(api_port_) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (std::chrono::steady_clock::now() < until) {
            try {
                if (api_.request("GET", "/version").status == 200) return;
            } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): not up yet
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        throw std::runtime_error("toxiproxy did not start");
    }

    // A proxy listening on `listen_port` in front of 127.0.0.1:`upstream_port`.
    void add_proxy(const std::string& name, unsigned short listen_port,
                   unsigned short upstream_port) {
        call("POST", "/proxies",
             R"({"name":")" + name + R"(","listen":"127.0.0.1:)" + std::to_string(listen_port) +
                 R"(","upstream":"127.0.0.1:)" + std::to_string(upstream_port) + R"("})");
    }
    // type: latency {"latency":ms}, reset_peer {"timeout":0}, timeout {"timeout":ms}.
    void add_toxic(const std::string& proxy, const std::string& name, const std::string& type,
                   const std::string& attributes) {
        call("POST", "/proxies/" + proxy + "/toxics",
             R"({"name":")" + name + R"(","type":")" + type + R"(","attributes":)" + attributes +
                 "}");
    }
    void remove_toxic(const std::string& proxy, const std::string& name) {
        call("DELETE", "/proxies/" + proxy + "/toxics/" + name, "");
    }

  private:
    static std::string binary() {
        const auto r =
            run_command(std::string(TRACKD_SOURCE_DIR) + "/scripts/toxiproxy.sh install");
        if (r.exit_code != 0) throw std::runtime_error("toxiproxy.sh install failed:\n" + r.output);
        auto path = r.output;
        path = path.substr(0, path.find_last_not_of("\n") + 1);
        return path.substr(path.rfind('\n') + 1);
    }
    void call(const std::string& method, const std::string& target, const std::string& body) {
        const auto r = api_.request(method, target, body, "application/json");
        if (r.status >= 300) {
            throw std::runtime_error("toxiproxy " + method + " " + target + ": " +
                                     std::to_string(r.status) + " " + r.body);
        }
    }

    unsigned short api_port_;
    ChildProcess process_;
    HttpClient api_;
};

unsigned short port_of(const std::string& dsn) {
    const auto at = dsn.rfind('@');
    const auto colon = dsn.find(':', at);
    return static_cast<unsigned short>(std::stoi(dsn.substr(colon + 1, dsn.find('/', colon))));
}

// Resident set size of a process in bytes (0 once it is gone).
std::int64_t rss_bytes(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
    }
    return 0;
}

constexpr const char* kClaimed = "claimed partition";
constexpr const char* kFenced = "commit refused by the epoch fence";

// Three instances in one consumer group while the fleet produces. One holds a batch it read
// (TRACKD_TEST_INGEST_PAUSE_AT stops its commit thread before the commit) and is frozen with
// SIGSTOP past the session timeout: the group gives its partitions to the others, whose claims
// bump the epochs. Resumed and released, its commit of that batch must be refused by the epoch
// fence, and it must rejoin. Then instances are killed, stopped and added.
TEST(Faults, ScaleOutWithAFrozenInstanceFencedByTheEpoch) {
    IngestHarness h("zombie", 6);
    constexpr int kMessages = 90000;
    ChildProcess fleet(h.fleet_command(kVehicles, kMessages, 3000), {}, h.dir() + "/fleet.log");
    const std::map<std::string, std::string> env = {};
    auto log = [&](const std::string& name) { return h.dir() + "/trackd-" + name + ".log"; };
    auto a = h.start_trackd(env, log("a"));
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] {
        return count_in_file(log("a"), kClaimed) > 0;
    })) << IngestHarness::read_file(log("a"));
    const auto release = h.dir() + "/release-zombie";
    auto b =
        h.start_trackd({{"TRACKD_TEST_INGEST_PAUSE_AT", "before-commit@" + release}}, log("b"));
    auto c = h.start_trackd(env, log("c"));
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] {
        return count_in_file(log("b"), "ingest paused at before-commit") > 0 &&
               count_in_file(log("c"), kClaimed) > 0;
    })) << IngestHarness::read_file(log("b"));

    const auto b_claims = count_in_file(log("b"), kClaimed);
    const auto b_epochs = claimed_epochs(log("b"));
    ASSERT_FALSE(b_epochs.empty());
    b->kill(SIGSTOP);
    // Every partition the frozen instance claimed is claimed again by another, with a higher
    // epoch: whichever of them its held batch reads, its commit must meet the fence. (A count
    // of the others' claims was not enough: they re-claim their own partitions in the same
    // rebalance, and a batch of a partition not yet claimed elsewhere commits, rightly.)
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] {
        auto others = claimed_epochs(log("a"));
        for (const auto& [p, e] : claimed_epochs(log("c"))) others[p] = std::max(others[p], e);
        return std::all_of(b_epochs.begin(), b_epochs.end(),
                           [&](const auto& pe) { return others[pe.first] > pe.second; });
    })) << "the group did not move the frozen instance's partitions";
    std::this_thread::sleep_for(std::chrono::seconds(2));
    b->kill(SIGCONT);
    run_command("touch " + shell_quote(release));
    ASSERT_TRUE(
        wait_until(std::chrono::seconds(60), [&] { return count_in_file(log("b"), kFenced) > 0; }))
        << "the resumed instance's stale batch was not refused by the fence\n"
        << IngestHarness::read_file(log("b"));
    // It rejoins the group and claims partitions again.
    ASSERT_TRUE(wait_until(std::chrono::seconds(90), [&] {
        return count_in_file(log("b"), kClaimed) > b_claims;
    })) << IngestHarness::read_file(log("b"));

    // Kill one, stop one cleanly, add one.
    c->kill(SIGKILL);
    c->wait();
    auto d = h.start_trackd(env, log("d"));
    a->kill(SIGTERM);
    ASSERT_TRUE(a->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(a->exit_code(), 0) << IngestHarness::read_file(log("a"));

    ASSERT_EQ(fleet.wait(), 0);
    ASSERT_TRUE(h.wait_drained(kMessages, std::chrono::seconds(300)))
        << h.offsets_report() << IngestHarness::read_file(log("b"))
        << IngestHarness::read_file(log("d"));
    for (auto* p : {b.get(), d.get()}) {
        EXPECT_TRUE(p->running());
        p->kill(SIGTERM);
        EXPECT_TRUE(p->wait_for(std::chrono::seconds(30)));
        EXPECT_EQ(p->exit_code(), 0);
    }
    std::printf("[ measured ] %zu commit(s) of the frozen instance refused by the fence\n",
                count_in_file(log("b"), kFenced));
    h.check_accounting(load_manifest(h.manifest_path()));
}

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// One instance of three stops INSIDE an open batch transaction (TRACKD_TEST_INGEST_PAUSE_AT
// after-offsets: its offsets UPDATE done, so it holds its partitions' kafka_offsets row locks)
// and is frozen there with SIGSTOP. The others must go on committing their partitions, and the
// frozen one's partitions must move on: the group moves them after the session timeout (6 s),
// the new owner's claim waits for the row locks, and the server ends the frozen session after
// pg.idle_in_transaction_timeout_ms (10 s here), which frees them. Thawed and released, the
// frozen instance's batch must be refused by the fence. Times are measured and printed, not
// asserted (docs/reliability.md gives the bound).
TEST(Faults, InstanceFrozenInsideItsBatchTransactionLosesItsPartitionsInBoundedTime) {
    IngestHarness h("frozentx", 6);
    constexpr int kMessages = 80000;
    ChildProcess fleet(h.fleet_command(kVehicles, kMessages, 2000), {}, h.dir() + "/fleet.log");
    TrackdGroup group(h, {{"TRACKD_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS", "10000"}});
    group.start("a", false);
    group.start("c", false);
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] {
        return group.count("a", kClaimed) > 0 && group.count("c", kClaimed) > 0;
    })) << IngestHarness::read_file(group.log("a"));
    const auto release = h.dir() + "/release-frozen";
    group.start("b", false, {{"TRACKD_TEST_INGEST_PAUSE_AT", "after-offsets@" + release}});
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] {
        return group.count("b", "ingest paused at after-offsets") > 0;
    })) << IngestHarness::read_file(group.log("b"));
    const auto paused_at = std::chrono::steady_clock::now();
    // Its join is an incremental rebalance in two phases (revoke, then assign): freezing it
    // between them would leave the partitions in transit unowned until its session times out.
    // So it is frozen once no assignment changed for 1.5 s (or 4 s after the pause at most; the
    // idle-in-transaction clock runs from the pause).
    auto changes = [&] {
        std::size_t n = 0;
        for (const auto* i : {"a", "b", "c"}) {
            n += group.count(i, "partitions assigned") + group.count(i, "partitions revoked");
        }
        return n;
    };
    auto seen = changes();
    auto quiet_since = paused_at;
    wait_until(std::chrono::seconds(4), [&] {
        const auto now = changes();
        if (now != seen) {
            seen = now;
            quiet_since = std::chrono::steady_clock::now();
        }
        return std::chrono::steady_clock::now() - quiet_since >= std::chrono::milliseconds(1500);
    });
    group.freeze("b");
    const auto frozen_at = std::chrono::steady_clock::now();
    OffsetsSampler sampler(h.db().dsn(), h.topic(), h.group(),
                           [&](std::int64_t stored) { return stored < kMessages; });

    // b's partitions: those whose stored epoch is the one b claimed. The others': those a or c
    // holds (claimed and not revoked since). A partition revoked from one of them for b's join
    // and not assigned yet is neither: the second phase of b's join may wait for b, which is
    // paused, until its session times out; such a partition is in transit, stalled by design.
    std::set<int> mine;
    std::set<int> others;
    std::set<int> in_transit;
    ASSERT_TRUE(wait_until(std::chrono::seconds(10), [&] { return !sampler.samples().empty(); }));
    const auto at_freeze = sampler.latest();
    {
        std::map<int, std::int64_t> b_epoch;
        std::set<int> held;  // by a or c
        for (const auto* instance : {"a", "b", "c"}) {
            std::ifstream in(group.log(instance));
            const bool is_b = std::string(instance) == "b";
            for (std::string line; std::getline(in, line);) {
                if (line.find(kClaimed) != std::string::npos) {
                    const int p = std::stoi(log_value(line, "partition"));
                    if (is_b) {
                        b_epoch[p] = std::stoll(log_value(line, "epoch"));
                    } else {
                        held.insert(p);
                    }
                } else if (!is_b && line.find("partitions revoked") != std::string::npos) {
                    std::stringstream list(log_value(line, "partitions"));
                    for (std::string p; std::getline(list, p, ',');) {
                        if (!p.empty() && std::isdigit(static_cast<unsigned char>(p[0])) != 0) {
                            held.erase(std::stoi(p));
                        }
                    }
                }
            }
        }
        for (const auto& [p, row] : at_freeze.rows) {
            const auto it = b_epoch.find(p);
            if (it != b_epoch.end() && it->second == row.epoch) {
                mine.insert(p);
            } else {
                (held.count(p) != 0 ? others : in_transit).insert(p);
            }
        }
    }
    ASSERT_FALSE(mine.empty()) << IngestHarness::read_file(group.log("b"));
    ASSERT_FALSE(others.empty());

    // Its partitions move on: claimed under a new epoch, then their offsets rise.
    auto claimed = [&](const OffsetsSample& s) {
        for (const auto p : mine) {
            if (s.rows.at(p).epoch <= at_freeze.rows.at(p).epoch) return false;
        }
        return true;
    };
    auto moving = [&](const OffsetsSample& s) {
        for (const auto p : mine) {
            if (s.rows.at(p).epoch <= at_freeze.rows.at(p).epoch ||
                s.rows.at(p).next <= at_freeze.rows.at(p).next) {
                return false;
            }
        }
        return true;
    };
    ASSERT_TRUE(wait_until(std::chrono::seconds(120), [&] { return moving(sampler.latest()); }))
        << "the frozen instance's partitions did not move on\n"
        << IngestHarness::read_file(group.log("a")) << IngestHarness::read_file(group.log("c"));
    const auto claim = sampler.first(frozen_at, claimed);
    const auto moved = sampler.first(frozen_at, moving);
    ASSERT_TRUE(claim && moved);
    // Meanwhile every partition of the others kept committing.
    Stall others_stall;
    for (const auto p : others) {
        const std::set<int> only = {p};
        EXPECT_GT(moved->sum(&only), at_freeze.sum(&only))
            << "partition " << p << " of the other instances did not commit while one was frozen";
        others_stall = std::max(others_stall, sampler.longest_stall(frozen_at, moved->at, &only),
                                [](const Stall& x, const Stall& y) { return x.length < y.length; });
    }
    std::printf(
        "[ measured ] frozen in its batch transaction (SIGSTOP %.1f s after the pause): its %zu "
        "partition(s) claimed again %.1f s after SIGSTOP (%.1f s after the pause), committing "
        "after %.1f s (%.1f s); session timeout 6 s, idle-in-transaction timeout 10 s; the "
        "others' %zu partitions: longest pause of one meanwhile %.1f s (%zu partition(s) in "
        "transit between a and c left out)\n",
        seconds_between(paused_at, frozen_at), mine.size(), seconds_between(frozen_at, claim->at),
        seconds_between(paused_at, claim->at), seconds_between(frozen_at, moved->at),
        seconds_between(paused_at, moved->at), others.size(),
        static_cast<double>(others_stall.length.count()) / 1000.0, in_transit.size());

    // Thawed and released: its batch transaction is gone (ended by the server), and its retry
    // is refused by the fence. It rejoins and claims again.
    const auto b_claims = group.count("b", kClaimed);
    group.thaw("b");
    run_command("touch " + shell_quote(release));
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] { return group.count("b", kFenced) > 0; }))
        << "the thawed instance's batch was not refused by the fence\n"
        << IngestHarness::read_file(group.log("b"));
    ASSERT_TRUE(wait_until(std::chrono::seconds(90), [&] {
        return group.count("b", kClaimed) > b_claims;
    })) << IngestHarness::read_file(group.log("b"));

    ASSERT_EQ(fleet.wait(), 0);
    ASSERT_TRUE(h.wait_drained(kMessages, std::chrono::seconds(300)))
        << h.offsets_report() << group.logs();
    sampler.stop();
    for (const auto& n : group.names()) EXPECT_TRUE(group.running(n)) << n;
    group.stop_all();
    // The server ended its session: the thawed instance found its connection closed.
    EXPECT_GT(count_in_file(group.log("b"), "server closed the connection"), 0u)
        << IngestHarness::read_file(group.log("b"));
    h.check_accounting(load_manifest(h.manifest_path()));
}

// Three static members (kafka.instance_id inst-a/b/c) with small batches (50 rows), first a quick
// restart of one (SIGKILL, started again at once with the same id): no partition may move
// (no assignment or revocation in the others' logs, no epoch of theirs bumped). Then about a
// minute of rounds of "one frozen 10 s while another is SIGKILLed and restarted at once, then
// the third SIGKILLed and restarted 2 s later". The test samples the stored offsets every
// 100 ms and prints the group's longest window with no commit at all while messages waited.
TEST(Faults, StaticMembersUnderRepeatedKillAndFreezeWithSmallBatches) {
    IngestHarness h("chaos", 6, "trackd-chaos-" + std::to_string(getpid()));
    constexpr int kMessages = 100000;
    constexpr int kRate = 1000;
    ChildProcess fleet(h.fleet_command(kVehicles, kMessages, kRate), {}, h.dir() + "/fleet.log");
    TrackdGroup group(h, {{"TRACKD_BATCH_MAX_ROWS", "50"}});
    for (const auto* n : {"a", "b", "c"}) group.start(n, true);
    OffsetsSampler sampler(h.db().dsn(), h.topic(), h.group(),
                           [&](std::int64_t stored) { return stored < kMessages; });
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] {
        const auto s = sampler.latest();
        if (s.rows.size() != 6) return false;
        for (const auto& [p, r] : s.rows) {
            if (r.next < 0) return false;
        }
        return true;
    })) << IngestHarness::read_file(group.log("a"));
    // The assignment settles: every member holds partitions (the first to start may hold all
    // six for seconds before the others join, on a busy machine), then nothing is assigned or
    // revoked for 3 s.
    auto moves = [&](const std::string& n) {
        return group.count(n, "partitions assigned") + group.count(n, "partitions revoked");
    };
    std::size_t settled = 0;
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] {
        for (const auto* n : {"a", "b", "c"}) {
            if (group.count(n, kClaimed) == 0) return false;
        }
        const auto now = moves("a") + moves("b") + moves("c");
        if (now != settled) {
            settled = now;
            std::this_thread::sleep_for(std::chrono::seconds(3));
            return false;
        }
        return true;
    }));

    // A quick restart of a static member moves no partition.
    const auto before = sampler.latest();
    const auto a_moves = moves("a");
    const auto c_moves = moves("c");
    const auto b_lines = line_count(group.log("b"));
    const auto quick = std::chrono::steady_clock::now();
    group.sigkill("b");
    group.restart("b");
    ASSERT_TRUE(wait_until(std::chrono::seconds(30), [&] {
        return !claimed_partitions(group.log("b"), b_lines).empty();
    })) << IngestHarness::read_file(group.log("b"));
    std::this_thread::sleep_for(std::chrono::seconds(3));
    const auto b_back = claimed_partitions(group.log("b"), b_lines);
    const auto after = sampler.latest();
    std::set<int> bumped;
    for (const auto& [p, r] : after.rows) {
        if (r.epoch != before.rows.at(p).epoch) bumped.insert(p);
    }
    EXPECT_EQ(moves("a"), a_moves) << "a restart of a static member moved partitions of a\n"
                                   << IngestHarness::read_file(group.log("a"));
    EXPECT_EQ(moves("c"), c_moves) << "a restart of a static member moved partitions of c\n"
                                   << IngestHarness::read_file(group.log("c"));
    EXPECT_EQ(bumped, b_back) << "only the restarted member's own partitions may be claimed again";
    // How long its partitions waited: claimed again, then committing again.
    const auto reclaimed = sampler.first(quick, [&](const OffsetsSample& s) {
        return std::all_of(b_back.begin(), b_back.end(),
                           [&](int p) { return s.rows.at(p).epoch != before.rows.at(p).epoch; });
    });
    const auto recommitted = sampler.first(quick, [&](const OffsetsSample& s) {
        return std::all_of(b_back.begin(), b_back.end(), [&](int p) {
            return s.rows.at(p).epoch != before.rows.at(p).epoch &&
                   s.rows.at(p).next > before.rows.at(p).next;
        });
    });
    std::printf(
        "[ measured ] quick restart of static member b: its %zu partition(s) claimed again "
        "%.1f s and committing %.1f s after the SIGKILL; assignments/revocations in the others' "
        "logs: %zu\n",
        b_back.size(), seconds_between(quick, reclaimed.value_or(after).at),
        seconds_between(quick, recommitted.value_or(after).at),
        moves("a") + moves("c") - a_moves - c_moves);

    // Kill, restart and freeze for about a minute.
    const auto chaos_from = std::chrono::steady_clock::now();
    const auto rounds = run_chaos(group, ChaosPlan{std::chrono::seconds(55)});
    const auto chaos_to = std::chrono::steady_clock::now();
    ASSERT_EQ(fleet.wait(), 0) << IngestHarness::read_file(h.dir() + "/fleet.log");
    ASSERT_TRUE(h.wait_drained(kMessages, std::chrono::seconds(300)))
        << h.offsets_report() << group.logs();
    sampler.stop();
    const auto stall = sampler.longest_stall(chaos_from, chaos_to);
    const auto whole = sampler.longest_stall(quick, std::chrono::steady_clock::now());
    // And the longest of one partition alone (a frozen or killed owner's partition waits for
    // the session timeout, the rebalance and the claim).
    Stall one;
    int one_partition = -1;
    for (int p = 0; p < 6; ++p) {
        const std::set<int> only = {p};
        const auto s = sampler.longest_stall(chaos_from, chaos_to, &only);
        if (s.length > one.length) {
            one = s;
            one_partition = p;
        }
    }
    std::size_t fenced = 0;
    for (const auto& n : group.names()) fenced += group.count(n, kFenced);
    std::printf(
        "[ measured ] %d chaos round(s) in %.0f s: longest window with no commit in the group "
        "while messages waited: %.1f s (at %.1f s into the chaos); over the whole run %.1f s; "
        "longest for one partition: %.1f s (partition %d at %.1f s); %zu batch(es) refused by "
        "the fence\n",
        rounds, seconds_between(chaos_from, chaos_to),
        static_cast<double>(stall.length.count()) / 1000.0, seconds_between(chaos_from, stall.from),
        static_cast<double>(whole.length.count()) / 1000.0,
        static_cast<double>(one.length.count()) / 1000.0, one_partition,
        seconds_between(chaos_from, one.from), fenced);
    // Every instance is still up, except one that librdkafka declared fenced: a static member
    // thawed after its session expired can have an offset commit (lag monitoring) answered
    // FENCED_INSTANCE_ID, which librdkafka makes a fatal consumer error; trackd then exits 1 with
    // that message for its supervisor to restart it (docs/reliability.md, Limits). Its
    // partitions moved on; the accounting below is exact either way.
    int fenced_exits = 0;
    for (const auto& n : group.names()) {
        if (group.running(n)) continue;
        const bool fenced_fatal =
            group.count(n, "Static consumer fenced by other consumer with same group.instance.id") >
                0 &&
            group.count(n, "trackd: kafka: fatal consumer error") > 0;
        EXPECT_TRUE(fenced_fatal) << n << " stopped for another reason:\n"
                                  << IngestHarness::read_file(group.log(n));
        ++fenced_exits;
    }
    std::printf("[ measured ] instances that exited on librdkafka's fatal FENCED_INSTANCE_ID: %d\n",
                fenced_exits);
    group.stop_all();
    h.check_accounting(load_manifest(h.manifest_path()));
}

// A reader idle in a transaction on the history table (an analyst's QGIS or psql session: BEGIN;
// SELECT count(*) ...; then nothing) for over a minute, while trackd needs new partitions (hourly,
// none there: the test drops the ready-made day partitions, and the fleet's times cross an hour
// boundary) and while retention runs (`trackd archive maintain`, an old empty partition due).
// Ingest must go on committing throughout (its rows go to the DEFAULT partition), the partition
// DDL and the retention DROP must give way (log lines), and once the reader is gone a later try
// must create the partitions and move the rows out of DEFAULT, and retention must drop the old
// partition.
TEST(Faults, LongReaderIdleInTransactionDefersPartitionDdlNotIngest) {
    IngestHarness h("longreader", 4);
    ArchiveFixture archive(h.db().dsn(), "longreader");
    db::Connection admin(h.db().dsn(), "trackd test");
    // No partition from two hours ago on (the migration made day partitions up to a week
    // ahead; they are empty), and one old partition for retention to drop.
    {
        auto r = admin.query(
            "SELECT partition_name FROM trackd.history_partitions() WHERE NOT is_default AND "
            "range_to > now() - interval '2 hours'");
        for (int i = 0; i < r.rows(); ++i) {
            admin.exec_script("DROP TABLE trackd." + r.at(i, 0));
        }
        admin.exec_script(
            "SELECT trackd.create_history_partitions('2020-01-01', '2020-01-02', 'day')");
    }
    // The fleet sends one round of 1000 vehicles per second from 40 s before the current hour
    // began (its positions' times cross the hour 40 s in), for 110 s.
    const auto start = admin.query(
        "SELECT to_char(date_trunc('hour', now() AT TIME ZONE 'UTC') - interval '40 seconds', "
        "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')");
    constexpr int kMessages = 110000;
    const std::map<std::string, std::string> retention = {{"TRACKD_POSTGIS_RETENTION", "30 days"}};
    auto reader = std::make_unique<db::Connection>(h.db().dsn(), "long reader");
    reader->exec_script("BEGIN; SELECT count(*) FROM trackd.vehicle_telemetry_history");
    const auto reader_from = std::chrono::steady_clock::now();
    ChildProcess fleet(h.fleet_command(kVehicles, kMessages, 1000, {"--start", start.at(0, 0)}), {},
                       h.dir() + "/fleet.log");
    auto trackd = h.start_trackd({{"TRACKD_POSTGIS_PARTITION_INTERVAL", "hour"}});
    OffsetsSampler sampler(h.db().dsn(), h.topic(), h.group(),
                           [&](std::int64_t stored) { return stored < kMessages; });
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] { return h.committed_messages() > 0; }))
        << IngestHarness::read_file(h.log_path());
    constexpr const char* kDeferred = "history partitions not created: a lock is held";
    ASSERT_TRUE(wait_until(std::chrono::seconds(30), [&] {
        return count_in_file(h.log_path(), kDeferred) > 0;
    })) << IngestHarness::read_file(h.log_path());

    // Retention while the reader holds on: it gives way after postgis.ddl_lock_timeout_ms.
    std::this_thread::sleep_for(std::chrono::seconds(10));
    const auto maintain_from = std::chrono::steady_clock::now();
    const auto put_off = archive.archive("maintain", retention);
    const auto maintain_s = seconds_between(maintain_from, std::chrono::steady_clock::now());
    EXPECT_EQ(put_off.exit_code, 0) << put_off.output;
    EXPECT_NE(put_off.output.find("retention put off: a lock is held"), std::string::npos)
        << put_off.output;

    // The reader stays for at least 60 s, and until a try after that was deferred too (tries
    // come every 30 s), so that the partitions are made by a try after it is gone.
    std::this_thread::sleep_until(reader_from + std::chrono::seconds(58));
    const auto deferred_before = count_in_file(h.log_path(), kDeferred);
    std::this_thread::sleep_until(reader_from + std::chrono::seconds(60));
    EXPECT_TRUE(wait_until(std::chrono::seconds(40), [&] {
        return count_in_file(h.log_path(), kDeferred) > deferred_before;
    }));
    auto default_rows = [&] {
        return std::stoll(
            admin.query("SELECT count(*) FROM trackd.vehicle_telemetry_history_default").at(0, 0));
    };
    auto hourly = [&] {
        return std::stoll(admin
                              .query("SELECT count(*) FROM trackd.history_partitions() WHERE "
                                     "partition_name ~ '_p[0-9]{10}$'")
                              .at(0, 0));
    };
    const auto in_default = default_rows();
    EXPECT_GT(in_default, 0) << "the rows of the reader's time should be in the DEFAULT partition";
    EXPECT_EQ(hourly(), 0) << "partitions were created while the reader held its lock";
    const auto reader_to = std::chrono::steady_clock::now();
    const auto deferred = count_in_file(h.log_path(), kDeferred);
    reader->exec_script("COMMIT");
    reader.reset();
    const auto during = sampler.longest_stall(reader_from, reader_to);
    const auto stored_from = sampler.samples().front().sum();
    const auto stored_to = sampler.latest().sum();
    EXPECT_GT(stored_to, stored_from);
    EXPECT_GT(deferred, 0u);
    // Afterwards: partitions created on a later try, the rows moved out of DEFAULT.
    const auto created_wait = std::chrono::steady_clock::now();
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] { return hourly() > 0; }))
        << IngestHarness::read_file(h.log_path());
    const auto created_s = seconds_between(created_wait, std::chrono::steady_clock::now());
    // Retention's DROP also gives way to a batch transaction longer than its lock timeout (a
    // loaded machine): it is tried again at the next maintenance, as in production.
    auto old_partitions = [&] {
        return std::stoll(admin
                              .query("SELECT count(*) FROM trackd.history_partitions() WHERE "
                                     "partition_name = 'vehicle_telemetry_history_p20200101'")
                              .at(0, 0));
    };
    std::string maintained;
    for (int i = 0; i < 5 && old_partitions() > 0; ++i) {
        const auto dropped = archive.archive("maintain", retention);
        EXPECT_EQ(dropped.exit_code, 0) << dropped.output;
        maintained += dropped.output;
    }
    EXPECT_EQ(old_partitions(), 0)
        << "five maintenances did not drop the old partition once the reader was gone\n"
        << maintained;

    ASSERT_EQ(fleet.wait(), 0) << IngestHarness::read_file(h.dir() + "/fleet.log");
    ASSERT_TRUE(wait_until(std::chrono::seconds(300), [&] {
        return !trackd->running() || h.committed_messages() >= kMessages;
    }));
    ASSERT_TRUE(trackd->running()) << IngestHarness::read_file(h.log_path());
    sampler.stop();
    EXPECT_EQ(default_rows(), 0) << "rows left in the DEFAULT partition\n"
                                 << IngestHarness::read_file(h.log_path());
    std::printf(
        "[ measured ] reader idle in transaction %.0f s: stored offsets %lld -> %lld meanwhile, "
        "longest pause in commits %.1f s; partition DDL deferred %zu time(s); retention put off "
        "in %.1f s; %lld hourly partitions created %.1f s after the reader ended, moving %lld "
        "rows out of DEFAULT\n",
        seconds_between(reader_from, reader_to), static_cast<long long>(stored_from),
        static_cast<long long>(stored_to), static_cast<double>(during.length.count()) / 1000.0,
        deferred, maintain_s, static_cast<long long>(hourly()), created_s,
        static_cast<long long>(in_default));
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(trackd->exit_code(), 0);
    h.check_accounting(load_manifest(h.manifest_path()));
}

// PostgreSQL stopped for 30 s while the fleet keeps producing and the archiver is inside a
// catalog transaction: trackd stays up, pauses fetching at its in-flight limit (memory bounded),
// /readyz answers 503 until the database is back; then an immediate-mode restart (a crash, from
// PostgreSQL's side) during ingest and archiving. Ends with the exact accounting and
// archive = history.
TEST(Faults, PostgresqlStoppedFor30sThenCrashRestartedWithBoundedMemory) {
    OwnPostgres pg("pgstop");
    IngestHarness h("pgstop", 4);
    constexpr int kMessages = 600000;
    constexpr std::int64_t kInflight = 8 << 20;
    // What trackd may hold beyond batch.inflight_bytes: librdkafka's prefetch queue (bounded by
    // queued.max.messages.kbytes per partition, 1 MiB here) and the process's fixed footprint
    // (code, GEOS/PROJ, Arrow, connections); docs/reliability.md gives the measured figures.
    constexpr std::int64_t kAllowance = 128LL << 20;
    const auto http_port = free_port();
    // The archiver runs inside trackd and stops inside its first catalog transaction until
    // `release` exists: PostgreSQL goes away in the middle of an archive commit.
    ArchiveFixture archive(h.db().dsn(), "pgstop");
    const auto release = h.dir() + "/release-archive";
    auto env = archive.env({{"TRACKD_ARCHIVE_ENABLED", "true"},
                            {"TRACKD_TEST_ARCHIVE_PAUSE_AT", "catalog-transaction@" + release}});
    env.insert({{"TRACKD_BATCH_MAX_BYTES", std::to_string(4 << 20)},
                {"TRACKD_BATCH_INFLIGHT_BYTES", std::to_string(kInflight)},
                {"TRACKD_KAFKA_PROPERTIES_QUEUED_MAX_MESSAGES_KBYTES", "1024"},
                {"TRACKD_HTTP_ENABLED", "true"},
                {"TRACKD_HTTP_LISTEN", "127.0.0.1:" + std::to_string(http_port)}});
    auto trackd = h.start_trackd(env);
    HttpClient http(http_port);
    auto ready_status = [&] {
        try {
            return http.request("GET", "/readyz").status;
        } catch (const std::exception&) {
            return 0;
        }
    };
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] { return ready_status() == 200; }))
        << IngestHarness::read_file(h.log_path());
    ChildProcess fleet(h.fleet_command(kVehicles, kMessages, 20000), {}, h.dir() + "/fleet.log");
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] { return h.committed_messages() > 0; }));
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] {
        return count_in_file(h.log_path(), "archive paused at catalog-transaction") > 0;
    })) << IngestHarness::read_file(h.log_path());

    ASSERT_EQ(pg.ctl("stop").exit_code, 0);
    std::int64_t peak_rss = 0;
    int not_ready = 0;
    const auto resume_at = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < resume_at) {
        peak_rss = std::max(peak_rss, rss_bytes(trackd->pid()));
        if (ready_status() == 503) ++not_ready;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    ASSERT_TRUE(trackd->running()) << IngestHarness::read_file(h.log_path());
    const auto start = pg.ctl("start");
    ASSERT_EQ(start.exit_code, 0) << start.output;
    EXPECT_GT(not_ready, 0) << "/readyz never answered 503 while PostgreSQL was down";
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] { return ready_status() == 200; }));
    run_command("touch " + shell_quote(release));

    // A crash restart while it catches up.
    ASSERT_TRUE(wait_until(std::chrono::seconds(60),
                           [&] { return h.committed_messages() > kMessages / 2; }));
    const auto restart = pg.ctl("restart immediate");
    ASSERT_EQ(restart.exit_code, 0) << restart.output;

    ASSERT_EQ(fleet.wait(), 0);
    ASSERT_TRUE(h.wait_drained(kMessages, std::chrono::seconds(300)))
        << IngestHarness::read_file(h.log_path());
    ASSERT_TRUE(trackd->running()) << "trackd must not exit while PostgreSQL is away";
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(trackd->exit_code(), 0);
    EXPECT_GT(count_in_file(h.log_path(), "paused: in-flight limit reached"), 0u)
        << "the stall should have filled the in-flight limit";
    std::printf(
        "[ measured ] peak RSS during the 30 s stall: %.1f MiB (in-flight limit %.1f MiB)\n",
        static_cast<double>(peak_rss) / (1 << 20), static_cast<double>(kInflight) / (1 << 20));
    EXPECT_LE(peak_rss, kInflight + kAllowance);
    h.check_accounting(load_manifest(h.manifest_path()));
    // Archive what is left, then: the archive holds exactly the history, once.
    const auto rest = archive.archive("--once");
    ASSERT_EQ(rest.exit_code, 0) << rest.output;
    expect_exact(archive.check("compare"));
}

// The broker stopped for 10 s and started again while trackd ingests and the fleet produces.
TEST(Faults, KafkaBrokerRestartDuringIngest) {
    OwnKafka kafka("kafkarestart");
    IngestHarness h("kafkarestart", 4);
    constexpr int kMessages = 60000;
    ChildProcess fleet(h.fleet_command(kVehicles, kMessages, 4000), {}, h.dir() + "/fleet.log");
    auto trackd = h.start_trackd();
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] { return h.committed_messages() > 0; }))
        << IngestHarness::read_file(h.log_path());
    const auto stop = OwnKafka::ctl("stop");
    ASSERT_EQ(stop.exit_code, 0) << stop.output;
    std::this_thread::sleep_for(std::chrono::seconds(10));
    const auto start = OwnKafka::ctl("start");
    ASSERT_EQ(start.exit_code, 0) << start.output;
    ASSERT_EQ(fleet.wait(), 0) << IngestHarness::read_file(h.dir() + "/fleet.log");
    ASSERT_TRUE(h.wait_drained(kMessages, std::chrono::seconds(300)))
        << IngestHarness::read_file(h.log_path());
    ASSERT_TRUE(trackd->running()) << "trackd must not exit while the broker is away";
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(trackd->exit_code(), 0);
    h.check_accounting(load_manifest(h.manifest_path()));
}

// Network faults between trackd and both services, through Toxiproxy: added latency, connections
// reset, traffic black-holed for 30 s (the proxy holds the bytes and closes the connection after
// 5 s, as a silent peer would look once TCP gives up), first towards Kafka, then PostgreSQL.
// trackd reaches the broker only through the proxy (a second listener advertises the proxy's
// address); the fleet and the test's own queries go direct. Both services are the case's own, so
// it may run beside tests that restart the shared ones.
TEST(Faults, NetworkLatencyResetsAndBlackHolesToKafkaAndPostgresql) {
    OwnPostgres pg("netfaults");
    Toxiproxy toxiproxy;
    const auto kafka_proxy = free_port();
    const auto kafka_proxied = free_port();
    ScopedEnv proxied_port("LOCAL_KAFKA_PROXIED_PORT", std::to_string(kafka_proxied));
    ScopedEnv proxied_adv("LOCAL_KAFKA_PROXIED_ADVERTISED",
                          "127.0.0.1:" + std::to_string(kafka_proxy));
    toxiproxy.add_proxy("kafka", kafka_proxy, kafka_proxied);
    OwnKafka kafka("netfaults");
    IngestHarness h("netfaults", 4);
    const auto pg_proxy = free_port();
    toxiproxy.add_proxy("pg", pg_proxy, port_of(pg_admin_dsn()));

    constexpr int kMessages = 150000;
    h.produce(kVehicles, kMessages);
    // Slow PostgreSQL (100 ms each way) and small batches, so that ingest is still going when
    // each fault starts.
    toxiproxy.add_toxic("pg", "slow", "latency", R"({"latency":100})");
    auto dsn = h.db().dsn();
    dsn.replace(dsn.find(':', dsn.rfind('@')) + 1, std::to_string(port_of(dsn)).size(),
                std::to_string(pg_proxy));
    auto trackd =
        h.start_trackd({{"TRACKD_PG_DSN", dsn},
                        {"TRACKD_KAFKA_BROKERS", "127.0.0.1:" + std::to_string(kafka_proxy)},
                        {"TRACKD_BATCH_MAX_ROWS", "500"}});
    ASSERT_TRUE(wait_until(std::chrono::seconds(120), [&] { return h.committed_messages() > 0; }))
        << IngestHarness::read_file(h.log_path());
    auto phase = [&](const char* what, const std::string& proxy, const std::string& type,
                     const std::string& attributes, std::chrono::seconds how_long) {
        const auto before = h.committed_messages();
        toxiproxy.add_toxic(proxy, "fault", type, attributes);
        std::this_thread::sleep_for(how_long);
        toxiproxy.remove_toxic(proxy, "fault");
        std::printf("[ measured ] %s: committed %lld -> %lld of %d\n", what,
                    static_cast<long long>(before), static_cast<long long>(h.committed_messages()),
                    kMessages);
        ASSERT_TRUE(trackd->running()) << what << "\n" << IngestHarness::read_file(h.log_path());
    };
    phase("kafka +300 ms", "kafka", "latency", R"({"latency":300})", std::chrono::seconds(10));
    phase("kafka connections reset", "kafka", "reset_peer", R"({"timeout":0})",
          std::chrono::seconds(5));
    phase("kafka black hole 30 s", "kafka", "timeout", R"({"timeout":5000})",
          std::chrono::seconds(30));
    phase("postgresql connections reset", "pg", "reset_peer", R"({"timeout":0})",
          std::chrono::seconds(5));
    phase("postgresql black hole 30 s", "pg", "timeout", R"({"timeout":5000})",
          std::chrono::seconds(30));
    toxiproxy.remove_toxic("pg", "slow");

    ASSERT_TRUE(h.wait_drained(kMessages, std::chrono::seconds(300)))
        << IngestHarness::read_file(h.log_path());
    ASSERT_TRUE(trackd->running());
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(trackd->exit_code(), 0);
    EXPECT_GT(count_in_file(h.log_path(), "database unavailable, retrying"), 0u)
        << "the PostgreSQL faults should have been noticed";
    std::printf("[ measured ] %zu batch(es) read before a rejoin refused by the fence\n",
                count_in_file(h.log_path(), kFenced));
    h.check_accounting(load_manifest(h.manifest_path()));
}

// `percent` of the packets to and from 127.0.0.2:`port` dropped in the kernel (nftables, on the
// loopback's output hook) while it lives, at random. At 100 a black hole: a peer cut off the
// network, which answers nothing, not even a reset, and whose TCP stack acknowledges nothing.
// Toxiproxy cannot make either: its own TCP stack acknowledges what it holds.
class PacketLoss {
  public:
    PacketLoss(unsigned short port, int percent)
        : table_("trackd_loss_" + std::to_string(getpid())) {
        const auto drop = percent >= 100
                              ? std::string(" drop")
                              : " numgen random mod 100 < " + std::to_string(percent) + " drop";
        const auto r = nft("add table inet " + table_ + "; add chain inet " + table_ +
                           " out { type filter hook output priority 0 ; } ; add rule inet " +
                           table_ + " out ip daddr 127.0.0.2 tcp dport " + std::to_string(port) +
                           drop + " ; add rule inet " + table_ +
                           " out ip saddr 127.0.0.2 tcp sport " + std::to_string(port) + drop);
        if (r.exit_code != 0) throw std::runtime_error("nft failed:\n" + r.output);
    }
    ~PacketLoss() { lift(); }
    PacketLoss(const PacketLoss&) = delete;
    PacketLoss& operator=(const PacketLoss&) = delete;

    void lift() {
        if (!table_.empty()) nft("delete table inet " + table_);
        table_.clear();
    }
    // Whether this machine lets the test drop packets (root, or CAP_NET_ADMIN, and nf_tables).
    static bool usable() { return nft("list tables").exit_code == 0; }

  private:
    static CommandResult nft(const std::string& commands) {
        return run_command("nft " + shell_quote(commands) + " 2>&1");
    }
    std::string table_;
};

// PostgreSQL behind a lossy link, then cut off at the packet level between two bursts of the
// fleet: trackd talks to it on 127.0.0.2 (the server listens there too; the test's own queries go
// to 127.0.0.1). trackd drains the first burst with 10% of that address and port's packets
// dropped, then every packet is dropped. Its connections are idle by then; its first batch of the
// second burst is sent into the black hole and never acknowledged. While unacknowledged data waits,
// TCP keepalives do not apply: only libpq's tcp_user_timeout (pg.keepalives_idle_s + interval x
// count, 2 + 1 x 3 = 5 s here) ends the wait; without it the write waits for TCP's own
// retransmission limit, about 15 minutes. trackd must give up on the connection while the black
// hole lasts, retry, and once it is lifted commit both bursts exactly once.
TEST(Faults, PostgresqlLosingPacketsThenBlackHoledIsNoticedWithinTheKeepaliveBound) {
    if (!PacketLoss::usable()) {
        GTEST_SKIP() << "nft cannot change this machine's packet filter (needs root and "
                        "nf_tables; scripts/setup.sh installs nftables)";
    }
    OwnPostgres pg("pgblackhole");
    {
        db::Connection admin(pg_admin_dsn(), "test");
        admin.query("ALTER SYSTEM SET listen_addresses = '127.0.0.1,127.0.0.2'");
    }
    const auto restart = pg.ctl("restart");
    ASSERT_EQ(restart.exit_code, 0) << restart.output;
    IngestHarness h("pgblackhole", 4);
    constexpr int kBurst = 20000;
    h.produce(kVehicles, kBurst);
    auto dsn = h.db().dsn();
    dsn.replace(dsn.find("127.0.0.1"), 9, "127.0.0.2");
    const auto port = port_of(pg_admin_dsn());
    const char* kUnavailable = "database unavailable, retrying";
    const char* kTimedOut = "Connection timed out";
    std::unique_ptr<ChildProcess> trackd;
    {
        PacketLoss lossy(port, 10);
        const auto t0 = std::chrono::steady_clock::now();
        trackd = h.start_trackd({{"TRACKD_PG_DSN", dsn},
                                 {"TRACKD_PG_KEEPALIVES_IDLE_S", "2"},
                                 {"TRACKD_PG_KEEPALIVES_INTERVAL_S", "1"},
                                 {"TRACKD_PG_KEEPALIVES_COUNT", "3"}});
        ASSERT_TRUE(h.wait_drained(kBurst, std::chrono::seconds(300)))
            << IngestHarness::read_file(h.log_path());
        std::printf(
            "[ measured ] first burst drained with 10%% packet loss in %.1f s, %zu "
            "connection(s) given up\n",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
            count_in_file(h.log_path(), kTimedOut));
    }
    // A long enough run of losses can end a connection at the bound too, so what follows counts
    // from here.
    const auto unavailable_before = count_in_file(h.log_path(), kUnavailable);
    const auto timed_out_before = count_in_file(h.log_path(), kTimedOut);
    PacketLoss hole(port, 100);
    // The second burst, other vehicles, its own manifest (joined to the first's below).
    const auto second_manifest = h.dir() + "/manifest-second.csv";
    const auto sent = std::chrono::steady_clock::now();
    ChildProcess fleet(
        h.fleet_command(kVehicles, kBurst, 0, {"--id-prefix", "b-"}, second_manifest), {},
        h.dir() + "/fleet-second.log");
    ASSERT_EQ(fleet.wait(), 0) << IngestHarness::read_file(h.dir() + "/fleet-second.log");
    // Not a timing assertion: two minutes is far past the bound and far short of TCP's limit.
    const bool noticed = wait_until(std::chrono::seconds(120), [&] {
        return count_in_file(h.log_path(), kUnavailable) > unavailable_before;
    });
    const auto after_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    ASSERT_TRUE(noticed) << "trackd still waited on the silent connection after 120 s\n"
                         << IngestHarness::read_file(h.log_path());
    std::printf(
        "[ measured ] the silent connection given up %.1f s after the second burst began "
        "(bound 5 s)\n",
        after_s);
    EXPECT_GT(count_in_file(h.log_path(), kTimedOut), timed_out_before)
        << IngestHarness::read_file(h.log_path());
    std::this_thread::sleep_for(std::chrono::seconds(5));  // retries into the black hole
    ASSERT_TRUE(trackd->running()) << IngestHarness::read_file(h.log_path());
    hole.lift();

    {
        std::ofstream all(h.manifest_path(), std::ios::app);
        all << std::ifstream(second_manifest).rdbuf();
    }
    ASSERT_TRUE(h.wait_drained(2 * kBurst, std::chrono::seconds(300)))
        << IngestHarness::read_file(h.log_path());
    ASSERT_TRUE(trackd->running());
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(trackd->exit_code(), 0);
    h.check_accounting(load_manifest(h.manifest_path()));
}

// `trackd migrate` waiting on the migration lock when the network to PostgreSQL goes silent:
// its request was acknowledged, so it waits idle, and only TCP keepalives on its side notice
// the cut (the server's own keepalives are not set on a command's session). Without them it
// waited as long as the lock's holder held on.
// What a command holds and does in CommandWaitingOnALockIsEndedByACutOffNetwork.
struct LockedCommand {
    std::string command;    // `trackd <command>`
    std::string hold;       // SQL another session runs first, and keeps
    std::string let_go;     // SQL that session runs once the network is back
    std::string clean_run;  // what the next run prints, on the network and with the lock free
};

// `trackd <command>` (keepalive bound 2 + 1 x 3 = 5 s) waits, through 127.0.0.2, on a lock
// another session holds; then every packet to and from the server is dropped. It exits, naming
// the timeout; with the network back and the lock free, the next run succeeds.
void command_waiting_on_a_lock_is_ended_by_a_cut_off_network(const LockedCommand& c) {
    if (!PacketLoss::usable()) {
        GTEST_SKIP() << "nft cannot change this machine's packet filter (needs root and "
                        "nf_tables; scripts/setup.sh installs nftables)";
    }
    OwnPostgres pg("pg" + c.command + "cut");
    {
        db::Connection admin(pg_admin_dsn(), "test");
        admin.query("ALTER SYSTEM SET listen_addresses = '127.0.0.1,127.0.0.2'");
    }
    const auto restart = pg.ctl("restart");
    ASSERT_EQ(restart.exit_code, 0) << restart.output;
    TestDatabase db(c.command + "cut", Schema::migrated);
    db::Connection holder(db.dsn(), "test holder");
    holder.exec_script(c.hold);
    // Watched from a session of its own: inside the holder's transaction pg_stat_activity would
    // keep showing the snapshot of its first read.
    db::Connection watcher(db.dsn(), "test watcher");
    auto dsn = db.dsn();
    dsn.replace(dsn.find("127.0.0.1"), 9, "127.0.0.2");
    const std::map<std::string, std::string> env = {{"TRACKD_PG_DSN", dsn},
                                                    {"TRACKD_PG_KEEPALIVES_IDLE_S", "2"},
                                                    {"TRACKD_PG_KEEPALIVES_INTERVAL_S", "1"},
                                                    {"TRACKD_PG_KEEPALIVES_COUNT", "3"}};
    const auto log = temp_dir(c.command + "cut") + "/" + c.command + ".log";
    ChildProcess run({trackd_binary(), c.command}, env, log);
    ASSERT_TRUE(wait_until(std::chrono::seconds(60), [&] {
        return watcher
                   .query(
                       "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND "
                       "wait_event_type = 'Lock'",
                       {"trackd " + c.command})
                   .at(0, 0) == "1";
    })) << IngestHarness::read_file(log);
    const auto cut = std::chrono::steady_clock::now();
    {
        PacketLoss hole(port_of(pg_admin_dsn()), 100);
        // Not a timing assertion: two minutes is far past the bound (5 s here) and far short of
        // the holder letting go (never, until the test does).
        ASSERT_TRUE(run.wait_for(std::chrono::seconds(120)))
            << "trackd " << c.command << " still waited after 120 s\n"
            << IngestHarness::read_file(log);
        std::printf("[ measured ] trackd %s gave up %.1f s after the cut (bound 5 s)\n",
                    c.command.c_str(),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - cut).count());
        EXPECT_NE(run.wait(), 0);
        EXPECT_NE(IngestHarness::read_file(log).find("timed out"), std::string::npos)
            << IngestHarness::read_file(log);
    }
    // The network back and the lock free. (The cut session's backend still waits for the lock;
    // once it gets it and cannot answer, it ends.)
    holder.exec_script(c.let_go);
    const auto again = run_command("TRACKD_PG_DSN=" + shell_quote(dsn) + " " + trackd_binary() +
                                   " " + c.command + " 2>&1");
    EXPECT_EQ(again.exit_code, 0) << again.output;
    EXPECT_NE(again.output.find(c.clean_run), std::string::npos) << again.output;
}

TEST(Faults, AMigrationWaitingOnALockIsEndedByACutOffNetwork) {
    // Another migration's session (db::migrate's lock key, server/db/migrator.cpp) holds on.
    command_waiting_on_a_lock_is_ended_by_a_cut_off_network(
        {"migrate", "SELECT pg_advisory_lock(8390876135376027649)",
         "SELECT pg_advisory_unlock(8390876135376027649)", "schema is up to date"});
}

TEST(Faults, AnAuditWaitingOnALockIsEndedByACutOffNetwork) {
    // A session holding the offsets table (as a DBA's ALTER TABLE would): the audit's snapshot
    // waits on it at its first read of the table.
    command_waiting_on_a_lock_is_ended_by_a_cut_off_network(
        {"audit", "BEGIN; LOCK TABLE trackd.kafka_offsets IN ACCESS EXCLUSIVE MODE", "ROLLBACK",
         "result: no violation"});
}

}  // namespace
}  // namespace trackd::test
