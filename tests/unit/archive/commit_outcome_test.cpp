// IcebergTable's commits when the catalog loses the answer to COMMIT, against a catalog double
// that applies the swap (or not) and then reports the outcome as unknown: the outcome is read
// back, never guessed, and a file the new version references is deleted only when the swap is
// known not to have happened. The real catalog and the lost reply on the wire are covered by
// Archive.LostCatalogCommitRepliesLoseNothing (tests/integration/archive_test.cpp).
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "catalog.hpp"
#include "iceberg_table.hpp"

namespace trackd::archive {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

// One catalog row in memory. `lost` says what each commit does: `applied` swaps and then loses
// the answer, `not_applied` loses it without swapping (the transaction rolled back).
class FakeCatalog final : public Catalog {
  public:
    enum class Lost { none, applied, not_applied };
    std::optional<std::string> location;
    std::deque<Lost> lost;
    int settle_failures = 0;              // load_settled() throws this many times first
    std::function<void()> before_settle;  // runs inside the next load_settled()
    int commits = 0;
    int settles = 0;

    std::optional<std::string> load(const TableIdent& /*t*/) override { return location; }
    bool create(const TableIdent& /*t*/, const std::string& loc,
                const json& /*metadata*/) override {
        if (location) return false;
        location = loc;
        return true;
    }
    std::optional<std::string> commit(const TableIdent& /*t*/, const TableChange& change,
                                      const std::optional<CommitProgress>& /*progress*/) override {
        const auto& base = change.base_location;
        const auto& next = change.next_location;
        ++commits;
        if (location != base) return std::nullopt;
        const auto mode = lost.empty() ? Lost::none : lost.front();
        if (!lost.empty()) lost.pop_front();
        if (mode == Lost::not_applied) throw CommitStateUnknown("connection lost");
        location = next;
        if (mode == Lost::applied) throw CommitStateUnknown("connection lost");
        return next;
    }
    std::optional<std::string> load_settled(const TableIdent& /*t*/) override {
        ++settles;
        if (before_settle) std::exchange(before_settle, nullptr)();
        if (settle_failures > 0) {
            --settle_failures;
            throw std::runtime_error("cannot connect to PostgreSQL");
        }
        return location;
    }
};

class CommitOutcome : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = ::testing::TempDir() + "archive-outcome-" + std::to_string(getpid()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name();
        fs::remove_all(dir_);
        table_ = std::make_unique<IcebergTable>(catalog_, io_, ident_, "file://" + dir_, 20);
        table_->refresh();
    }
    void TearDown() override { fs::remove_all(dir_); }

    // A data file for the next append (its content does not matter to the table).
    std::vector<DataFile> files(int rows) {
        DataFile f;
        f.path = table_->new_data_file(20000);
        f.partition = 20000;
        f.record_count = rows;
        f.file_size_in_bytes = 100;
        return {f};
    }
    static Progress progress(std::int64_t seq) {
        Progress p;
        p.archived_seq = seq;
        p.max_ingest_batch_id = seq;
        p.kafka_offsets[0] = seq * 10;
        return p;
    }
    std::set<std::string> table_files() const {
        std::set<std::string> out;
        for (const auto& e : fs::recursive_directory_iterator(dir_)) {
            if (e.is_regular_file()) out.insert(e.path().string());
        }
        return out;
    }
    // What a fresh reader sees.
    json current() const {
        std::ifstream in(local_path(*catalog_.location));
        return json::parse(in);
    }
    // Another writer (PyIceberg, say) commits a property change on the current version.
    void other_writer_commits() {
        auto md = current();
        md["metadata-log"].push_back(
            {{"timestamp-ms", md["last-updated-ms"]}, {"metadata-file", *catalog_.location}});
        md["properties"]["analyst.note"] = "kept";
        const auto uri = "file://" + dir_ + "/metadata/99999-other.metadata.json";
        std::ofstream(local_path(uri)) << md.dump();
        catalog_.location = uri;
    }
    std::int64_t total_records() const {
        const auto md = current();
        const auto id = md["current-snapshot-id"].get<std::int64_t>();
        for (const auto& s : md["snapshots"]) {
            if (s["snapshot-id"] == id) {
                return std::stoll(s["summary"]["total-records"].get<std::string>());
            }
        }
        return -1;
    }

    FakeCatalog catalog_;
    TableIdent ident_{"trackd", "trackd", "vehicle_positions"};
    std::string dir_;
    FileIO io_{S3Settings{}};
    std::unique_ptr<IcebergTable> table_;
};

TEST_F(CommitOutcome, LostReplyAfterTheSwapCountsAsCommittedOnce) {
    catalog_.lost = {FakeCatalog::Lost::applied};
    ASSERT_TRUE(table_->append(files(5), progress(0), progress(1)));
    EXPECT_EQ(catalog_.commits, 1) << "not committed a second time";
    EXPECT_EQ(catalog_.settles, 1);
    EXPECT_EQ(table_->metadata_location(), *catalog_.location);
    // Everything the committed version references is still there.
    const auto md = current();
    ASSERT_EQ(md["snapshots"].size(), 1U);
    EXPECT_TRUE(fs::exists(local_path(md["snapshots"][0]["manifest-list"].get<std::string>())));
    EXPECT_EQ(md["properties"]["trackd.archive-seq"], "1");
    // The next append builds on it.
    ASSERT_TRUE(table_->append(files(7), progress(1), progress(2)));
    EXPECT_EQ(current()["snapshots"].size(), 2U);
    EXPECT_EQ(total_records(), 12);
}

TEST_F(CommitOutcome, LostReplyWithoutTheSwapIsRetriedAndItsFilesRemoved) {
    const auto before = table_files();
    catalog_.lost = {FakeCatalog::Lost::not_applied};
    ASSERT_TRUE(table_->append(files(5), progress(0), progress(1)));
    EXPECT_EQ(catalog_.commits, 2);
    const auto md = current();
    EXPECT_EQ(md["snapshots"].size(), 1U);
    EXPECT_EQ(total_records(), 5);
    // New files: the second attempt's metadata file and manifest list, and the manifest; the
    // first attempt's metadata file and manifest list are gone.
    std::set<std::string> added;
    for (const auto& f : table_files()) {
        if (before.count(f) == 0) added.insert(f);
    }
    EXPECT_EQ(added.size(), 3U);
    EXPECT_EQ(added.count(local_path(*catalog_.location)), 1U);
}

TEST_F(CommitOutcome, UnknownOutcomeKeepsEveryFileAndTheTableDecidesLater) {
    for (const auto mode : {FakeCatalog::Lost::not_applied, FakeCatalog::Lost::applied}) {
        SCOPED_TRACE(mode == FakeCatalog::Lost::applied ? "applied" : "not applied");
        const auto seq = table_->progress().archived_seq;
        const auto before = table_files();
        catalog_.lost = {mode};
        catalog_.settle_failures = 1;
        EXPECT_THROW(table_->append(files(5), progress(seq), progress(seq + 1)),
                     CommitStateUnknown);
        // Manifest, manifest list, metadata file: all kept, whatever happened.
        EXPECT_EQ(table_files().size(), before.size() + 3);
        for (const auto& f : before) EXPECT_TRUE(fs::exists(f)) << f;
        // A restarted round reads the table: it holds the snapshot exactly when it was applied.
        table_ = std::make_unique<IcebergTable>(catalog_, io_, ident_, "file://" + dir_, 20);
        table_->refresh();
        EXPECT_EQ(table_->progress().archived_seq,
                  mode == FakeCatalog::Lost::applied ? seq + 1 : seq);
    }
    // The files of the commit that did not happen are orphans; the sweep removes exactly those.
    MaintenanceOptions o;
    o.orphan_min_age_ms = 0;
    EXPECT_EQ(table_->delete_orphans(o), 3);
    const auto md = current();
    EXPECT_TRUE(fs::exists(local_path(md["snapshots"][0]["manifest-list"].get<std::string>())));
    EXPECT_EQ(total_records(), 5);
}

TEST_F(CommitOutcome, AnotherWriterOnTopOfTheLostCommitStillMeansCommitted) {
    catalog_.lost = {FakeCatalog::Lost::applied};
    catalog_.before_settle = [this] { other_writer_commits(); };
    ASSERT_TRUE(table_->append(files(5), progress(0), progress(1)));
    EXPECT_EQ(catalog_.commits, 1);
    table_->refresh();
    EXPECT_EQ(table_->progress().archived_seq, 1);
    EXPECT_EQ(current()["snapshots"].size(), 1U);
    EXPECT_EQ(current()["properties"]["analyst.note"], "kept");
}

TEST_F(CommitOutcome, AnotherWriterWinningFromTheBaseMeansNotCommitted) {
    catalog_.lost = {FakeCatalog::Lost::not_applied};
    catalog_.before_settle = [this] { other_writer_commits(); };
    ASSERT_TRUE(table_->append(files(5), progress(0), progress(1)));
    EXPECT_EQ(catalog_.commits, 2) << "rebuilt on the other writer's version";
    EXPECT_EQ(current()["snapshots"].size(), 1U);
    EXPECT_EQ(current()["properties"]["analyst.note"], "kept");
    EXPECT_EQ(current()["properties"]["trackd.archive-seq"], "1");
}

TEST_F(CommitOutcome, ExpiryDeletesFilesOnlyOnceKnownCommitted) {
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(table_->append(files(1), progress(i), progress(i + 1)));
    MaintenanceOptions o;
    o.snapshot_max_age_ms = 0;
    o.min_snapshots_to_keep = 2;
    o.max_manifests = 100;
    const auto first_list = local_path(current()["snapshots"][0]["manifest-list"]);

    // Unknown: the expiry's files stay (the orphan sweep takes them if it did not happen).
    catalog_.lost = {FakeCatalog::Lost::not_applied};
    catalog_.settle_failures = 1;
    table_->refresh();
    EXPECT_THROW(table_->expire_snapshots(o), CommitStateUnknown);
    EXPECT_TRUE(fs::exists(first_list));
    EXPECT_EQ(current()["snapshots"].size(), 4U);

    // Lost after the swap: known committed, so the expired snapshots' files go.
    catalog_.lost = {FakeCatalog::Lost::applied};
    table_->refresh();
    const auto [expired, deleted] = table_->expire_snapshots(o);
    EXPECT_EQ(expired, 2);
    EXPECT_EQ(deleted, 2) << "two manifest lists (their manifests are still referenced)";
    EXPECT_FALSE(fs::exists(first_list));
    EXPECT_EQ(current()["snapshots"].size(), 2U);
    EXPECT_EQ(catalog_.settles, 2);
}

TEST_F(CommitOutcome, MergeAfterALostReplyIsNotRepeated) {
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(table_->append(files(1), progress(i), progress(i + 1)));
    MaintenanceOptions o;
    o.max_manifests = 2;
    catalog_.lost = {FakeCatalog::Lost::applied};
    table_->refresh();
    EXPECT_EQ(table_->merge_manifests(o), 4);
    EXPECT_EQ(catalog_.commits, 5);
    EXPECT_EQ(current()["snapshots"].size(), 5U);
    EXPECT_EQ(table_->merge_manifests(o), 0) << "already merged";
    EXPECT_EQ(total_records(), 4);
}

}  // namespace
}  // namespace trackd::archive
