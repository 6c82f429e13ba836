// Where the archive's files live: the one seam every read, write, delete and listing of data
// files, manifests, manifest lists and metadata files goes through.
//
// Contract: files are named by URI: a local path or file:// URI (a local folder), or
// s3://bucket/key (object storage, through Arrow's S3 filesystem). A file is written once under
// a new, unique name and is complete when write() returns, or for a stream sync_size(): a
// crash leaves no half file that a reader could find (local: written and fsynced under a
// hidden name beside the final one, then linked to the final name, which must be new; S3: an
// object appears whole or not at all). Reads and listings of final names never see a file being
// written; a crash may leave a hidden ".<name>.part", an orphan like any other. remove() is quiet:
// a file that is already gone, or cannot be deleted now, is left to the orphan clean-up. Every
// other failure throws std::runtime_error naming the URI. S3 requests are retried with bounded
// backoff (archive.s3_retry_*) before failing. Thread-safe (Arrow's filesystems are); one FileIO
// serves every table object of an Archiver.
//
// Object storage needs the process's ObjectStorageRuntime (trackd/archive/object_storage.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "trackd/config/config.hpp"

namespace arrow::io {
class OutputStream;
class RandomAccessFile;
}  // namespace arrow::io
namespace arrow::fs {
class S3FileSystem;
}  // namespace arrow::fs

namespace trackd::archive {

// One file found under a prefix.
struct StoredFile {
    std::string uri;  // in the scheme the prefix had (file:// or s3://)
    std::int64_t size = 0;
    std::chrono::system_clock::time_point modified;
};

// A multipart upload begun and neither completed nor aborted (object storage only): Arrow
// writes a large Parquet file in parts, and a process killed before it completes or aborts the
// upload leaves it so, unseen by listings and readers, its parts stored until it is aborted.
struct PendingUpload {
    std::string bucket;
    std::string key;
    std::string upload_id;
    std::chrono::system_clock::time_point initiated;  // on the storage's clock
};

// Object storage refused a request for want of permission (S3's 403 AccessDenied).
class StorageAccessDenied : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

// The S3 settings trackd uses, from archive.s3_* and, where those are empty, the usual AWS
// environment variables (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, AWS_REGION, AWS_DEFAULT_REGION,
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN). No key pair anywhere: the AWS
// SDK's default chain (profile files, instance or container role).
struct S3Settings {
    std::string scheme = "https";  // of the endpoint
    std::string endpoint;          // host[:port]; empty: AWS's own for the region
    std::string region = "us-east-1";
    bool path_style = false;
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token;
    int retry_attempts = 6;
    int retry_base_delay_ms = 100;
    int timeout_ms = 30000;
};

// A key pair for object storage, with its session token (empty for a long-lived key).
struct S3Credentials {
    std::string access_key_id;
    std::string secret_access_key;
    std::string session_token;
    bool operator==(const S3Credentials&) const = default;
};

// The retries of object storage requests, Arrow's and S3Requests' (s3_requests.hpp) alike:
// counted (trackd_archive_storage_retries_total) and logged ("archive storage request failed,
// retrying", naming `request` when given); the delay before retry n+1 after n retries is
// base_ms doubled n times, at most 10 s, half of it random.
void log_storage_retry(const std::string& error, std::int64_t retry, int attempts,
                       const std::string& request = {});
std::int64_t storage_retry_delay_ms(int base_ms, std::int64_t attempted_retries);

// The AWS_* variables of the process.
std::map<std::string, std::string> aws_environment();
S3Settings resolve_s3_settings(const config::ArchiveConfig& c,
                               const std::map<std::string, std::string>& aws_env);

// "s3://bucket/a/b" -> {"bucket", "a/b"}; throws on anything else.
std::pair<std::string, std::string> split_s3_uri(const std::string& uri);
bool is_s3_uri(const std::string& uri);
// "file:///x/y" or "/x/y" -> "/x/y".
std::string local_path(const std::string& uri);

class FileIO {
  public:
    explicit FileIO(S3Settings s3);
    ~FileIO();
    FileIO(const FileIO&) = delete;
    FileIO& operator=(const FileIO&) = delete;

    std::string read(const std::string& uri);
    void write(const std::string& uri, const std::string& bytes);
    // For a Parquet writer: the file exists once the stream is closed and sync_size() returned.
    std::shared_ptr<arrow::io::OutputStream> open_output(const std::string& uri);
    // After the stream from open_output was closed: makes the file durable (local: fsync) and
    // returns its size as stored.
    std::int64_t sync_size(const std::string& uri);
    std::shared_ptr<arrow::io::RandomAccessFile> open_input(const std::string& uri);
    // True when it was deleted now.
    bool remove(const std::string& uri) noexcept;
    // Every file under `prefix` (a "directory" URI), recursively; none when it does not exist.
    std::vector<StoredFile> list(const std::string& prefix);
    bool exists(const std::string& uri);
    // The multipart uploads begun under `prefix` and neither completed nor aborted: none for a
    // local prefix; nullopt when they cannot be listed because there is no key pair to sign the
    // request with (archive.s3_access_key_id or AWS_ACCESS_KEY_ID; s3_requests.hpp).
    std::optional<std::vector<PendingUpload>> list_uploads(const std::string& prefix);
    // True when it was aborted now (false: completed or aborted meanwhile). Both throw
    // StorageAccessDenied when the key may not list or abort uploads, and otherwise like list().
    bool abort_upload(const PendingUpload& upload);
    // The storage's own clock: the time it stamps on a file written now. Writes an empty file
    // under `scratch` (a "directory" URI nothing else uses), reads its time from a listing, as
    // list() gives times, and deletes it. An S3 server's clock may be far from this host's.
    std::chrono::system_clock::time_point stamp_now(const std::string& scratch);
    // The form two URIs of one file share ("file:///a" and "/a"; "s3a://b/k" and "s3://b/k").
    static std::string normalize(const std::string& uri);

    // From now on, object storage is reached with `credentials` instead of the key pair of the
    // settings (a REST catalog's vended credentials, renewed at each load of the table). Files
    // being written keep the credentials they were opened with.
    void use_credentials(const S3Credentials& credentials);

    // For start-up: a s3:// warehouse's bucket exists and answers; throws core::ConfigError
    // naming archive.warehouse (or archive.s3_endpoint) otherwise. Nothing for a local one.
    void check_warehouse(const std::string& warehouse);

  private:
    std::shared_ptr<arrow::fs::S3FileSystem> s3();
    S3Settings settings();  // a copy, under the mutex

    std::mutex mutex_;
    S3Settings settings_;                          // under mutex_ (use_credentials changes it)
    std::shared_ptr<arrow::fs::S3FileSystem> s3_;  // made on first use
};

}  // namespace trackd::archive
