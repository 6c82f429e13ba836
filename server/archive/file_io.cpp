#include "file_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <arrow/buffer.h>
#include <arrow/filesystem/s3fs.h>
#include <arrow/io/file.h>
#include <arrow/io/interfaces.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "trackd/archive/object_storage.hpp"
#include "trackd/core/error.hpp"
#include "trackd/core/log.hpp"
#include "trackd/core/metrics.hpp"

#include "s3_requests.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in a header

namespace trackd::archive {
namespace {

namespace fs = std::filesystem;

void check(const arrow::Status& s, const std::string& what) {
    if (!s.ok()) throw std::runtime_error("archive: " + what + ": " + s.ToString());
}
template <class T>
T check(arrow::Result<T> r, const std::string& what) {
    check(r.status(), what);
    return std::move(r).ValueUnsafe();
}

// "s3://bucket/key" -> "bucket/key", the path Arrow's S3 filesystem takes.
std::string s3_path(const std::string& uri) {
    const auto [bucket, key] = split_s3_uri(uri);
    return key.empty() ? bucket : bucket + "/" + key;
}

// Bounded exponential backoff with jitter for every S3 request the AWS SDK marks retryable
// (connection refused or reset, timeouts, 5xx, throttling); each retry is logged.
class BoundedBackoff final : public arrow::fs::S3RetryStrategy {
  public:
    BoundedBackoff(int attempts, int base_ms) : attempts_(attempts), base_ms_(base_ms) {}

    bool ShouldRetry(const AWSErrorDetail& error, std::int64_t attempted_retries) override {
        const bool retry = error.should_retry && attempted_retries + 1 < attempts_;
        if (retry) {
            log_storage_retry(error.exception_name + ": " + error.message, attempted_retries + 1,
                              attempts_);
        }
        return retry;
    }

    std::int64_t CalculateDelayBeforeNextRetry(const AWSErrorDetail& /*error*/,
                                               std::int64_t attempted_retries) override {
        return storage_retry_delay_ms(base_ms_, attempted_retries);
    }

  private:
    int attempts_;
    int base_ms_;
};

std::once_flag g_s3_once;

void initialize_s3() {
    std::call_once(g_s3_once, [] {
        auto options = arrow::fs::S3GlobalOptions::Defaults();
        options.log_level = arrow::fs::S3LogLevel::Fatal;
        check(arrow::fs::InitializeS3(options), "initialise Arrow's S3 filesystem");
    });
}

std::string first_of(const std::map<std::string, std::string>& env,
                     std::initializer_list<const char*> names) {
    for (const char* n : names) {
        const auto it = env.find(n);
        if (it != env.end() && !it->second.empty()) return it->second;
    }
    return {};
}

// A local file is written under a hidden name beside its own and gets its final name only when
// it is complete and fsynced, so a listing never finds a half file (a crash leaves the hidden one,
// an orphan the clean-up deletes). Final names are unique, so the hidden name is too.
std::string staging_path(const std::string& path) {
    const fs::path p(path);
    return (p.parent_path() / ("." + p.filename().string() + ".part")).string();
}

// link(), not rename(): a name that exists already is refused, never replaced. The folder is
// fsynced so that the name is durable before anything points at it.
void publish(const std::string& staging, const std::string& path) {
    if (::link(staging.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(staging.c_str());
        throw std::runtime_error("archive: cannot create " + path + ": " + std::strerror(err));
    }
    ::unlink(staging.c_str());
    const int dir = ::open(fs::path(path).parent_path().c_str(), O_RDONLY | O_DIRECTORY);
    if (dir >= 0) {
        ::fsync(dir);
        ::close(dir);
    }
}

}  // namespace

void log_storage_retry(const std::string& error, std::int64_t retry, int attempts,
                       const std::string& request) {
    static core::metrics::Counter& retries = core::metrics::counter(
        "trackd_archive_storage_retries_total",
        "Object storage (S3) requests of the archive retried after a retryable error");
    retries.inc();
    if (request.empty()) {  // Arrow's: the error names the operation
        core::log::warn("archive storage request failed, retrying",
                        {{"error", error},
                         {"retry", std::to_string(retry)},
                         {"of", std::to_string(attempts - 1)}});
    } else {
        core::log::warn("archive storage request failed, retrying",
                        {{"request", request},
                         {"error", error},
                         {"retry", std::to_string(retry)},
                         {"of", std::to_string(attempts - 1)}});
    }
}

std::int64_t storage_retry_delay_ms(int base_ms, std::int64_t attempted_retries) {
    constexpr std::int64_t kMaxDelayMs = 10000;
    const auto shift = std::min<std::int64_t>(attempted_retries, 16);
    const auto delay =
        std::min<std::int64_t>(static_cast<std::int64_t>(base_ms) << shift, kMaxDelayMs);
    // Half fixed, half random: writers retrying together spread out.
    thread_local std::minstd_rand gen{std::random_device{}()};
    return delay / 2 + std::uniform_int_distribution<std::int64_t>(0, delay / 2)(gen);
}

std::string local_path(const std::string& uri) {
    if (uri.rfind("file://", 0) == 0) return uri.substr(7);
    if (uri.rfind("file:", 0) == 0) return uri.substr(5);
    return uri;
}

bool is_s3_uri(const std::string& uri) {
    return uri.rfind("s3://", 0) == 0 || uri.rfind("s3a://", 0) == 0;
}

std::pair<std::string, std::string> split_s3_uri(const std::string& uri) {
    if (!is_s3_uri(uri)) throw std::runtime_error("archive: not an s3:// URI: " + uri);
    const auto rest = uri.substr(uri.find("://") + 3);
    const auto slash = rest.find('/');
    std::string bucket = rest.substr(0, slash);
    std::string key = slash == std::string::npos ? std::string() : rest.substr(slash + 1);
    while (!key.empty() && key.back() == '/') key.pop_back();
    if (bucket.empty()) throw std::runtime_error("archive: no bucket in " + uri);
    return {bucket, key};
}

std::map<std::string, std::string> aws_environment() {
    std::map<std::string, std::string> env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const std::string_view entry(*e);
        if (entry.rfind("AWS_", 0) != 0) continue;
        const auto eq = entry.find('=');
        if (eq == std::string_view::npos) continue;
        env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    }
    return env;
}

S3Settings resolve_s3_settings(const config::ArchiveConfig& c,
                               const std::map<std::string, std::string>& env) {
    S3Settings s;
    auto endpoint = !c.s3_endpoint.empty()
                        ? c.s3_endpoint
                        : first_of(env, {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"});
    if (!endpoint.empty()) {
        const auto sep = endpoint.find("://");
        if (sep != std::string::npos) {
            s.scheme = endpoint.substr(0, sep);
            endpoint = endpoint.substr(sep + 3);
        }
        while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
        s.endpoint = endpoint;
    }
    const auto region =
        !c.s3_region.empty() ? c.s3_region : first_of(env, {"AWS_REGION", "AWS_DEFAULT_REGION"});
    if (!region.empty()) s.region = region;
    s.path_style = c.s3_path_style;
    if (!c.s3_access_key_id.empty()) {
        s.access_key_id = c.s3_access_key_id;
        s.secret_access_key = c.s3_secret_access_key;
        s.session_token = c.s3_session_token;
    } else {
        s.access_key_id = first_of(env, {"AWS_ACCESS_KEY_ID"});
        s.secret_access_key = first_of(env, {"AWS_SECRET_ACCESS_KEY"});
        s.session_token = first_of(env, {"AWS_SESSION_TOKEN"});
    }
    s.retry_attempts = c.s3_retry_attempts;
    s.retry_base_delay_ms = c.s3_retry_base_delay_ms;
    s.timeout_ms = c.s3_timeout_ms;
    return s;
}

FileIO::FileIO(S3Settings s3) : settings_(std::move(s3)) {}
FileIO::~FileIO() = default;

std::shared_ptr<arrow::fs::S3FileSystem> FileIO::s3() {
    const std::lock_guard lock(mutex_);
    if (s3_) return s3_;
    initialize_s3();
    arrow::fs::S3Options o = arrow::fs::S3Options::Defaults();
    if (!settings_.access_key_id.empty()) {
        o.ConfigureAccessKey(settings_.access_key_id, settings_.secret_access_key,
                             settings_.session_token);
    }
    o.region = settings_.region;
    o.endpoint_override = settings_.endpoint;
    o.scheme = settings_.scheme;
    // Arrow addresses a bucket by path with an endpoint override, by virtual host without.
    o.force_virtual_addressing = !settings_.path_style && !settings_.endpoint.empty();
    o.connect_timeout = settings_.timeout_ms / 1000.0;
    o.request_timeout = settings_.timeout_ms / 1000.0;
    o.retry_strategy =
        std::make_shared<BoundedBackoff>(settings_.retry_attempts, settings_.retry_base_delay_ms);
    // Objects are written whole at close: one PUT for a file under a part's size (delayed
    // open), else a multipart upload completed at close.
    o.background_writes = false;
    o.allow_delayed_open = true;
    s3_ = check(arrow::fs::S3FileSystem::Make(o), "S3 filesystem");
    return s3_;
}

std::string FileIO::read(const std::string& uri) {
    if (is_s3_uri(uri)) {
        auto in = check(s3()->OpenInputFile(s3_path(uri)), "open " + uri);
        const auto size = check(in->GetSize(), "size of " + uri);
        const auto buf = check(in->ReadAt(0, size), "read " + uri);
        if (buf->size() != size) throw std::runtime_error("archive: short read of " + uri);
        return buf->ToString();
    }
    std::ifstream in(local_path(uri), std::ios::binary);
    if (!in) throw std::runtime_error("archive: cannot read " + uri);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void FileIO::write(const std::string& uri, const std::string& bytes) {
    if (is_s3_uri(uri)) {
        auto out = check(s3()->OpenOutputStream(s3_path(uri)), "create " + uri);
        check(out->Write(bytes.data(), static_cast<std::int64_t>(bytes.size())), "write " + uri);
        check(out->Close(), "upload " + uri);
        return;
    }
    const auto path = local_path(uri);
    fs::create_directories(fs::path(path).parent_path());
    const auto staging = staging_path(path);
    const int fd = ::open(staging.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) throw std::runtime_error("archive: cannot create " + staging);
    std::size_t done = 0;
    while (done < bytes.size()) {
        const auto n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n <= 0) {
            ::close(fd);
            throw std::runtime_error("archive: cannot write " + staging);
        }
        done += static_cast<std::size_t>(n);
    }
    ::fsync(fd);
    ::close(fd);
    publish(staging, path);
}

std::shared_ptr<arrow::io::OutputStream> FileIO::open_output(const std::string& uri) {
    if (is_s3_uri(uri)) return check(s3()->OpenOutputStream(s3_path(uri)), "create " + uri);
    const auto path = local_path(uri);
    fs::create_directories(fs::path(path).parent_path());
    return check(arrow::io::FileOutputStream::Open(staging_path(path)), "create " + uri);
}

std::int64_t FileIO::sync_size(const std::string& uri) {
    if (is_s3_uri(uri)) {
        const auto info = check(s3()->GetFileInfo(s3_path(uri)), "stat " + uri);
        if (info.type() != arrow::fs::FileType::File) {
            throw std::runtime_error("archive: " + uri + " is not in the bucket after its upload");
        }
        return info.size();
    }
    const auto path = local_path(uri);
    const auto staging = staging_path(path);
    const int fd = ::open(staging.c_str(), O_RDONLY);
    if (fd < 0) throw std::runtime_error("archive: cannot open " + staging);
    ::fsync(fd);
    ::close(fd);
    const auto size = static_cast<std::int64_t>(fs::file_size(staging));
    publish(staging, path);
    return size;
}

std::shared_ptr<arrow::io::RandomAccessFile> FileIO::open_input(const std::string& uri) {
    if (is_s3_uri(uri)) return check(s3()->OpenInputFile(s3_path(uri)), "open " + uri);
    return check(arrow::io::ReadableFile::Open(local_path(uri)), "open " + uri);
}

bool FileIO::remove(const std::string& uri) noexcept {
    try {
        if (is_s3_uri(uri)) return s3()->DeleteFile(s3_path(uri)).ok();
        std::error_code ec;
        return fs::remove(local_path(uri), ec);
    } catch (const std::exception&) {
        return false;
    }
}

std::vector<StoredFile> FileIO::list(const std::string& prefix) {
    std::vector<StoredFile> out;
    if (is_s3_uri(prefix)) {
        const auto [bucket, key] = split_s3_uri(prefix);
        arrow::fs::FileSelector sel;
        sel.base_dir = key.empty() ? bucket : bucket + "/" + key;
        sel.recursive = true;
        sel.allow_not_found = true;
        for (const auto& info : check(s3()->GetFileInfo(sel), "list " + prefix)) {
            if (info.type() != arrow::fs::FileType::File) continue;
            out.push_back(StoredFile{
                "s3://" + info.path(), info.size(),
                std::chrono::time_point_cast<std::chrono::system_clock::duration>(info.mtime())});
        }
        return out;
    }
    const auto root = local_path(prefix);
    std::error_code ec;
    if (!fs::exists(root, ec)) return out;
    for (const auto& entry : fs::recursive_directory_iterator(root, ec)) {
        if (!entry.is_regular_file()) continue;
        const auto mtime = entry.last_write_time();
        const auto sys = std::chrono::time_point_cast<std::chrono::system_clock::duration>(
            mtime - fs::file_time_type::clock::now() + std::chrono::system_clock::now());
        out.push_back(
            StoredFile{entry.path().string(), static_cast<std::int64_t>(entry.file_size()), sys});
    }
    return out;
}

bool FileIO::exists(const std::string& uri) {
    if (is_s3_uri(uri)) {
        return check(s3()->GetFileInfo(s3_path(uri)), "stat " + uri).type() ==
               arrow::fs::FileType::File;
    }
    std::error_code ec;
    return fs::is_regular_file(local_path(uri), ec);
}

std::optional<std::vector<PendingUpload>> FileIO::list_uploads(const std::string& prefix) {
    if (!is_s3_uri(prefix)) return std::vector<PendingUpload>{};
    S3Requests requests(settings());
    if (!requests.can_sign()) return std::nullopt;
    const auto [bucket, key] = split_s3_uri(prefix);
    const auto under = key.empty() ? key : key + "/";
    // The whole bucket's, then those under the prefix (s3_requests.hpp says why).
    auto all = requests.list_uploads(bucket);
    std::vector<PendingUpload> found;
    for (auto& u : all) {
        if (u.key.rfind(under, 0) == 0) found.push_back(std::move(u));
    }
    return found;
}

bool FileIO::abort_upload(const PendingUpload& upload) {
    return S3Requests(settings()).abort_upload(upload);
}

S3Settings FileIO::settings() {
    const std::lock_guard lock(mutex_);
    return settings_;
}

void FileIO::use_credentials(const S3Credentials& credentials) {
    const std::lock_guard lock(mutex_);
    const S3Credentials current{settings_.access_key_id, settings_.secret_access_key,
                                settings_.session_token};
    if (credentials == current) return;
    settings_.access_key_id = credentials.access_key_id;
    settings_.secret_access_key = credentials.secret_access_key;
    settings_.session_token = credentials.session_token;
    s3_.reset();  // the next request makes a filesystem with them
}

std::chrono::system_clock::time_point FileIO::stamp_now(const std::string& scratch) {
    const auto marker = scratch + "/now";
    write(marker, "");
    const auto listed = list(scratch);
    remove(marker);
    // The scratch folder goes too. On S3, Arrow keeps a folder that its delete emptied by writing
    // an empty "<folder>/" object in its place, which no listing of files would ever clean up.
    if (is_s3_uri(scratch)) {
        (void)s3()->DeleteDir(s3_path(scratch));
    } else {
        std::error_code ec;
        fs::remove(local_path(scratch), ec);
    }
    if (listed.size() != 1) {
        throw std::runtime_error("archive: " + marker + " is not listed after its upload");
    }
    return listed.front().modified;
}

std::string FileIO::normalize(const std::string& uri) {
    if (uri.rfind("s3a://", 0) == 0) return "s3://" + uri.substr(6);
    if (is_s3_uri(uri)) return uri;
    return local_path(uri);
}

void FileIO::check_warehouse(const std::string& warehouse) {
    if (!is_s3_uri(warehouse)) return;
    const auto [bucket, key] = split_s3_uri(warehouse);
    const auto where = settings_.endpoint.empty() ? "AWS S3 in " + settings_.region
                                                  : settings_.scheme + "://" + settings_.endpoint;
    arrow::Result<arrow::fs::FileInfo> info;
    try {
        info = s3()->GetFileInfo(bucket);
    } catch (const std::exception& e) {
        throw core::ConfigError("archive.warehouse", e.what());
    }
    if (!info.ok()) {
        throw core::ConfigError(
            "archive.warehouse",
            fmt::format("cannot reach bucket '{}' at {} (archive.s3_endpoint, archive.s3_region, "
                        "credentials: archive.s3_access_key_id or AWS_ACCESS_KEY_ID): {}",
                        bucket, where, info.status().ToString()));
    }
    if (info->type() != arrow::fs::FileType::Directory) {
        throw core::ConfigError("archive.warehouse",
                                fmt::format("bucket '{}' does not exist at {} (trackd does not "
                                            "create buckets)",
                                            bucket, where));
    }
}

ObjectStorageRuntime::ObjectStorageRuntime() {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): main, before any other thread
    if (std::getenv("AWS_REGION") == nullptr && std::getenv("AWS_DEFAULT_REGION") == nullptr) {
        ::setenv("AWS_DEFAULT_REGION", "us-east-1", 0);  // NOLINT(concurrency-mt-unsafe)
    }
}

ObjectStorageRuntime::~ObjectStorageRuntime() {
    if (arrow::fs::IsS3Initialized() && !arrow::fs::IsS3Finalized()) {
        const auto s = arrow::fs::FinalizeS3();
        if (!s.ok()) core::log::warn("archive: finalising S3", {{"error", s.ToString()}});
    }
}

}  // namespace trackd::archive
