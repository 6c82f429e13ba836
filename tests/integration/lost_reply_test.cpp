// Lost COMMIT replies: PostgreSQL commits a batch but trackd never hears so (the connection drops
// between the server's commit and its reply). trackd must find out that the batch is in and go
// on without storing it twice, and without stopping: exactly once, with exact accounting.
//
// PgFaultProxy (tests/support/pg_fault_proxy.hpp) stands between trackd and PostgreSQL and
// swallows the CommandComplete "COMMIT" of the ingest writers' connections on demand.
#include <fstream>
#include <functional>
#include <sstream>

#include <gtest/gtest.h>

#include "support/ingest_harness.hpp"
#include "support/pg_fault_proxy.hpp"

namespace trackd::test {
namespace {

using std::chrono::seconds;

bool wait_until(seconds timeout, const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// The proxy itself, with libpq through it and a direct connection to check what the server did.

std::string count_of(db::Connection& conn, int id) {
    return conn.query("SELECT count(*) FROM proxied WHERE id = $1", {std::to_string(id)}).at(0, 0);
}

TEST(PgFaultProxy, ThroughReplacesHostAndPort) {
    PgFaultProxy proxy("127.0.0.1", 1);
    const auto p = std::to_string(proxy.port());
    EXPECT_EQ(proxy.through("postgresql://postgres@127.0.0.1:55432/db?sslmode=prefer"),
              "postgresql://postgres@127.0.0.1:" + p + "/db?sslmode=prefer");
    EXPECT_EQ(proxy.through("postgres://u:pw@db.example:5432/x"),
              "postgres://u:pw@127.0.0.1:" + p + "/x");
    EXPECT_EQ(proxy.through("postgresql://localhost/x"), "postgresql://127.0.0.1:" + p + "/x");
    EXPECT_EQ(pg_endpoint("postgresql://postgres@127.0.0.1:55432/db"),
              (std::pair<std::string, unsigned short>{"127.0.0.1", 55432}));
}

TEST(PgFaultProxy, CutsArmedCommitRepliesAfterTheServerCommitted) {
    TestDatabase db("proxy");
    const auto [host, port] = pg_endpoint(db.dsn());
    PgFaultProxy proxy(host, port);
    db::Connection direct(db.dsn(), "test");
    direct.exec_script("CREATE TABLE proxied (id int PRIMARY KEY)");
    const std::string app = "proxy self-test";
    {
        db::Connection c(proxy.through(db.dsn()), app);
        // Not armed: COMMIT is answered.
        c.exec_script("BEGIN");
        c.exec_script("INSERT INTO proxied VALUES (1)");
        c.exec_script("COMMIT");
        // Armed for other connections only: answered.
        proxy.cut_commit_replies(1, "someone else");
        c.exec_script("BEGIN");
        c.exec_script("INSERT INTO proxied VALUES (2)");
        c.query("COMMIT");
        // Armed for this one: an aborted transaction's COMMIT is answered ROLLBACK, which is not
        // cut, and the cut stays armed for the next real one.
        proxy.cut_commit_replies(1, "proxy self");
        c.exec_script("BEGIN");
        EXPECT_THROW(c.exec_script("SELECT 1/0"), db::DbError);
        c.exec_script("COMMIT");
        EXPECT_EQ(proxy.cuts(), 0);
        c.exec_script("BEGIN");
        c.exec_script("INSERT INTO proxied VALUES (3)");
        try {
            c.exec_script("COMMIT");
            ADD_FAILURE() << "the armed COMMIT was answered";
        } catch (const db::DbError& e) {
            EXPECT_TRUE(e.connection_lost()) << e.what();
        }
        EXPECT_FALSE(c.ok());
        EXPECT_EQ(proxy.cuts(), 1);
    }
    EXPECT_EQ(count_of(direct, 1), "1");
    EXPECT_EQ(count_of(direct, 2), "1");
    EXPECT_EQ(count_of(direct, 3), "1") << "the server must have committed the cut transaction";

    // Spellings of COMMIT, by simple Query (exec_script) and by Parse/Bind/Execute (query).
    const std::vector<std::pair<std::string, bool>> variants = {{"  commit ; ", false},
                                                                {"END", false},
                                                                {"Commit Work;", false},
                                                                {"COMMIT", true},
                                                                {"end", true}};
    int id = 10;
    for (const auto& [text, extended] : variants) {
        proxy.cut_commit_replies(1, "proxy self");
        db::Connection c(proxy.through(db.dsn()), app);
        c.exec_script("BEGIN");
        c.exec_script("INSERT INTO proxied VALUES (" + std::to_string(id) + ")");
        try {
            if (extended) {
                c.query(text);
            } else {
                c.exec_script(text);
            }
            ADD_FAILURE() << "'" << text << "' was answered";
        } catch (const db::DbError& e) {
            EXPECT_TRUE(e.connection_lost()) << text << ": " << e.what();
        }
        EXPECT_EQ(count_of(direct, id), "1") << "'" << text << "' must have been committed";
        ++id;
    }
    EXPECT_EQ(proxy.cuts(), 1 + static_cast<int>(variants.size()));

    // Used up: the next COMMIT is answered again.
    db::Connection c(proxy.through(db.dsn()), app);
    c.exec_script("BEGIN");
    c.exec_script("INSERT INTO proxied VALUES (99)");
    c.exec_script("COMMIT");
    EXPECT_EQ(count_of(direct, 99), "1");
    EXPECT_EQ(proxy.cuts(), 1 + static_cast<int>(variants.size()));
    EXPECT_EQ(proxy.connections(), 2 + static_cast<int>(variants.size()));
}

// ---------------------------------------------------------------------------------------------
// trackd ingesting through the proxy while the replies of its writers' COMMITs are lost.

constexpr int kPartitions = 4;
constexpr int kVehicles = 500;
constexpr int kMessages = 40000;
constexpr int kRate = 4000;  // ~10 s of production: commits go on while the cuts are armed
constexpr int kMinCuts = 5;
// Cuts are armed in rounds. A round of n cuts swallows the replies of the next n COMMITs of any
// writer (one writer's next batch, the other writer's, or what a writer sends after it
// reconnected); the next round is armed once a batch committed after them.
constexpr int kRounds[] = {1, 2, 1, 3, 1};
const char* const kWriterPrefix = "trackd ingest writer";

std::string whole_file(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// Lines of trackd's log that say it failed: error-level lines and the message it exits with.
std::string failure_lines(const std::string& log) {
    std::istringstream in(log);
    std::string out;
    for (std::string line; std::getline(in, line);) {
        std::istringstream words(line);
        std::string ts;
        std::string level;
        words >> ts >> level;
        if (line.rfind("trackd: ", 0) == 0 || level == "error" ||
            line.find(R"("level":"error")") != std::string::npos) {
            out += line + "\n";
        }
    }
    return out;
}

// Runs the fleet (with `fleet_options` added) and trackd through the proxy, cuts the writers'
// COMMIT replies in rounds, drains, and checks trackd is still up and the accounting exact.
void ingest_with_lost_replies(const std::string& tag, const std::vector<std::string>& fleet_options,
                              bool with_rejected) {
    IngestHarness h(tag, kPartitions);
    const auto [host, port] = pg_endpoint(h.db().dsn());
    PgFaultProxy proxy(host, port);

    auto fleet_args = h.fleet_command(kVehicles, kMessages, kRate);
    fleet_args.insert(fleet_args.end(), fleet_options.begin(), fleet_options.end());
    ChildProcess fleet(fleet_args, {}, h.dir() + "/fleet.log");
    auto trackd = h.start_trackd(
        {{"TRACKD_PG_DSN", proxy.through(h.db().dsn())}, {"TRACKD_BATCH_MAX_ROWS", "300"}});

    // Armed once every partition (so every writer) has committed a batch: a writer's first
    // commit also creates the history partitions, in a transaction of its own on the same
    // connection; from here on the cuts hit the COMMITs of batches.
    const bool started = wait_until(seconds(120), [&] {
        db::Connection conn(h.db().dsn(), "test");
        return conn.query(
                       "SELECT count(*) FROM trackd.kafka_offsets WHERE topic = $1 AND "
                       "next_offset > 0",
                       {h.topic()})
                       .at(0, 0) == std::to_string(kPartitions) ||
               !trackd->running();
    });
    ASSERT_TRUE(started && trackd->running()) << "trackd did not commit on every partition\n"
                                              << IngestHarness::read_file(h.log_path());

    int armed = 0;
    for (const int n : kRounds) {
        proxy.cut_commit_replies(n, kWriterPrefix);
        armed += n;
        const bool cut =
            wait_until(seconds(120), [&] { return proxy.cuts() >= armed || !trackd->running(); });
        if (!trackd->running()) break;  // reported below
        ASSERT_TRUE(cut) << "only " << proxy.cuts() << " of " << armed
                         << " armed COMMIT replies were cut\n"
                         << IngestHarness::read_file(h.log_path());
        const auto at_cut = h.committed_messages();
        wait_until(seconds(120), [&] {
            return h.committed_messages() > at_cut || at_cut >= kMessages || !trackd->running();
        });
    }
    ASSERT_EQ(fleet.wait(), 0) << IngestHarness::read_file(h.dir() + "/fleet.log");
    wait_until(seconds(300),
               [&] { return h.committed_messages() >= kMessages || !trackd->running(); });
    const auto committed = h.committed_messages();
    const bool running = trackd->running();
    const std::string log = whole_file(h.log_path());
    std::printf(
        "[ measured ] %d COMMIT replies cut, %d connections through the proxy, %lld of %d "
        "messages committed, trackd %s\n",
        proxy.cuts(), proxy.connections(), static_cast<long long>(committed), kMessages,
        running ? "running" : "exited");

    EXPECT_EQ(failure_lines(log), "") << "trackd's log reports a failure";
    ASSERT_TRUE(running) << "trackd exited with code " << trackd->exit_code() << "\n"
                         << IngestHarness::read_file(h.log_path());
    ASSERT_GE(committed, kMessages) << "not drained\n" << IngestHarness::read_file(h.log_path());
    EXPECT_GE(proxy.cuts(), kMinCuts);
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(seconds(30))) << "trackd did not stop on SIGTERM";
    EXPECT_EQ(trackd->exit_code(), 0) << IngestHarness::read_file(h.log_path());

    // In one line before the row-by-row accounting: how many rows a replayed batch added.
    db::Connection conn(h.db().dsn(), "test");
    const auto extra = conn.query(
        "SELECT (SELECT count(*) - count(DISTINCT (kafka_partition, kafka_offset)) "
        "FROM trackd.vehicle_telemetry_history), "
        "(SELECT count(*) - count(DISTINCT (kafka_partition, kafka_offset)) "
        "FROM trackd.dead_letters)");
    EXPECT_EQ(extra.at(0, 0), "0") << "history rows stored more than once";
    EXPECT_EQ(extra.at(0, 1), "0") << "dead letters stored more than once";

    const auto manifest = load_manifest(h.manifest_path());
    ASSERT_EQ(manifest.size(), static_cast<size_t>(kMessages));
    h.check_accounting(manifest, with_rejected);
}

// Only messages trackd accepts (out-of-order re-sends included): batches of history rows and
// current-state updates whose commit replies are lost.
TEST(LostCommitReply, ValidMessagesAreStoredExactlyOnce) {
    ingest_with_lost_replies("lostreply", {"--bad-share", "0", "--duplicate-share", "0"}, false);
}

// Bad messages and duplicates mixed in: nearly every batch of 300 also carries dead letters.
TEST(LostCommitReply, BatchesWithDeadLettersAreStoredExactlyOnce) {
    ingest_with_lost_replies("lostreplydl", {"--bad-share", "0.05"}, true);
}

}  // namespace
}  // namespace trackd::test
