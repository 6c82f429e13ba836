#include "s3_requests.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "trackd/core/log.hpp"
#include "trackd/net/http_client.hpp"

namespace trackd::archive {
namespace {

using Digest = std::array<unsigned char, SHA256_DIGEST_LENGTH>;

std::string hex(const unsigned char* bytes, std::size_t n) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
        out += kDigits[bytes[i] >> 4U];
        out += kDigits[bytes[i] & 15U];
    }
    return out;
}

std::string sha256_hex(const std::string& data) {
    Digest d{};
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), d.data());
    return hex(d.data(), d.size());
}

Digest hmac(const void* key, std::size_t key_size, const std::string& data) {
    Digest d{};
    unsigned int n = 0;
    HMAC(EVP_sha256(), key, static_cast<int>(key_size),
         reinterpret_cast<const unsigned char*>(data.data()), data.size(), d.data(), &n);
    return d;
}
Digest hmac(const Digest& key, const std::string& data) {
    return hmac(key.data(), key.size(), data);
}

// Retried like Arrow's requests (file_io.cpp): no answer, a 5xx or throttling.
bool retryable(int status) { return status == 429 || status >= 500; }

std::string xml_unescape(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '&') {
            out += s[i];
            continue;
        }
        const auto end = s.find(';', i);
        if (end == std::string_view::npos) throw std::runtime_error("bad XML entity");
        const auto name = s.substr(i + 1, end - i - 1);
        if (name == "amp") {
            out += '&';
        } else if (name == "lt") {
            out += '<';
        } else if (name == "gt") {
            out += '>';
        } else if (name == "quot") {
            out += '"';
        } else if (name == "apos") {
            out += '\'';
        } else if (name.size() > 1 && name[0] == '#') {
            const bool hex_form = name[1] == 'x' || name[1] == 'X';
            const auto digits = std::string(name.substr(hex_form ? 2 : 1));
            const auto code = std::stoul(digits, nullptr, hex_form ? 16 : 10);
            // UTF-8 of the code point.
            if (code < 0x80) {
                out += static_cast<char>(code);
            } else if (code < 0x800) {
                out += static_cast<char>(0xC0 | (code >> 6U));
                out += static_cast<char>(0x80 | (code & 0x3FU));
            } else if (code < 0x10000) {
                out += static_cast<char>(0xE0 | (code >> 12U));
                out += static_cast<char>(0x80 | ((code >> 6U) & 0x3FU));
                out += static_cast<char>(0x80 | (code & 0x3FU));
            } else {
                out += static_cast<char>(0xF0 | (code >> 18U));
                out += static_cast<char>(0x80 | ((code >> 12U) & 0x3FU));
                out += static_cast<char>(0x80 | ((code >> 6U) & 0x3FU));
                out += static_cast<char>(0x80 | (code & 0x3FU));
            }
        } else {
            throw std::runtime_error("unknown XML entity &" + std::string(name) + ";");
        }
        i = end;
    }
    return out;
}

// The text of the first <tag>…</tag> in `xml` from `from`; nullopt when there is none.
std::optional<std::string> element(std::string_view xml, const std::string& tag,
                                   std::size_t from = 0) {
    const auto open = "<" + tag + ">";
    const auto start = xml.find(open, from);
    if (start == std::string_view::npos) return std::nullopt;
    const auto body = start + open.size();
    const auto end = xml.find("</" + tag + ">", body);
    if (end == std::string_view::npos) return std::nullopt;
    return xml_unescape(xml.substr(body, end - body));
}

// The path of `key` as sent: each segment percent-encoded, the slashes kept.
std::string encode_path(const std::string& key) {
    std::string out;
    std::size_t from = 0;
    while (true) {
        const auto slash = key.find('/', from);
        out += net::url_encode(key.substr(from, slash - from));
        if (slash == std::string::npos) break;
        out += '/';
        from = slash + 1;
    }
    return out;
}

// The query's names and values percent-encoded and sorted; `with_empty`: "name=" for an empty
// value (the canonical form SigV4 signs), a bare name otherwise (the form sent, as the AWS SDKs
// send "?uploads").
std::string encode_query(const std::map<std::string, std::string>& query, bool with_empty) {
    std::vector<std::pair<std::string, std::string>> encoded;
    encoded.reserve(query.size());
    for (const auto& [k, v] : query) encoded.emplace_back(net::url_encode(k), net::url_encode(v));
    std::sort(encoded.begin(), encoded.end());
    std::string out;
    for (const auto& [k, v] : encoded) {
        if (!out.empty()) out += '&';
        out += k;
        if (with_empty || !v.empty()) out += "=" + v;
    }
    return out;
}

[[noreturn]] void throw_for_status(int status, const std::string& message) {
    if (status == 403) throw StorageAccessDenied(message);
    throw std::runtime_error(message);
}

net::HttpOptions http_options(const S3Settings& s) {
    net::HttpOptions o;
    o.connect_timeout = std::chrono::milliseconds(s.timeout_ms);
    o.read_timeout = std::chrono::milliseconds(s.timeout_ms);
    return o;
}

}  // namespace

std::string encode_query(const std::map<std::string, std::string>& query) {
    return encode_query(query, false);
}

std::map<std::string, std::string> sign_v4(const S3Settings& credentials,
                                           const std::string& service, const std::string& method,
                                           const std::string& host, const std::string& path,
                                           const std::map<std::string, std::string>& query,
                                           const std::string& payload,
                                           std::chrono::system_clock::time_point now) {
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm utc{};
    gmtime_r(&t, &utc);
    std::array<char, 17> stamp{};
    std::strftime(stamp.data(), stamp.size(), "%Y%m%dT%H%M%SZ", &utc);
    const std::string amz_date(stamp.data());
    const std::string day = amz_date.substr(0, 8);
    const std::string payload_hash = sha256_hex(payload);

    std::map<std::string, std::string> headers = {
        {"host", host}, {"x-amz-content-sha256", payload_hash}, {"x-amz-date", amz_date}};
    if (!credentials.session_token.empty()) {
        headers["x-amz-security-token"] = credentials.session_token;
    }
    // The canonical query names every parameter with "=", even one without a value.
    const std::string canonical_query = encode_query(query, true);
    std::string canonical_headers;
    std::string signed_headers;
    for (const auto& [k, v] : headers) {  // lower-case names, in order
        canonical_headers.append(k).append(":").append(v).append("\n");
        if (!signed_headers.empty()) signed_headers += ';';
        signed_headers += k;
    }
    const std::string canonical_request =
        fmt::format("{}\n{}\n{}\n{}\n{}\n{}", method, path, canonical_query, canonical_headers,
                    signed_headers, payload_hash);
    const std::string scope =
        fmt::format("{}/{}/{}/aws4_request", day, credentials.region, service);
    const std::string to_sign =
        fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", amz_date, scope, sha256_hex(canonical_request));
    const std::string secret = "AWS4" + credentials.secret_access_key;
    const auto key =
        hmac(hmac(hmac(hmac(secret.data(), secret.size(), day), credentials.region), service),
             "aws4_request");
    const auto signature = hmac(key, to_sign);

    headers.erase("host");  // the HTTP client writes it, from the same URI
    headers["authorization"] = fmt::format(
        "AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}",
        credentials.access_key_id, scope, signed_headers, hex(signature.data(), signature.size()));
    return headers;
}

std::chrono::system_clock::time_point parse_s3_time(const std::string& text) {
    std::tm tm{};
    int consumed = 0;
    if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
        throw std::runtime_error("not an S3 time: '" + text + "'");
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    auto at = std::chrono::system_clock::from_time_t(timegm(&tm));
    // Fractions of a second ("…:30.123Z"), then the zone: S3 gives UTC ("Z").
    std::size_t i = static_cast<std::size_t>(consumed);
    if (i < text.size() && text[i] == '.') {
        std::int64_t micros = 0;
        int digits = 0;
        for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
            if (digits < 6) micros = micros * 10 + (text[i] - '0');
        }
        for (; digits < 6; ++digits) micros *= 10;
        at += std::chrono::microseconds(micros);
    }
    if (i + 1 != text.size() || text[i] != 'Z') {
        throw std::runtime_error("not an S3 time in UTC: '" + text + "'");
    }
    return at;
}

UploadPage parse_upload_page(const std::string& bucket, const std::string& xml) {
    UploadPage page;
    std::size_t from = 0;
    while (true) {
        const auto start = xml.find("<Upload>", from);
        if (start == std::string::npos) break;
        const auto end = xml.find("</Upload>", start);
        if (end == std::string::npos) throw std::runtime_error("unterminated <Upload>");
        const std::string_view one(xml.data() + start, end - start);
        const auto key = element(one, "Key");
        const auto id = element(one, "UploadId");
        const auto initiated = element(one, "Initiated");
        if (!key || !id || !initiated) {
            throw std::runtime_error("an <Upload> without its Key, UploadId or Initiated");
        }
        page.uploads.push_back(PendingUpload{bucket, *key, *id, parse_s3_time(*initiated)});
        from = end;
    }
    if (element(xml, "IsTruncated").value_or("false") == "true") {
        page.next_key_marker = element(xml, "NextKeyMarker").value_or("");
        page.next_upload_id_marker = element(xml, "NextUploadIdMarker").value_or("");
        if (page.next_key_marker.empty() && page.next_upload_id_marker.empty()) {
            throw std::runtime_error("a truncated list of uploads without its next markers");
        }
    }
    return page;
}

S3Requests::S3Requests(S3Settings settings)
    : settings_(std::move(settings)),
      client_(std::make_unique<const net::HttpClient>(http_options(settings_))) {}
S3Requests::~S3Requests() = default;

S3Requests::Answer S3Requests::send(const std::string& method, const std::string& bucket,
                                    const std::string& key,
                                    const std::map<std::string, std::string>& query) {
    // Addressed as Arrow addresses the bucket (file_io.cpp): by path with archive.s3_path_style,
    // by virtual host otherwise; AWS's own endpoint for the region when none is set.
    const std::string endpoint = settings_.endpoint.empty()
                                     ? fmt::format("s3.{}.amazonaws.com", settings_.region)
                                     : settings_.endpoint;
    const std::string scheme = settings_.endpoint.empty() ? "https" : settings_.scheme;
    const auto uri = net::parse_uri(scheme + "://" +
                                    (settings_.path_style ? endpoint : bucket + "." + endpoint));
    std::string path = settings_.path_style ? "/" + net::url_encode(bucket) : "";
    if (!key.empty()) path += "/" + encode_path(key);
    if (path.empty()) path = "/";
    const std::string host = uri.host_header();
    const auto target = path + "?" + encode_query(query);
    const auto what = fmt::format("{} s3://{}/{}", method, bucket, key);

    for (int attempt = 1;; ++attempt) {
        std::string failure;
        try {
            const auto headers = sign_v4(settings_, "s3", method, host, path, query, "",
                                         std::chrono::system_clock::now());
            auto res = client_->send(uri, method, target, {}, {}, headers);
            if (!retryable(res.status)) return {res.status, std::move(res.body)};
            failure = fmt::format("{} {}", res.status, element(res.body, "Code").value_or(""));
        } catch (const net::HttpRequestError& e) {
            failure = e.what();
        }
        if (attempt >= settings_.retry_attempts) {
            throw std::runtime_error(fmt::format("archive: {}: {}", what, failure));
        }
        log_storage_retry(failure, attempt, settings_.retry_attempts, what);
        std::this_thread::sleep_for(std::chrono::milliseconds(
            storage_retry_delay_ms(settings_.retry_base_delay_ms, attempt - 1)));
    }
}

std::vector<PendingUpload> S3Requests::list_uploads(const std::string& bucket) {
    std::vector<PendingUpload> all;
    std::map<std::string, std::string> query = {{"uploads", ""}};
    while (true) {
        const auto answer = send("GET", bucket, "", query);
        if (answer.status != 200) {
            throw_for_status(
                answer.status,
                fmt::format("archive: list the multipart uploads of s3://{}: {} {}: {}", bucket,
                            answer.status, element(answer.body, "Code").value_or(""),
                            element(answer.body, "Message").value_or(answer.body.substr(0, 200))));
        }
        auto page = parse_upload_page(bucket, answer.body);
        for (auto& u : page.uploads) all.push_back(std::move(u));
        if (page.next_key_marker.empty() && page.next_upload_id_marker.empty()) return all;
        if (query.count("key-marker") != 0 && query.at("key-marker") == page.next_key_marker &&
            query.at("upload-id-marker") == page.next_upload_id_marker) {
            throw std::runtime_error(fmt::format(
                "archive: list the multipart uploads of s3://{}: the server answered the same "
                "page again (key marker '{}')",
                bucket, page.next_key_marker));
        }
        query["key-marker"] = page.next_key_marker;
        query["upload-id-marker"] = page.next_upload_id_marker;
    }
}

bool S3Requests::abort_upload(const PendingUpload& upload) {
    const auto answer = send("DELETE", upload.bucket, upload.key, {{"uploadId", upload.upload_id}});
    if (answer.status == 204 || answer.status == 200) return true;
    if (answer.status == 404) return false;  // NoSuchUpload: completed or aborted meanwhile
    throw_for_status(
        answer.status,
        fmt::format("archive: abort the multipart upload {} of s3://{}/{}: {} {}: {}",
                    upload.upload_id, upload.bucket, upload.key, answer.status,
                    element(answer.body, "Code").value_or(""),
                    element(answer.body, "Message").value_or(answer.body.substr(0, 200))));
}

}  // namespace trackd::archive
