// The S3 requests Arrow's filesystem does not make: listing the multipart uploads begun under a
// prefix and neither completed nor aborted (ListMultipartUploads), and aborting one
// (AbortMultipartUpload). An archiver killed while a data file goes up in parts leaves such an
// upload: readers and listings never see it, but its parts stay stored, and billed, until it is
// aborted. Maintenance aborts the ones older than archive.orphan_min_age_s (docs/archive.md).
//
// Contract: requests go through net::HttpClient, signed with AWS Signature Version 4 from the
// key pair of S3Settings (archive.s3_* or AWS_*). Without a key pair (the AWS SDK's default
// chain: profile files, instance or container role) nothing can be signed: can_sign() is false
// and the caller leaves the uploads to a bucket lifecycle rule. Transport failures, 5xx and
// throttling (429, 503) are retried like Arrow's requests (archive.s3_retry_*, each retry
// logged); any other failure throws std::runtime_error naming the request and S3's error code.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "file_io.hpp"

namespace trackd::net {
class HttpClient;
}  // namespace trackd::net

namespace trackd::archive {

// The headers that sign a request with AWS Signature Version 4 for `service` in `region`:
// x-amz-date, x-amz-content-sha256, x-amz-security-token (with a session token) and
// Authorization. `host` is the Host header as sent, `path` the request's path as sent
// (percent-encoded), `query` its parameters before encoding (an empty value is a bare name).
std::map<std::string, std::string> sign_v4(const S3Settings& credentials,
                                           const std::string& service, const std::string& method,
                                           const std::string& host, const std::string& path,
                                           const std::map<std::string, std::string>& query,
                                           const std::string& payload,
                                           std::chrono::system_clock::time_point now);

// The query as sent: names and values percent-encoded (RFC 3986), sorted, a bare name for an
// empty value.
std::string encode_query(const std::map<std::string, std::string>& query);

// S3's time format ("2026-12-07T13:43:30.000Z", ISO 8601 in UTC); throws on anything else.
std::chrono::system_clock::time_point parse_s3_time(const std::string& text);

// The uploads of one ListMultipartUploads answer, and where the next page starts (both markers
// empty when the answer was the last page).
struct UploadPage {
    std::vector<PendingUpload> uploads;
    std::string next_key_marker;
    std::string next_upload_id_marker;
};
UploadPage parse_upload_page(const std::string& bucket, const std::string& xml);

class S3Requests {
  public:
    explicit S3Requests(S3Settings settings);
    ~S3Requests();
    S3Requests(const S3Requests&) = delete;
    S3Requests& operator=(const S3Requests&) = delete;

    [[nodiscard]] bool can_sign() const { return !settings_.access_key_id.empty(); }
    // Every upload of `bucket`, page after page (no prefix: MinIO lists an upload under a
    // prefix only when the prefix is its whole key).
    std::vector<PendingUpload> list_uploads(const std::string& bucket);
    // True when the server aborted it now; false when it was gone already (NoSuchUpload).
    bool abort_upload(const PendingUpload& upload);

  private:
    struct Answer {
        int status = 0;
        std::string body;
    };
    // One signed request for `key` of `bucket` ("" for the bucket itself), retried.
    Answer send(const std::string& method, const std::string& bucket, const std::string& key,
                const std::map<std::string, std::string>& query);

    S3Settings settings_;
    std::unique_ptr<const net::HttpClient> client_;  // timeouts: settings_.timeout_ms
};

}  // namespace trackd::archive
