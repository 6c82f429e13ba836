#include "iceberg_table.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "trackd/core/log.hpp"
#include "trackd/core/pause_point.hpp"
#include "trackd/core/time.hpp"

#include "parquet_file_reader.hpp"
#include "parquet_file_writer.hpp"
#include "table_schema.hpp"

namespace trackd::archive {
namespace {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

constexpr int kCommitAttempts = 20;
// Manifests at least this large are left alone by the merge (Iceberg's
// commit.manifest.target-size-bytes default).
constexpr std::int64_t kManifestTargetBytes = 8LL << 20;
// The orphan clean-up says so when the storage's clock is this far from the host's.
constexpr double kClockSkewWarningS = 60;

std::int64_t now_ms() { return core::now_us() / 1000; }

std::mt19937_64& rng() {
    thread_local std::mt19937_64 gen{std::random_device{}()};
    return gen;
}

std::string uuid4() {
    std::uniform_int_distribution<std::uint64_t> d;
    auto hi = d(rng());
    auto lo = d(rng());
    hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
    lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 10
    return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:012x}", hi >> 32, (hi >> 16) & 0xffff,
                       hi & 0xffff, lo >> 48, lo & 0xffffffffffffULL);
}

// Positive, as Java's snapshot ids are.
std::int64_t new_snapshot_id() {
    std::uniform_int_distribution<std::int64_t> d(1, std::numeric_limits<std::int64_t>::max());
    return d(rng());
}

std::int64_t summary_long(const json& snapshot, const char* key) {
    if (!snapshot.contains("summary")) return 0;
    const auto& s = snapshot["summary"];
    if (!s.contains(key)) return 0;
    return std::stoll(s[key].get<std::string>());
}

const json* find_snapshot(const json& md, std::int64_t id) {
    for (const auto& s : md["snapshots"]) {
        if (s["snapshot-id"].get<std::int64_t>() == id) return &s;
    }
    return nullptr;
}

std::optional<std::int64_t> current_id(const json& md) {
    if (!md.contains("current-snapshot-id") || md["current-snapshot-id"].is_null()) return {};
    const auto id = md["current-snapshot-id"].get<std::int64_t>();
    if (id < 0) return {};
    return id;
}

std::string offsets_json(const std::map<std::int32_t, std::int64_t>& offsets) {
    json j = json::object();
    for (const auto& [p, o] : offsets) j[std::to_string(p)] = o;
    return j.dump();
}

// The trackd progress keys, shared by the snapshot summary and the table properties.
void put_progress(json& target, const Progress& p) {
    target["trackd.archive-seq"] = std::to_string(p.archived_seq);
    if (p.max_ingest_batch_id) {
        target["trackd.max-ingest-batch-id"] = std::to_string(*p.max_ingest_batch_id);
    }
    target["kafka.offsets"] = offsets_json(p.kafka_offsets);
}

// Adds a snapshot to the metadata and points `main` at it (the metadata's clock never goes back).
void add_snapshot(json& md, std::int64_t snapshot_id, std::optional<std::int64_t> parent,
                  std::int64_t seq, json summary, const std::string& list_uri) {
    const auto now = std::max(now_ms(), md["last-updated-ms"].get<std::int64_t>());
    json snap;
    snap["sequence-number"] = seq;
    snap["snapshot-id"] = snapshot_id;
    if (parent) snap["parent-snapshot-id"] = *parent;
    snap["timestamp-ms"] = now;
    snap["summary"] = std::move(summary);
    snap["manifest-list"] = list_uri;
    snap["schema-id"] = kSchemaId;
    md["last-sequence-number"] = seq;
    md["last-updated-ms"] = now;
    md["current-snapshot-id"] = snapshot_id;
    md["refs"]["main"] = {{"snapshot-id", snapshot_id}, {"type", "branch"}};
    md["snapshots"].push_back(std::move(snap));
    md["snapshot-log"].push_back({{"timestamp-ms", now}, {"snapshot-id", snapshot_id}});
}

// The metadata's lists of statistics files (Puffin table statistics, partition statistics),
// each entry naming its snapshot ("snapshot-id") and its file ("statistics-path").
constexpr std::array<const char*, 2> kStatisticsLists = {"statistics", "partition-statistics"};

// Every statistics file the metadata names.
std::set<std::string> statistics_paths(const json& md) {
    std::set<std::string> out;
    for (const char* list : kStatisticsLists) {
        if (!md.contains(list) || !md[list].is_array()) continue;
        for (const auto& st : md[list]) {
            if (st.contains("statistics-path") && st["statistics-path"].is_string()) {
                out.insert(st["statistics-path"].get<std::string>());
            }
        }
    }
    return out;
}

std::vector<ManifestFile> manifests_of(FileIO& io, const json& snapshot) {
    return read_manifest_list(io.read(snapshot["manifest-list"].get<std::string>()));
}

// The version number in "<location>/metadata/00042-<uuid>.metadata.json" (0 if none).
int metadata_version(const std::string& location) {
    const auto name = fs::path(location).filename().string();
    try {
        return std::stoi(name.substr(0, name.find('-')));
    } catch (const std::exception&) {
        return 0;
    }
}

}  // namespace

IcebergTable::IcebergTable(Catalog& catalog, FileIO& io, TableIdent ident, std::string location_uri,
                           int metadata_versions_max, PartitionUnit partition)
    : catalog_(catalog),
      io_(io),
      ident_(std::move(ident)),
      location_(std::move(location_uri)),
      metadata_versions_max_(metadata_versions_max),
      partition_(partition) {
    while (!location_.empty() && location_.back() == '/') location_.pop_back();
}

json IcebergTable::load_metadata(const std::string& location) const {
    return json::parse(io_.read(location));
}

std::string IcebergTable::write_metadata_file(const json& md) const {
    const int version = metadata_version(metadata_location_) + 1;
    auto uri = fmt::format("{}/metadata/{:05d}-{}.metadata.json", location_, version, uuid4());
    io_.write(uri, md.dump());
    return uri;
}

void IcebergTable::refresh() {
    for (int attempt = 0; attempt < kCommitAttempts; ++attempt) {
        if (auto loc = catalog_.load(ident_)) {
            adopt_vended_credentials();
            // Metadata files never change once written: same location, same content.
            if (*loc != metadata_location_ || metadata_.is_null()) {
                auto md = load_metadata(*loc);
                check_partition_spec(md);
                metadata_ = std::move(md);
                metadata_location_ = *loc;
            }
            // The table's own location when the catalog chose it (REST, no archive.warehouse).
            if (location_.empty()) {
                location_ = metadata_.value("location", "");
                while (!location_.empty() && location_.back() == '/') location_.pop_back();
            }
            return;
        }
        const auto now = now_ms();
        json md;
        md["format-version"] = 2;
        md["table-uuid"] = uuid4();
        if (!location_.empty()) md["location"] = location_;
        md["last-sequence-number"] = 0;
        md["last-updated-ms"] = now;
        md["last-column-id"] = field_id::last;
        md["current-schema-id"] = kSchemaId;
        md["schemas"] = json::array({json::parse(schema_json())});
        md["default-spec-id"] = kSpecId;
        md["partition-specs"] = json::array({json::parse(partition_spec_json(partition_))});
        md["last-partition-id"] = field_id::partition;
        md["default-sort-order-id"] = kSortOrderId;
        md["sort-orders"] = json::array({json::parse(sort_order_json())});
        md["properties"] = {
            {"write.format.default", "parquet"},
            {"write.parquet.compression-codec", "zstd"},
            {"write.metadata.delete-after-commit.enabled", "true"},
            {"write.metadata.previous-versions-max", std::to_string(metadata_versions_max_)},
            {"trackd.source", "trackd.vehicle_telemetry_history"}};
        md["current-snapshot-id"] = -1;  // an empty table
        md["refs"] = json::object();
        md["snapshots"] = json::array();
        md["statistics"] = json::array();
        md["snapshot-log"] = json::array();
        md["metadata-log"] = json::array();
        metadata_location_.clear();
        if (catalog_.writes_metadata()) {
            // The catalog writes the first version itself (its own table UUID); load it.
            if (catalog_.create(ident_, "", md)) {
                core::log::info("archive table created", {{"table", ident_.dotted()}});
            }
            continue;
        }
        const auto uri = write_metadata_file(md);
        if (catalog_.create(ident_, uri, md)) {
            core::log::info("archive table created",
                            {{"table", ident_.dotted()}, {"metadata", uri}});
            metadata_location_ = uri;
            metadata_ = std::move(md);
            return;
        }
        io_.remove(uri);  // another process created it first: use theirs
    }
    throw std::runtime_error("archive: cannot create or load table " + ident_.dotted());
}

Progress IcebergTable::progress() const {
    Progress p;
    if (!metadata_.contains("properties")) return p;
    const auto& props = metadata_["properties"];
    if (props.contains("trackd.archive-seq")) {
        p.archived_seq = std::stoll(props["trackd.archive-seq"].get<std::string>());
    }
    if (props.contains("trackd.max-ingest-batch-id")) {
        p.max_ingest_batch_id = std::stoll(props["trackd.max-ingest-batch-id"].get<std::string>());
    }
    if (props.contains("kafka.offsets")) {
        const auto offsets = json::parse(props["kafka.offsets"].get<std::string>());
        for (const auto& [k, v] : offsets.items())
            p.kafka_offsets[std::stoi(k)] = v.get<std::int64_t>();
    }
    return p;
}

void IcebergTable::check_partition_spec(const json& md) const {
    std::string found = "(none)";
    if (md.contains("partition-specs")) {
        const auto id = md.value("default-spec-id", 0);
        for (const auto& spec : md["partition-specs"]) {
            if (spec.value("spec-id", -1) != id) continue;
            found.clear();
            for (const auto& f : spec["fields"]) {
                found += (found.empty() ? "" : ", ") + f.value("transform", "?") + "(" +
                         std::to_string(f.value("source-id", 0)) + ")";
            }
            if (spec["fields"].size() == 1 &&
                spec["fields"][0].value("source-id", 0) == field_id::recorded_at &&
                spec["fields"][0].value("transform", "") == to_string(partition_)) {
                return;
            }
        }
    }
    throw std::runtime_error(fmt::format(
        "archive: the table {} is partitioned by {} (source field 2 is recorded_at), not by "
        "{}(recorded_at) as archive.partition = \"{}\" says; a table's partition spec is fixed "
        "when it is created: set archive.partition to match it, or archive into a new table",
        ident_.dotted(), found, to_string(partition_), to_string(partition_)));
}

std::string IcebergTable::new_data_file(std::int32_t partition) const {
    return fmt::format("{}/data/{}/{}.parquet", location_, partition_path(partition_, partition),
                       uuid4());
}

IcebergTable::Swap IcebergTable::commit_metadata(json next,
                                                 const std::optional<CommitProgress>& progress) {
    auto& log = next["metadata-log"];
    log.push_back(
        {{"timestamp-ms", metadata_["last-updated-ms"]}, {"metadata-file", metadata_location_}});
    while (static_cast<int>(log.size()) > metadata_versions_max_) log.erase(log.begin());
    const auto base = metadata_location_;
    // A catalog that writes metadata itself (REST) is sent the change; otherwise trackd writes
    // the new version and the catalog swaps the pointer to it.
    const bool client_writes = !catalog_.writes_metadata();
    const auto uri = client_writes ? write_metadata_file(next) : std::string();
    // The crash tests stop the archiver at these steps (TRACKD_TEST_ARCHIVE_PAUSE_AT).
    static core::PausePoint pause("TRACKD_TEST_ARCHIVE_PAUSE_AT", "archive");
    pause.at("metadata-written");
    std::optional<std::string> committed;
    try {
        committed = catalog_.commit(ident_, TableChange{base, metadata_, next, uri}, progress);
    } catch (const CommitStateUnknown& e) {
        // The request left but its answer did not come back: the catalog itself says what
        // happened, read once the lost commit can no longer change it. Throws, keeping every
        // file, if it cannot tell yet.
        core::log::warn("archive commit outcome unknown, reading the catalog back",
                        {{"table", ident_.dotted()}, {"metadata", uri}, {"error", e.what()}});
        committed = client_writes ? settle(base, uri) : settle_change(metadata_, next);
        core::log::info(committed ? "archive commit found committed after its reply was lost"
                                  : "archive commit found not committed after its reply was lost",
                        {{"table", ident_.dotted()}, {"metadata", committed.value_or(uri)}});
    } catch (...) {
        // The catalog answered that nothing changed (or the request never left).
        if (client_writes) io_.remove(uri);
        throw;
    }
    if (!committed) {
        if (client_writes) io_.remove(uri);
        return Swap::not_committed;
    }
    pause.at("committed");
    // The catalog's own version when it wrote it (its metadata log, its timestamps). Committed
    // already: a failure to read it must keep every file of the commit (the callers remove an
    // attempt's files on any other error), so it is an unknown state, and this object keeps
    // the version before, which the next commit finds stale and refreshes.
    json written_by_catalog;
    if (!client_writes) {
        try {
            written_by_catalog = load_metadata(*committed);
        } catch (const std::exception& e) {
            throw CommitStateUnknown("archive: committed " + *committed +
                                     ", but reading it back failed: " + e.what());
        }
    }
    const json before = std::move(metadata_);
    metadata_location_ = *committed;
    metadata_ = client_writes ? std::move(next) : std::move(written_by_catalog);
    delete_dropped_metadata(before, metadata_);
    return Swap::committed;
}

std::optional<std::string> IcebergTable::settle(const std::string& base, const std::string& next) {
    const auto unknown = [&](const std::string& why) {
        core::log::warn("archive commit outcome still unknown; keeping its files",
                        {{"table", ident_.dotted()}, {"metadata", next}, {"reason", why}});
        return CommitStateUnknown("archive: outcome of the commit of " + next + " unknown: " + why);
    };
    std::optional<std::string> current;
    try {
        current = catalog_.load_settled(ident_);
        adopt_vended_credentials();
    } catch (const std::exception& e) {
        throw unknown(e.what());
    }
    if (!current) throw unknown("the table is no longer in the catalog");
    if (*current == next) return next;
    if (*current == base) return std::nullopt;
    // Another version is current: another writer won the swap from `base`, or committed on top
    // of ours. The version that directly follows `base` in the current version's history is
    // the one that won.
    std::vector<std::string> chain;
    try {
        const auto md = load_metadata(*current);
        if (md.contains("metadata-log")) {
            for (const auto& e : md["metadata-log"]) {
                chain.push_back(e["metadata-file"].get<std::string>());
            }
        }
    } catch (const std::exception& e) {
        throw unknown(std::string("cannot read the current metadata: ") + e.what());
    }
    chain.push_back(*current);
    const auto it = std::find(chain.begin(), chain.end(), base);
    if (it == chain.end() || it + 1 == chain.end()) {
        throw unknown("the base version is no longer in the current metadata log");
    }
    if (*(it + 1) == next) return next;
    return std::nullopt;
}

std::optional<std::string> IcebergTable::settle_change(const json& base, const json& next) {
    const auto unknown = [&](const std::string& why) {
        core::log::warn("archive commit outcome still unknown; keeping its files",
                        {{"table", ident_.dotted()}, {"reason", why}});
        return CommitStateUnknown("archive: outcome of a commit to " + ident_.dotted() +
                                  " unknown: " + why);
    };
    std::optional<std::string> current;
    json md;
    try {
        current = catalog_.load_settled(ident_);
        adopt_vended_credentials();
        if (current) md = load_metadata(*current);
    } catch (const std::exception& e) {
        throw unknown(e.what());
    }
    if (!current) throw unknown("the table is no longer in the catalog");
    std::set<std::int64_t> have;
    for (const auto& s : md["snapshots"]) have.insert(s["snapshot-id"].get<std::int64_t>());
    // A change that adds a snapshot is in when its snapshot is: its id is new and random, and
    // the commit asserted main at the base, so it applied at most once.
    const auto added = current_id(next);
    if (added && added != current_id(base)) {
        if (have.count(*added) != 0) return current;
        return std::nullopt;
    }
    // A change that removes snapshots (expiry) is in when they are gone; applying it twice
    // changes nothing more.
    std::set<std::int64_t> kept;
    for (const auto& s : next["snapshots"]) kept.insert(s["snapshot-id"].get<std::int64_t>());
    bool removed_any = false;
    for (const auto& s : base["snapshots"]) {
        const auto id = s["snapshot-id"].get<std::int64_t>();
        if (kept.count(id) != 0) continue;
        removed_any = true;
        if (have.count(id) != 0) return std::nullopt;
    }
    if (!removed_any) throw unknown("the change neither adds nor removes a snapshot");
    return current;
}

bool IcebergTable::commit_with_retries(const char* operation, const Builder& build) {
    for (int attempt = 0; attempt < kCommitAttempts; ++attempt) {
        if (attempt > 0) refresh();
        auto next = build(attempt);
        if (!next) return false;
        Swap swap = Swap::not_committed;
        try {
            swap = commit_metadata(std::move(next->metadata), next->progress);
        } catch (const CommitStateUnknown&) {
            throw;  // the attempt's files may be referenced: all kept
        } catch (...) {
            for (const auto& f : next->attempt_files) io_.remove(f);
            throw;
        }
        if (swap == Swap::committed) return true;
        for (const auto& f : next->attempt_files) io_.remove(f);
        core::log::info("archive commit conflict, retrying on the new table version",
                        {{"operation", operation}, {"attempt", std::to_string(attempt + 1)}});
    }
    throw std::runtime_error(std::string("archive: gave up committing (") + operation + ") after " +
                             std::to_string(kCommitAttempts) + " conflicts");
}

// write.metadata.delete-after-commit.enabled: metadata files that fell off the metadata log are
// referenced by nothing once the new version is committed.
void IcebergTable::delete_dropped_metadata(const json& before, const json& after) const {
    std::set<std::string> kept;
    for (const auto& e : after["metadata-log"]) kept.insert(e["metadata-file"].get<std::string>());
    for (const auto& e : before["metadata-log"]) {
        const auto f = e["metadata-file"].get<std::string>();
        if (kept.count(f) == 0 && f.rfind(location_ + "/", 0) == 0) io_.remove(f);
    }
}

bool IcebergTable::append(const std::vector<DataFile>& files, const Progress& expected,
                          const Progress& next) {
    const auto snapshot_id = new_snapshot_id();
    // The manifest is written once: its entries inherit sequence numbers, so a retry on a new
    // base only rewrites the manifest list.
    std::vector<avro::Value> entries;
    std::int64_t added_records = 0;
    std::int64_t added_size = 0;
    std::set<std::int32_t> days;
    for (const auto& f : files) {
        entries.push_back(added_entry(f, snapshot_id, partition_));
        added_records += f.record_count;
        added_size += f.file_size_in_bytes;
        days.insert(f.partition);
    }
    ManifestFile manifest = summarize_manifest(entries);
    const auto manifest_uri = fmt::format("{}/metadata/{}-m0.avro", location_, uuid4());
    if (!files.empty()) {
        const auto bytes = write_manifest(entries, partition_);
        io_.write(manifest_uri, bytes);
        manifest.manifest_path = manifest_uri;
        manifest.manifest_length = static_cast<std::int64_t>(bytes.size());
        manifest.added_snapshot_id = snapshot_id;
    }

    const auto build = [&](int attempt) -> std::optional<NextVersion> {
        const auto have = progress();
        if (have.archived_seq != expected.archived_seq) {
            core::log::warn("archive progress moved under this commit, abandoning it",
                            {{"expected", std::to_string(expected.archived_seq)},
                             {"table", std::to_string(have.archived_seq)}});
            return std::nullopt;
        }
        json md = metadata_;
        const auto seq = md["last-sequence-number"].get<std::int64_t>() + 1;
        const auto parent = current_id(md);
        std::vector<ManifestFile> list;
        if (!files.empty()) {
            manifest.sequence_number = seq;
            manifest.min_sequence_number = seq;
            list.push_back(manifest);
        }
        json summary = json::object();
        summary["operation"] = "append";
        std::int64_t prev_records = 0, prev_size = 0, prev_files = 0, prev_deletes = 0,
                     prev_pos = 0, prev_eq = 0;
        if (parent) {
            const auto* p = find_snapshot(md, *parent);
            if (p == nullptr) throw std::runtime_error("archive: current snapshot missing");
            for (auto& m : manifests_of(io_, *p)) list.push_back(std::move(m));
            prev_records = summary_long(*p, "total-records");
            prev_size = summary_long(*p, "total-files-size");
            prev_files = summary_long(*p, "total-data-files");
            prev_deletes = summary_long(*p, "total-delete-files");
            prev_pos = summary_long(*p, "total-position-deletes");
            prev_eq = summary_long(*p, "total-equality-deletes");
        }
        summary["added-data-files"] = std::to_string(files.size());
        summary["added-records"] = std::to_string(added_records);
        summary["added-files-size"] = std::to_string(added_size);
        summary["changed-partition-count"] = std::to_string(days.size());
        summary["total-records"] = std::to_string(prev_records + added_records);
        summary["total-files-size"] = std::to_string(prev_size + added_size);
        summary["total-data-files"] =
            std::to_string(prev_files + static_cast<std::int64_t>(files.size()));
        summary["total-delete-files"] = std::to_string(prev_deletes);
        summary["total-position-deletes"] = std::to_string(prev_pos);
        summary["total-equality-deletes"] = std::to_string(prev_eq);
        put_progress(summary, next);

        const auto list_uri = fmt::format("{}/metadata/snap-{}-{}-{}.avro", location_, snapshot_id,
                                          attempt + 1, uuid4());
        io_.write(list_uri, write_manifest_list(list, snapshot_id, parent, seq));

        add_snapshot(md, snapshot_id, parent, seq, std::move(summary), list_uri);
        put_progress(md["properties"], next);
        return NextVersion{std::move(md),
                           CommitProgress{next.archived_seq, next.max_ingest_batch_id, snapshot_id},
                           {list_uri}};
    };
    if (commit_with_retries("append", build)) return true;
    // Every attempt is known not to have been committed: the manifest is referenced by nothing.
    if (!files.empty()) io_.remove(manifest_uri);
    return false;
}

// A "replace" snapshot that changes no data, so a scan plans from a short manifest list.
int IcebergTable::merge_manifests(const MaintenanceOptions& o) {
    int merged_count = 0;
    const auto build = [&](int /*attempt*/) -> std::optional<NextVersion> {
        const auto parent = current_id(metadata_);
        if (!parent) return std::nullopt;
        const auto* p = find_snapshot(metadata_, *parent);
        if (p == nullptr) throw std::runtime_error("archive: current snapshot missing");
        auto list = manifests_of(io_, *p);
        std::vector<ManifestFile> small;
        std::vector<ManifestFile> kept;
        for (auto& m : list) {
            const bool mergeable = m.content == 0 && m.partition_spec_id == kSpecId &&
                                   m.manifest_length < kManifestTargetBytes;
            (mergeable ? small : kept).push_back(std::move(m));
        }
        if (static_cast<int>(list.size()) <= o.max_manifests || small.size() < 2) {
            return std::nullopt;
        }
        json md = metadata_;
        const auto seq = md["last-sequence-number"].get<std::int64_t>() + 1;
        const auto snapshot_id = new_snapshot_id();
        std::vector<avro::Value> entries;
        std::int64_t min_seq = std::numeric_limits<std::int64_t>::max();
        for (const auto& m : small) {
            for (auto e : read_manifest(io_.read(m.manifest_path))) {
                if (e["status"].integer() == 2) continue;  // deleted entries are history only
                // An EXISTING entry must carry the values it inherited (spec "Sequence Number
                // Inheritance"), or it would take the new manifest's.
                if (e["snapshot_id"].is_null()) e.set("snapshot_id", m.added_snapshot_id);
                if (e["sequence_number"].is_null()) e.set("sequence_number", m.sequence_number);
                if (e["file_sequence_number"].is_null()) {
                    e.set("file_sequence_number", m.sequence_number);
                }
                e.set("status", 0);
                min_seq = std::min(min_seq, e["sequence_number"].integer());
                entries.push_back(std::move(e));
            }
        }
        auto merged = summarize_manifest(entries);
        const auto bytes = write_manifest(entries, partition_);
        merged.manifest_path = fmt::format("{}/metadata/{}-m0.avro", location_, uuid4());
        merged.manifest_length = static_cast<std::int64_t>(bytes.size());
        merged.sequence_number = seq;
        merged.min_sequence_number = entries.empty() ? seq : min_seq;
        merged.added_snapshot_id = snapshot_id;
        NextVersion v;
        io_.write(merged.manifest_path, bytes);
        v.attempt_files.push_back(merged.manifest_path);
        std::vector<ManifestFile> next_list{merged};
        for (auto& m : kept) next_list.push_back(std::move(m));
        const auto list_uri =
            fmt::format("{}/metadata/snap-{}-1-{}.avro", location_, snapshot_id, uuid4());
        try {
            io_.write(list_uri, write_manifest_list(next_list, snapshot_id, parent, seq));
        } catch (...) {
            io_.remove(merged.manifest_path);
            throw;
        }
        v.attempt_files.push_back(list_uri);

        json summary = json::object();
        summary["operation"] = "replace";
        summary["manifests-created"] = "1";
        summary["manifests-kept"] = std::to_string(kept.size());
        summary["manifests-replaced"] = std::to_string(small.size());
        summary["entries-processed"] = std::to_string(entries.size());
        // Totals and the archive's progress are unchanged: carry them over.
        for (const auto& [k, val] : (*p)["summary"].items()) {
            if (k.rfind("total-", 0) == 0 || k.rfind("trackd.", 0) == 0 || k == "kafka.offsets") {
                summary[k] = val;
            }
        }
        add_snapshot(md, snapshot_id, *parent, seq, std::move(summary), list_uri);
        v.metadata = std::move(md);
        merged_count = static_cast<int>(small.size());
        return v;
    };
    return commit_with_retries("merge manifests", build) ? merged_count : 0;
}

// Snapshots older than the age limit go, except the newest few, the current one and any ref.
std::pair<int, int> IcebergTable::expire_snapshots(const MaintenanceOptions& o) {
    std::set<std::string> candidates;  // files only the expired snapshots may reference
    int n_expired = 0;
    const auto build = [&](int /*attempt*/) -> std::optional<NextVersion> {
        candidates.clear();
        const auto& snaps = metadata_["snapshots"];
        std::vector<std::pair<std::int64_t, std::int64_t>> by_time;  // (timestamp, id)
        for (const auto& s : snaps) {
            by_time.emplace_back(s["timestamp-ms"].get<std::int64_t>(),
                                 s["snapshot-id"].get<std::int64_t>());
        }
        std::sort(by_time.rbegin(), by_time.rend());
        std::set<std::int64_t> keep;
        if (const auto cur = current_id(metadata_)) keep.insert(*cur);
        for (const auto& r : metadata_["refs"]) keep.insert(r["snapshot-id"].get<std::int64_t>());
        const auto cutoff = now_ms() - o.snapshot_max_age_ms;
        for (std::size_t i = 0; i < by_time.size(); ++i) {
            if (static_cast<int>(i) < o.min_snapshots_to_keep || by_time[i].first >= cutoff) {
                keep.insert(by_time[i].second);
            }
        }
        if (keep.size() >= snaps.size()) return std::nullopt;
        json md = metadata_;
        json kept_snaps = json::array();
        std::set<std::string> kept_manifests;
        std::set<std::string> kept_data;
        std::vector<const json*> expired;
        for (const auto& s : snaps) {
            if (keep.count(s["snapshot-id"].get<std::int64_t>()) != 0) {
                kept_snaps.push_back(s);
                for (const auto& m : manifests_of(io_, s)) kept_manifests.insert(m.manifest_path);
            } else {
                expired.push_back(&s);
            }
        }
        for (const auto& path : kept_manifests) {
            for (const auto& e : read_manifest(io_.read(path))) {
                // A DELETED entry (a compaction's replaced file) keeps nothing alive.
                if (e["status"].integer() == 2) continue;
                kept_data.insert(e["data_file"]["file_path"].str());
            }
        }
        for (const auto* s : expired) {
            candidates.insert((*s)["manifest-list"].get<std::string>());
            for (const auto& m : manifests_of(io_, *s)) {
                if (kept_manifests.count(m.manifest_path) != 0) continue;
                candidates.insert(m.manifest_path);
                for (const auto& e : read_manifest(io_.read(m.manifest_path))) {
                    const auto& f = e["data_file"]["file_path"].str();
                    if (kept_data.count(f) == 0) candidates.insert(f);
                }
            }
        }
        // The snapshot log keeps only what follows the last expired snapshot (spec).
        json log = json::array();
        for (const auto& e : md["snapshot-log"]) {
            if (keep.count(e["snapshot-id"].get<std::int64_t>()) == 0) {
                log = json::array();
            } else {
                log.push_back(e);
            }
        }
        // Statistics files (another engine's: Trino's ANALYZE, Spark's) go with the snapshot
        // they describe (spec; Java's RemoveSnapshots): the entries of an expired snapshot are
        // dropped, and their files deleted with the snapshot's unless a kept entry names them.
        std::set<std::string> kept_statistics;
        std::set<std::string> dropped_statistics;
        for (const char* list : kStatisticsLists) {
            if (!md.contains(list) || !md[list].is_array()) continue;
            json kept_entries = json::array();
            for (auto& st : md[list]) {
                const bool kept = st.contains("snapshot-id") && st["snapshot-id"].is_number() &&
                                  keep.count(st["snapshot-id"].get<std::int64_t>()) != 0;
                if (st.contains("statistics-path") && st["statistics-path"].is_string()) {
                    (kept ? kept_statistics : dropped_statistics)
                        .insert(st["statistics-path"].get<std::string>());
                }
                if (kept) kept_entries.push_back(std::move(st));
            }
            md[list] = std::move(kept_entries);
        }
        for (const auto& f : dropped_statistics) {
            if (kept_statistics.count(f) == 0) candidates.insert(f);
        }
        n_expired = static_cast<int>(expired.size());
        md["snapshots"] = std::move(kept_snaps);
        md["snapshot-log"] = std::move(log);
        md["last-updated-ms"] = std::max(now_ms(), md["last-updated-ms"].get<std::int64_t>());
        return NextVersion{std::move(md), std::nullopt, {}};
    };
    if (!commit_with_retries("expire snapshots", build)) return {0, 0};
    // A catalog that writes the metadata itself (REST) drops the statistics of removed
    // snapshots on its own; a file its version still names stays.
    for (const auto& f : statistics_paths(metadata_)) candidates.erase(f);
    // Only once the expiry is known committed: until then a reader may still plan a scan from
    // them, and if its outcome stays unknown they stay for the orphan clean-up.
    int deleted = 0;
    for (const auto& f : candidates) {
        if (f.rfind(location_ + "/", 0) != 0) continue;  // never outside the table
        io_.remove(f);
        ++deleted;
    }
    return {n_expired, deleted};
}

namespace {

// The rows of one partition in the table's sort order: vehicle_id (bytewise), recorded_at, then
// the Kafka coordinates, as HistorySource reads them.
void sort_rows(std::vector<ArchiveRow>& rows) {
    std::sort(rows.begin(), rows.end(), [](const ArchiveRow& a, const ArchiveRow& b) {
        return std::tie(a.vehicle_id, a.recorded_at_us, a.kafka_partition, a.kafka_offset) <
               std::tie(b.vehicle_id, b.recorded_at_us, b.kafka_partition, b.kafka_offset);
    });
}

}  // namespace

CompactionReport IcebergTable::compact(const CompactionOptions& o) {
    refresh();
    CompactionReport report;
    const auto parent = current_id(metadata_);
    if (!parent) return report;
    const auto* current = find_snapshot(metadata_, *parent);
    if (current == nullptr) throw std::runtime_error("archive: current snapshot missing");
    // Live data files under the size threshold, by partition; and the input's row count.
    std::map<std::int32_t, std::vector<std::string>> small;
    std::map<std::string, std::int64_t> input_rows;
    for (const auto& m : manifests_of(io_, *current)) {
        if (m.content != 0) continue;
        for (const auto& e : read_manifest(io_.read(m.manifest_path))) {
            if (e["status"].integer() == 2) continue;
            ++report.data_files_before;
            const auto& df = e["data_file"];
            const auto part = partition_of_entry(e);
            if (!part || df["file_size_in_bytes"].integer() >= o.small_file_bytes) continue;
            small[*part].push_back(df["file_path"].str());
            input_rows[df["file_path"].str()] = df["record_count"].integer();
        }
    }
    std::set<std::string> inputs;
    std::vector<DataFile> outputs;
    std::vector<std::string> written;  // URIs
    std::set<std::int32_t> partitions;
    std::int64_t rows_in = 0;
    const auto drop_written = [&] {
        for (const auto& f : written) io_.remove(f);
    };
    try {
        for (const auto& [part, files] : small) {
            if (static_cast<int>(files.size()) < o.min_files) continue;
            std::vector<ArchiveRow> rows;
            for (const auto& f : files) {
                auto more = read_archive_rows(io_, f);
                if (static_cast<std::int64_t>(more.size()) != input_rows[f]) {
                    throw std::runtime_error(
                        "archive: " + f + " holds " + std::to_string(more.size()) +
                        " rows, its manifest entry says " + std::to_string(input_rows[f]));
                }
                rows_in += static_cast<std::int64_t>(more.size());
                std::move(more.begin(), more.end(), std::back_inserter(rows));
                inputs.insert(f);
            }
            sort_rows(rows);
            std::unique_ptr<ParquetFileWriter> writer;
            for (const auto& r : rows) {
                if (writer && writer->approximate_bytes() >= o.target_file_bytes) {
                    outputs.push_back(writer->finish());
                    writer.reset();
                }
                if (!writer) {
                    const auto uri = new_data_file(part);
                    written.push_back(uri);
                    writer = std::make_unique<ParquetFileWriter>(io_, uri, part);
                }
                writer->append(r);
            }
            if (writer) outputs.push_back(writer->finish());
            partitions.insert(part);
            ++report.partitions;
            report.files_rewritten += static_cast<int>(files.size());
            report.rows += static_cast<std::int64_t>(rows.size());
        }
    } catch (...) {
        drop_written();
        throw;
    }
    if (inputs.empty()) {
        report.data_files_after = report.data_files_before;
        for (const auto& [part, files] : small) {
            report.max_small_files_per_partition =
                std::max(report.max_small_files_per_partition, static_cast<int>(files.size()));
        }
        return report;
    }
    report.files_written = static_cast<int>(outputs.size());

    const auto snapshot_id = new_snapshot_id();
    std::vector<avro::Value> added;
    std::int64_t added_size = 0;
    for (const auto& f : outputs) {
        added.push_back(added_entry(f, snapshot_id, partition_));
        added_size += f.file_size_in_bytes;
    }
    ManifestFile added_manifest = summarize_manifest(added);
    added_manifest.manifest_path = fmt::format("{}/metadata/{}-m0.avro", location_, uuid4());
    try {
        const auto bytes = write_manifest(added, partition_);
        io_.write(added_manifest.manifest_path, bytes);
        added_manifest.manifest_length = static_cast<std::int64_t>(bytes.size());
    } catch (...) {
        drop_written();
        throw;
    }
    added_manifest.added_snapshot_id = snapshot_id;

    const auto build = [&](int attempt) -> std::optional<NextVersion> {
        const auto base_id = current_id(metadata_);
        if (!base_id) return std::nullopt;
        const auto* p = find_snapshot(metadata_, *base_id);
        if (p == nullptr) throw std::runtime_error("archive: current snapshot missing");
        json md = metadata_;
        const auto seq = md["last-sequence-number"].get<std::int64_t>() + 1;
        NextVersion v;
        std::vector<ManifestFile> list;
        std::size_t found = 0;
        std::int64_t removed_size = 0;
        for (auto& m : manifests_of(io_, *p)) {
            auto entries = read_manifest(io_.read(m.manifest_path));
            const bool touches = std::any_of(entries.begin(), entries.end(), [&](const auto& e) {
                return e["status"].integer() != 2 &&
                       inputs.count(e["data_file"]["file_path"].str()) != 0;
            });
            if (!touches) {
                list.push_back(std::move(m));
                continue;
            }
            // Rewritten: the inputs DELETED by this snapshot, the rest EXISTING, every entry
            // with the values it inherited written out (spec "Sequence Number Inheritance").
            std::vector<avro::Value> kept;
            std::int64_t min_seq = std::numeric_limits<std::int64_t>::max();
            for (auto e : entries) {
                if (e["status"].integer() == 2) continue;  // history only
                if (e["snapshot_id"].is_null()) e.set("snapshot_id", m.added_snapshot_id);
                if (e["sequence_number"].is_null()) e.set("sequence_number", m.sequence_number);
                if (e["file_sequence_number"].is_null()) {
                    e.set("file_sequence_number", m.sequence_number);
                }
                if (inputs.count(e["data_file"]["file_path"].str()) != 0) {
                    e.set("status", 2);
                    e.set("snapshot_id", snapshot_id);
                    ++found;
                    removed_size += e["data_file"]["file_size_in_bytes"].integer();
                } else {
                    e.set("status", 0);
                    min_seq = std::min(min_seq, e["sequence_number"].integer());
                }
                kept.push_back(std::move(e));
            }
            auto rewritten = summarize_manifest(kept);
            const auto bytes = write_manifest(kept, partition_);
            rewritten.manifest_path =
                fmt::format("{}/metadata/{}-m{}.avro", location_, uuid4(), attempt + 1);
            rewritten.manifest_length = static_cast<std::int64_t>(bytes.size());
            rewritten.sequence_number = seq;
            rewritten.min_sequence_number =
                min_seq == std::numeric_limits<std::int64_t>::max() ? seq : min_seq;
            rewritten.added_snapshot_id = snapshot_id;
            io_.write(rewritten.manifest_path, bytes);
            v.attempt_files.push_back(rewritten.manifest_path);
            list.push_back(std::move(rewritten));
        }
        if (found != inputs.size()) {
            // Another writer replaced or removed an input (another compaction, say): nothing of
            // this one may be committed.
            core::log::warn("archive compaction input changed under it, abandoning",
                            {{"table", ident_.dotted()},
                             {"inputs", std::to_string(inputs.size())},
                             {"still_live", std::to_string(found)}});
            for (const auto& f : v.attempt_files) io_.remove(f);
            return std::nullopt;
        }
        added_manifest.sequence_number = seq;
        added_manifest.min_sequence_number = seq;
        list.insert(list.begin(), added_manifest);
        const auto list_uri = fmt::format("{}/metadata/snap-{}-{}-{}.avro", location_, snapshot_id,
                                          attempt + 1, uuid4());
        io_.write(list_uri, write_manifest_list(list, snapshot_id, *base_id, seq));
        v.attempt_files.push_back(list_uri);

        json summary = json::object();
        summary["operation"] = "replace";
        summary["added-data-files"] = std::to_string(outputs.size());
        summary["deleted-data-files"] = std::to_string(inputs.size());
        summary["added-records"] = std::to_string(rows_in);
        summary["deleted-records"] = std::to_string(rows_in);
        summary["added-files-size"] = std::to_string(added_size);
        summary["removed-files-size"] = std::to_string(removed_size);
        summary["changed-partition-count"] = std::to_string(partitions.size());
        // The rows and the archive's progress are unchanged: carry them over.
        for (const auto& [k, val] : (*p)["summary"].items()) {
            if (k.rfind("total-", 0) == 0 || k.rfind("trackd.", 0) == 0 || k == "kafka.offsets") {
                summary[k] = val;
            }
        }
        summary["total-data-files"] = std::to_string(summary_long(*p, "total-data-files") +
                                                     static_cast<std::int64_t>(outputs.size()) -
                                                     static_cast<std::int64_t>(inputs.size()));
        summary["total-files-size"] =
            std::to_string(summary_long(*p, "total-files-size") + added_size - removed_size);
        add_snapshot(md, snapshot_id, *base_id, seq, std::move(summary), list_uri);
        v.metadata = std::move(md);
        return v;
    };
    bool committed = false;
    try {
        committed = commit_with_retries("compact", build);
    } catch (const CommitStateUnknown&) {
        throw;  // the new files may be in the table: kept (orphan clean-up if not)
    } catch (...) {
        drop_written();
        io_.remove(added_manifest.manifest_path);
        throw;
    }
    if (!committed) {
        drop_written();
        io_.remove(added_manifest.manifest_path);
        return CompactionReport{0, 0, 0, 0, report.data_files_before, report.data_files_before, 0};
    }
    report.data_files_after =
        report.data_files_before - static_cast<int>(inputs.size()) + report.files_written;
    for (const auto& [part, files] : small) {
        const int left = partitions.count(part) != 0 ? 0 : static_cast<int>(files.size());
        report.max_small_files_per_partition = std::max(report.max_small_files_per_partition, left);
    }
    core::log::info("archive compaction committed",
                    {{"table", ident_.dotted()},
                     {"partitions", std::to_string(report.partitions)},
                     {"files_rewritten", std::to_string(report.files_rewritten)},
                     {"files_written", std::to_string(report.files_written)},
                     {"rows", std::to_string(report.rows)}});
    return report;
}

// Files under the table's location that no metadata reachable from the current version
// references (failed or killed commits, commits whose outcome stayed unknown), older than the
// safety margin.
int IcebergTable::delete_orphans(const MaintenanceOptions& o) {
    refresh();  // what is referenced now, whoever committed last
    std::set<std::string> referenced;
    const auto add = [&](const std::string& uri) {
        return referenced.insert(FileIO::normalize(uri)).second;
    };
    add(metadata_location_);
    for (const auto& e : metadata_["metadata-log"]) add(e["metadata-file"].get<std::string>());
    // Statistics files another engine wrote (Trino's ANALYZE, Spark's compute statistics): the
    // metadata names them outside the snapshots.
    for (const auto& f : statistics_paths(metadata_)) add(f);
    for (const auto& s : metadata_["snapshots"]) {
        add(s["manifest-list"].get<std::string>());
        for (const auto& m : manifests_of(io_, s)) {
            if (!add(m.manifest_path)) continue;
            for (const auto& e : read_manifest(io_.read(m.manifest_path))) {
                add(e["data_file"]["file_path"].str());
            }
        }
    }
    int deleted = 0;
    // Read once, and only when there is an unreferenced file to judge.
    std::optional<std::chrono::system_clock::time_point> horizon;
    const auto old_enough = [&](const StoredFile& f) {
        if (!horizon) horizon = storage_horizon(o);
        return f.modified <= *horizon;
    };
    // A listing of the table's data/ and metadata/ prefixes (on S3: LIST requests, a page of
    // 1000 keys each), then one delete per orphan.
    for (const char* dir : {"/data", "/metadata"}) {
        for (const auto& f : io_.list(location_ + dir)) {
            const auto key = FileIO::normalize(f.uri);
            if (referenced.count(key) != 0) continue;
            // Hadoop's local file system (a REST catalog server's FileIO) writes a checksum
            // ".<name>.crc" beside each file: it goes with its file.
            const auto slash = key.rfind('/');
            const auto name = key.substr(slash + 1);
            if (name.size() > 5 && name.front() == '.' && name.rfind(".crc") == name.size() - 4 &&
                referenced.count(key.substr(0, slash + 1) + name.substr(1, name.size() - 5)) != 0) {
                continue;
            }
            if (!old_enough(f)) continue;  // maybe a commit in progress
            if (io_.remove(f.uri)) ++deleted;
        }
    }
    return deleted;
}

int IcebergTable::abort_stale_uploads(const MaintenanceOptions& o) {
    // A key allowed to write but not to list or abort uploads must not stop maintenance, nor
    // the archiver that runs it: said, and left to a lifecycle rule.
    const auto denied = [&](const StorageAccessDenied& e) {
        core::log::warn(
            "archive: incomplete multipart uploads not aborted: the key may not list or abort "
            "them (s3:ListBucketMultipartUploads, s3:AbortMultipartUpload); a bucket lifecycle "
            "rule (AbortIncompleteMultipartUpload) removes them",
            {{"table", ident_.dotted()}, {"error", e.what()}});
    };
    std::optional<std::vector<PendingUpload>> uploads;
    try {
        uploads = io_.list_uploads(location_);
    } catch (const StorageAccessDenied& e) {
        denied(e);
        return 0;
    }
    if (!uploads) {
        core::log::info(
            "archive: incomplete multipart uploads not looked for: no key pair to sign the "
            "request with (archive.s3_access_key_id or AWS_ACCESS_KEY_ID); a bucket lifecycle "
            "rule (AbortIncompleteMultipartUpload) removes them",
            {{"table", ident_.dotted()}});
        return 0;
    }
    if (uploads->empty()) return 0;
    const auto horizon = storage_horizon(o);
    int aborted = 0;
    for (const auto& u : *uploads) {
        if (u.initiated > horizon) continue;  // maybe a file going up now
        try {
            if (!io_.abort_upload(u)) continue;
        } catch (const StorageAccessDenied& e) {
            denied(e);
            return aborted;
        }
        ++aborted;
        core::log::info("archive: aborted an incomplete multipart upload",
                        {{"table", ident_.dotted()}, {"key", u.key}, {"upload_id", u.upload_id}});
    }
    return aborted;
}

void IcebergTable::adopt_vended_credentials() {
    if (auto c = catalog_.vended_credentials()) io_.use_credentials(*c);
}

std::chrono::system_clock::time_point IcebergTable::storage_horizon(const MaintenanceOptions& o) {
    // Ages on the storage's clock, the one that stamped the files: on this host's, a server
    // whose clock is behind would make a commit in progress look old enough to delete.
    const auto storage_now = io_.stamp_now(location_ + "/metadata/.trackd-clock-" + uuid4());
    const double skew_s =
        std::chrono::duration<double>(storage_now - std::chrono::system_clock::now()).count();
    if (std::abs(skew_s) >= kClockSkewWarningS) {
        core::log::warn(
            fmt::format("archive storage's clock is {} s {} this host's; "
                        "orphan ages are measured on the storage's clock",
                        std::lround(std::abs(skew_s)), skew_s < 0 ? "behind" : "ahead of"),
            {{"table", ident_.dotted()}});
    }
    return storage_now - std::chrono::milliseconds(o.orphan_min_age_ms);
}

}  // namespace trackd::archive
