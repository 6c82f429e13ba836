// The Iceberg REST catalog client (Apache Iceberg's open-api/rest-catalog-open-api.yaml): the
// server applies each commit's updates and writes the metadata file; trackd writes the data
// files, manifests and manifest lists into the table's location, which the server and the
// readers reach too.
#include <chrono>
#include <set>

#include <fmt/format.h>

#include "trackd/core/log.hpp"
#include "trackd/core/pause_point.hpp"
#include "trackd/net/http_client.hpp"

#include "catalog.hpp"

namespace trackd::archive {
namespace {

using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using net::HttpRequestError;
using net::HttpResponse;
using net::url_encode;

net::HttpOptions http_options(const config::ArchiveConfig& c) {
    net::HttpOptions o;
    o.connect_timeout = std::chrono::milliseconds(c.rest_timeout_ms);
    o.read_timeout = std::chrono::milliseconds(c.rest_timeout_ms);
    o.body_limit = std::size_t{256} << 20U;  // a table's metadata grows with its snapshots
    o.tls = {c.rest_ca_file, "archive.rest_ca_file"};
    return o;
}

// The server's error document ({"error": {"message", "type", "code"}}) or the body itself.
std::string error_text(const HttpResponse& r) {
    try {
        const auto j = json::parse(r.body);
        if (j.contains("error") && j["error"].is_object()) {
            const auto& e = j["error"];
            return fmt::format("{} {}: {}", r.status, e.value("type", ""), e.value("message", ""));
        }
    } catch (const json::exception&) {  // NOLINT(bugprone-empty-catch): not JSON, shown as is
    }
    return fmt::format("{} {}", r.status, r.body.substr(0, 300));
}

std::optional<std::int64_t> main_ref(const json& md) {
    if (md.contains("refs") && md["refs"].contains("main")) {
        return md["refs"]["main"]["snapshot-id"].get<std::int64_t>();
    }
    return std::nullopt;
}

// The updates that turn `base` into `next`, as trackd's commits change a table: snapshots
// added and removed, main moved, properties set and removed.
json updates_between(const json& base, const json& next) {
    json updates = json::array();
    std::set<std::int64_t> base_ids;
    std::set<std::int64_t> next_ids;
    for (const auto& s : base["snapshots"]) base_ids.insert(s["snapshot-id"].get<std::int64_t>());
    for (const auto& s : next["snapshots"]) {
        const auto id = s["snapshot-id"].get<std::int64_t>();
        next_ids.insert(id);
        if (base_ids.count(id) == 0)
            updates.push_back({{"action", "add-snapshot"}, {"snapshot", s}});
    }
    const auto next_main = main_ref(next);
    if (next_main && next_main != main_ref(base)) {
        updates.push_back({{"action", "set-snapshot-ref"},
                           {"ref-name", "main"},
                           {"type", "branch"},
                           {"snapshot-id", *next_main}});
    }
    json removed = json::array();
    for (const auto id : base_ids) {
        if (next_ids.count(id) == 0) removed.push_back(id);
    }
    if (!removed.empty()) {
        updates.push_back({{"action", "remove-snapshots"}, {"snapshot-ids", removed}});
    }
    const auto& bp = base.contains("properties") ? base["properties"] : json::object();
    const auto& np = next.contains("properties") ? next["properties"] : json::object();
    json set = json::object();
    json gone = json::array();
    for (const auto& [k, v] : np.items()) {
        if (!bp.contains(k) || bp[k] != v) set[k] = v;
    }
    for (const auto& [k, v] : bp.items()) {
        if (!np.contains(k)) gone.push_back(k);
    }
    if (!set.empty()) updates.push_back({{"action", "set-properties"}, {"updates", set}});
    if (!gone.empty()) updates.push_back({{"action", "remove-properties"}, {"removals", gone}});
    return updates;
}

class RestCatalog final : public Catalog {
  public:
    explicit RestCatalog(const config::ArchiveConfig& c)
        : config_(c), uri_(net::parse_uri(c.rest_uri)), http_(http_options(c)) {
        if (!c.rest_credential.empty()) {
            oauth_uri_ = net::parse_uri(c.rest_oauth2_uri.empty() ? c.rest_uri + "/v1/oauth/tokens"
                                                                  : c.rest_oauth2_uri);
        }
    }

    [[nodiscard]] bool writes_metadata() const override { return true; }

    std::optional<std::string> load(const TableIdent& t) override {
        const auto r = call("GET", table_path(t), {}, true);
        if (r.status == 404) return std::nullopt;
        if (r.status != 200) throw failure("load table " + t.dotted(), r);
        const auto loaded = json::parse(r.body);
        remember_credentials(t, loaded);
        return loaded.at("metadata-location").get<std::string>();
    }

    [[nodiscard]] std::optional<S3Credentials> vended_credentials() const override {
        return vended_;
    }

    bool create(const TableIdent& t, const std::string& /*metadata_location*/,
                const json& md) override {
        const auto ns =
            call("POST", prefix_path() + "namespaces",
                 json{{"namespace", json::array({t.namespace_})}, {"properties", json::object()}}
                     .dump());
        if (ns.status != 200 && ns.status != 409) throw failure("create namespace", ns);
        json req = {{"name", t.name},
                    {"schema", md["schemas"][0]},
                    {"partition-spec", md["partition-specs"][0]},
                    {"write-order", md["sort-orders"][0]},
                    {"stage-create", false},
                    {"properties", md["properties"]}};
        if (md.contains("location")) req["location"] = md["location"];
        const auto r = call("POST", prefix_path() + "namespaces/" + t.namespace_ + "/tables",
                            req.dump(), true);
        if (r.status == 409) return false;
        if (r.status != 200) throw failure("create table " + t.dotted(), r);
        return true;
    }

    std::optional<std::string> commit(const TableIdent& t, const TableChange& change,
                                      const std::optional<CommitProgress>& /*progress*/) override {
        // Requirements: the same table (not one dropped and created again) and main where the
        // change was built; the server refuses with 409 otherwise, changing nothing.
        json body = {
            {"identifier", {{"namespace", json::array({t.namespace_})}, {"name", t.name}}},
            {"requirements",
             json::array({{{"type", "assert-table-uuid"}, {"uuid", change.base.at("table-uuid")}},
                          {{"type", "assert-ref-snapshot-id"},
                           {"ref", "main"},
                           {"snapshot-id", main_ref(change.base) ? json(*main_ref(change.base))
                                                                 : json(nullptr)}}})},
            {"updates", updates_between(change.base, change.next)}};
        pending_ = PendingCommit{table_path(t), body.dump()};
        static core::PausePoint pause("TRACKD_TEST_ARCHIVE_PAUSE_AT", "archive");
        pause.at("catalog-transaction");
        return send_commit("commit to " + t.dotted());
    }

    std::optional<std::string> load_settled(const TableIdent& t) override {
        // The lost request may still be on its way or running on the server. Sending it again
        // settles it: it asserts main at the base, so of the two at most one applies (or, for a
        // change that only removes snapshots, applying it twice is applying it once). Whatever
        // the answer to the second (applied, or 409 because main moved), no copy can change the
        // table after it: the table read then is final for this commit.
        // First a look: when the change is visible already (the common case: applied, the
        // answer lost on the way back), it is final and nothing is sent again.
        if (pending_) {
            const auto r = call("GET", table_path(t), {}, true);
            if (r.status == 200) {
                const auto loaded = json::parse(r.body);
                remember_credentials(t, loaded);
                if (visible(loaded.at("metadata"), pending_->body)) {
                    pending_.reset();
                    return loaded.at("metadata-location").get<std::string>();
                }
            } else if (r.status != 404) {
                throw failure("load table " + t.dotted(), r);
            }
            try {
                send_commit("resend the commit to " + t.dotted());
            } catch (const CommitStateUnknown& e) {
                throw std::runtime_error(e.what());
            }
        }
        return load(t);
    }

  private:
    // Whether the commit `body` is applied in `md`: the snapshot it adds is there, or the
    // snapshots it removes are gone.
    static bool visible(const json& md, const std::string& body) {
        std::set<std::int64_t> have;
        for (const auto& s : md["snapshots"]) have.insert(s["snapshot-id"].get<std::int64_t>());
        bool any = false;
        const auto request = json::parse(body);  // alive for the loop
        for (const auto& u : request["updates"]) {
            const auto action = u.value("action", "");
            if (action == "add-snapshot") {
                any = true;
                if (have.count(u["snapshot"]["snapshot-id"].get<std::int64_t>()) == 0) return false;
            } else if (action == "remove-snapshots") {
                any = true;
                for (const auto& id : u["snapshot-ids"]) {
                    if (have.count(id.get<std::int64_t>()) != 0) return false;
                }
            }
        }
        return any;
    }

    struct PendingCommit {
        std::string path;
        std::string body;
    };

    // 200: committed; 409: known not committed; no answer after the request left, a timeout
    // or a 5xx: unknown (the spec's CommitStateUnknown); anything else: known not committed.
    std::optional<std::string> send_commit(const std::string& what) {
        HttpResponse r;
        try {
            r = call("POST", pending_->path, pending_->body);
        } catch (const HttpRequestError& e) {
            if (e.sent()) throw CommitStateUnknown(what + ": " + e.what());
            throw;
        }
        if (r.status == 200) {
            pending_.reset();
            // Applied: an answer that does not say where its version is must not read as
            // "nothing changed", which would remove the commit's files.
            try {
                return json::parse(r.body).at("metadata-location").get<std::string>();
            } catch (const json::exception& e) {
                throw CommitStateUnknown(what + ": committed (200), but the answer names no " +
                                         "metadata-location: " + e.what());
            }
        }
        if (r.status == 409) {
            pending_.reset();
            return std::nullopt;
        }
        if (r.status >= 500) throw CommitStateUnknown(what + ": " + error_text(r));
        pending_.reset();
        throw failure(what, r);
    }

    static std::runtime_error failure(const std::string& what, const HttpResponse& r) {
        return std::runtime_error("archive: REST catalog: " + what + ": " + error_text(r));
    }

    std::string prefix_path() {
        if (!configured_) {
            // GET /v1/config: the server's defaults, then the client's, then its overrides.
            const auto r = raw_call("GET",
                                    uri_.path + "/v1/config" +
                                        (config_.rest_warehouse.empty()
                                             ? std::string()
                                             : "?warehouse=" + url_encode(config_.rest_warehouse)),
                                    {});
            if (r.status != 200) throw failure("GET /v1/config", r);
            const auto j = json::parse(r.body);
            std::string prefix;
            for (const char* part : {"defaults", "overrides"}) {
                if (j.contains(part) && j[part].contains("prefix")) {
                    prefix = j[part]["prefix"].get<std::string>();
                }
            }
            prefix_ = uri_.path + "/v1/" + (prefix.empty() ? "" : url_encode(prefix) + "/");
            configured_ = true;
        }
        return prefix_;
    }

    std::string table_path(const TableIdent& t) {
        return prefix_path() + "namespaces/" + t.namespace_ + "/tables/" + t.name;
    }

    // `table`: a request that loads or creates a table, whose answer carries the storage
    // credentials asked for with archive.rest_access_delegation.
    HttpResponse call(const std::string& method, const std::string& target,
                      const std::string& body = {}, bool table = false) {
        auto r = raw_call(method, target, body, table);
        if (r.status == 401 && !config_.rest_credential.empty()) {
            // The token expired or was revoked early: one new token, one more try (a 401 was
            // not applied).
            token_.clear();
            r = raw_call(method, target, body, table);
        }
        return r;
    }

    HttpResponse raw_call(const std::string& method, const std::string& target,
                          const std::string& body, bool table = false) {
        std::map<std::string, std::string> headers;
        const auto bearer = token();
        if (!bearer.empty()) headers["Authorization"] = "Bearer " + bearer;
        if (table && !config_.rest_access_delegation.empty()) {
            headers["X-Iceberg-Access-Delegation"] = config_.rest_access_delegation;
        }
        return http_.send(uri_, method, target, body, body.empty() ? "" : "application/json",
                          headers);
    }

    // archive.rest_token, or an OAuth2 client-credentials token (RFC 6749 4.4), renewed a
    // minute before it expires.
    std::string token() {
        if (!config_.rest_token.empty()) return config_.rest_token;
        if (config_.rest_credential.empty()) return {};
        if (!token_.empty() && Clock::now() < token_expires_) return token_;
        const auto colon = config_.rest_credential.find(':');
        const auto form =
            "grant_type=client_credentials&client_id=" +
            url_encode(config_.rest_credential.substr(0, colon)) +
            "&client_secret=" + url_encode(config_.rest_credential.substr(colon + 1)) +
            (config_.rest_scope.empty() ? "" : "&scope=" + url_encode(config_.rest_scope));
        const auto r =
            http_.send(*oauth_uri_, "POST", oauth_uri_->path.empty() ? "/" : oauth_uri_->path, form,
                       "application/x-www-form-urlencoded");
        if (r.status != 200) {
            throw std::runtime_error("archive: REST catalog: OAuth2 token request refused (" +
                                     error_text(r) + "); check archive.rest_credential");
        }
        const auto j = json::parse(r.body);
        token_ = j.at("access_token").get<std::string>();
        const auto ttl = j.contains("expires_in") ? j["expires_in"].get<std::int64_t>() : 3600;
        token_expires_ =
            Clock::now() + std::chrono::seconds(std::max<std::int64_t>(ttl - 60, ttl / 2));
        return token_;
    }

    // With archive.rest_access_delegation: the credentials vended with the table's last load.
    // A catalog that vends none leaves trackd's own in use, which is said once.
    void remember_credentials(const TableIdent& t, const json& loaded) {
        if (config_.rest_access_delegation.empty()) return;
        vended_ = vended_s3_credentials(loaded);
        if (!vended_ && !said_none_vended_) {
            said_none_vended_ = true;
            core::log::warn(
                "archive: the REST catalog vended no S3 credentials for the table "
                "(archive.rest_access_delegation); using archive.s3_* and AWS_*",
                {{"table", t.dotted()}});
        }
    }

    const config::ArchiveConfig& config_;
    net::Uri uri_;
    std::optional<net::Uri> oauth_uri_;
    net::HttpClient http_;
    bool configured_ = false;
    std::string prefix_;
    std::string token_;
    Clock::time_point token_expires_{};
    std::optional<PendingCommit> pending_;  // the commit whose answer was lost, if any
    std::optional<S3Credentials> vended_;
    bool said_none_vended_ = false;
};

// A key pair from an object of the REST spec's S3 properties.
std::optional<S3Credentials> s3_credentials_in(const json& config) {
    if (!config.is_object()) return std::nullopt;
    const auto text = [&](const char* key) {
        return config.contains(key) && config[key].is_string() ? config[key].get<std::string>()
                                                               : std::string();
    };
    S3Credentials c{text("s3.access-key-id"), text("s3.secret-access-key"),
                    text("s3.session-token")};
    if (c.access_key_id.empty() || c.secret_access_key.empty()) return std::nullopt;
    return c;
}

}  // namespace

std::unique_ptr<Catalog> make_rest_catalog(const config::ArchiveConfig& config) {
    return std::make_unique<RestCatalog>(config);
}

std::optional<S3Credentials> vended_s3_credentials(const json& loaded) {
    const std::string location = loaded.contains("metadata") && loaded["metadata"].is_object()
                                     ? FileIO::normalize(loaded["metadata"].value("location", ""))
                                     : std::string();
    if (loaded.contains("storage-credentials") && loaded["storage-credentials"].is_array()) {
        const json* best = nullptr;
        std::size_t best_length = 0;
        for (const auto& c : loaded["storage-credentials"]) {
            if (!c.is_object() || !c.contains("prefix") || !c["prefix"].is_string()) continue;
            const auto prefix = FileIO::normalize(c["prefix"].get<std::string>());
            if (location.rfind(prefix, 0) != 0 ||
                (best != nullptr && prefix.size() <= best_length)) {
                continue;
            }
            best = &c;
            best_length = prefix.size();
        }
        if (best != nullptr && best->contains("config")) {
            if (auto found = s3_credentials_in((*best)["config"])) return found;
        }
    }
    return loaded.contains("config") ? s3_credentials_in(loaded["config"]) : std::nullopt;
}

}  // namespace trackd::archive
