#include "trackd/config/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "trackd/core/error.hpp"
#include "trackd/core/json.hpp"
#include "trackd/net/http_client.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX, not in a header

namespace trackd::config {
namespace {

using core::ConfigError;

// One setting: where it lives in the file, how to read it from TOML and from an environment
// string, and how to print it. The table below is the single list of settings.
struct Field {
    std::string section;
    std::string key;
    std::function<void(Config&, const toml::node&, const std::string&)> from_toml;
    std::function<void(Config&, const std::string&, const std::string&)> from_text;
    std::function<std::string(const Config&)> to_toml;  // masks secrets

    [[nodiscard]] std::string path() const { return section + "." + key; }
};

std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return s;
}

// A TOML basic string: double quotes, with backslash escapes (TOML's escapes are JSON's).
std::string quote(const std::string& s) {
    std::string out = "\"";
    core::append_json_escaped(out, s);
    return out + "\"";
}

template <class T>
T parse_text(const std::string& text, const std::string& where) {
    if constexpr (std::is_same_v<T, std::string>) {
        return text;
    } else if constexpr (std::is_same_v<T, bool>) {
        if (text == "true" || text == "1") return true;
        if (text == "false" || text == "0") return false;
        throw ConfigError(where, "expected true or false, got '" + text + "'");
    } else if constexpr (std::is_same_v<T, double>) {
        double v = 0;
        const auto* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (ec != std::errc{} || ptr != end || !std::isfinite(v)) {
            throw ConfigError(where, "expected a number, got '" + text + "'");
        }
        return v;
    } else {
        T v{};
        const auto* end = text.data() + text.size();
        auto [ptr, ec] = std::from_chars(text.data(), end, v);
        if (ec != std::errc{} || ptr != end) {
            throw ConfigError(where, "expected an integer, got '" + text + "'");
        }
        return v;
    }
}

template <class T>
T parse_toml(const toml::node& node, const std::string& where) {
    if constexpr (std::is_same_v<T, std::string>) {
        if (auto v = node.value_exact<std::string>()) return *v;
        throw ConfigError(where, "expected a string");
    } else if constexpr (std::is_same_v<T, bool>) {
        if (auto v = node.value_exact<bool>()) return *v;
        throw ConfigError(where, "expected true or false");
    } else if constexpr (std::is_same_v<T, double>) {
        if (auto v = node.value<double>()) return *v;
        throw ConfigError(where, "expected a number");
    } else {
        auto v = node.value_exact<std::int64_t>();
        if (!v) throw ConfigError(where, "expected an integer");
        if (*v < std::numeric_limits<T>::min() || *v > std::numeric_limits<T>::max()) {
            throw ConfigError(where, "integer out of range: " + std::to_string(*v));
        }
        return static_cast<T>(*v);
    }
}

template <class T>
std::string print(const T& v) {
    if constexpr (std::is_same_v<T, std::string>) {
        return quote(v);
    } else if constexpr (std::is_same_v<T, bool>) {
        return v ? "true" : "false";
    } else if constexpr (std::is_same_v<T, double>) {
        std::ostringstream out;
        out << v;
        auto s = out.str();
        if (s.find_first_of(".e") == std::string::npos) s += ".0";
        return s;
    } else {
        return std::to_string(v);
    }
}

// The libpq keywords whose value is a secret.
bool secret_keyword(std::string_view name) { return name == "password" || name == "sslpassword"; }

// "%70assword" -> "password": a URI's query parameter names may be percent-encoded.
std::string percent_decoded(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        unsigned value = 0;
        if (s[i] == '%' && i + 2 < s.size() &&
            std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16).ptr ==
                s.data() + i + 3) {
            out += static_cast<char>(value);
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

// scheme://user:password@host/db?password=x&sslpassword=y: the userinfo's password and the
// secret parameters' values become ****. The userinfo ends at the last '@' before the first '/'
// (libpq and net::parse_uri end the authority there, so a password may hold '?' or '#'); the
// parameters run to the end, split at '&' (libpq reads no fragment).
std::string mask_uri(const std::string& uri, std::size_t authority_start) {
    std::string out = uri.substr(0, authority_start);
    auto rest = authority_start;
    const auto at = uri.substr(0, uri.find('/', authority_start)).rfind('@');
    if (at != std::string::npos && at >= authority_start) {
        const auto colon = uri.find(':', authority_start);
        out += colon < at ? uri.substr(authority_start, colon + 1 - authority_start) + "****"
                          : uri.substr(authority_start, at - authority_start);
        rest = at;
    }
    const auto query = uri.find('?', rest);
    out += uri.substr(rest, query == std::string::npos ? query : query + 1 - rest);
    if (query == std::string::npos) return out;
    for (auto pos = query + 1; pos <= uri.size();) {
        const auto end = std::min(uri.find('&', pos), uri.size());
        const std::string_view param(uri.data() + pos, end - pos);
        const auto eq = param.find('=');
        if (eq != std::string_view::npos && secret_keyword(percent_decoded(param.substr(0, eq)))) {
            out.append(param.substr(0, eq + 1)).append("****");
        } else {
            out.append(param);
        }
        if (end < uri.size()) out += '&';
        pos = end + 1;
    }
    return out;
}

// A libpq key=value string, read as libpq reads it: spaces may surround '=', and a value is
// either unquoted (up to the next space) or in single quotes; in both, a backslash escapes the
// character after it (\' and \\). The value of password and sslpassword, quotes included,
// becomes ****; everything else is kept as written.
std::string mask_key_values(const std::string& dsn) {
    const auto space = [&](std::size_t i) {
        return i < dsn.size() && std::isspace(static_cast<unsigned char>(dsn[i])) != 0;
    };
    std::string out;
    std::size_t i = 0;
    while (i < dsn.size()) {
        const auto start = i;
        while (space(i)) ++i;
        const auto key_start = i;
        while (i < dsn.size() && !space(i) && dsn[i] != '=') ++i;
        const std::string_view key(dsn.data() + key_start, i - key_start);
        while (space(i)) ++i;
        if (i >= dsn.size() || dsn[i] != '=') {  // not key=value: libpq refuses it; kept as is
            out.append(dsn, start, std::string::npos);
            break;
        }
        ++i;
        while (space(i)) ++i;
        out.append(dsn, start, i - start);
        const auto value_start = i;
        if (i < dsn.size() && dsn[i] == '\'') {
            for (++i; i < dsn.size() && dsn[i] != '\''; ++i) {
                if (dsn[i] == '\\') ++i;
            }
            i = std::min(i + 1, dsn.size());  // the closing quote (none: to the end)
        } else {
            for (; i < dsn.size() && !space(i); ++i) {
                if (dsn[i] == '\\') ++i;
            }
            i = std::min(i, dsn.size());
        }
        if (secret_keyword(key)) {
            out += "****";
        } else {
            out.append(dsn, value_start, i - value_start);
        }
    }
    return out;
}

// How check-config prints a DSN (pg.dsn, http.pg_dsn) or a URL with userinfo: without its
// password. postgresql://user:password@host/db?sslpassword=x -> postgresql://user:****@host/db?
// sslpassword=****, and "host=x password = 'a b'" -> "host=x password = ****".
std::string mask_dsn(const std::string& dsn) {
    static const std::regex scheme(R"(^[A-Za-z][A-Za-z0-9+.-]*://)");
    std::smatch m;
    if (std::regex_search(dsn, m, scheme)) return mask_uri(dsn, m.length(0));
    return mask_key_values(dsn);
}

// How check-config shows a secret: a DSN keeps everything but its password; an opaque secret
// (a token) is shown as ****; a credential "id:secret" keeps its id.
enum class Secret { none, dsn, opaque, credential };

std::string mask(const std::string& value, Secret kind) {
    switch (kind) {
        case Secret::none:
            return value;
        case Secret::dsn:
            return mask_dsn(value);
        case Secret::opaque:
            return value.empty() ? value : "****";
        case Secret::credential: {
            const auto colon = value.find(':');
            return colon == std::string::npos ? (value.empty() ? value : "****")
                                              : value.substr(0, colon + 1) + "****";
        }
    }
    return value;
}

template <class S, class T>
Field field(const char* section, const char* key, S Config::*sec, T S::*mem,
            Secret secret = Secret::none) {
    Field f;
    f.section = section;
    f.key = key;
    f.from_toml = [sec, mem](Config& c, const toml::node& n, const std::string& where) {
        (c.*sec).*mem = parse_toml<T>(n, where);
    };
    f.from_text = [sec, mem](Config& c, const std::string& text, const std::string& where) {
        (c.*sec).*mem = parse_text<T>(text, where);
    };
    f.to_toml = [sec, mem, secret](const Config& c) {
        static_cast<void>(secret);  // read only for strings; clang warns of an unused capture
        if constexpr (std::is_same_v<T, std::string>) {
            if (secret != Secret::none) return print(mask((c.*sec).*mem, secret));
        }
        return print((c.*sec).*mem);
    };
    return f;
}

const std::vector<Field>& fields() {
    static const std::vector<Field> all = {
        field("kafka", "brokers", &Config::kafka, &KafkaConfig::brokers),
        field("kafka", "topic", &Config::kafka, &KafkaConfig::topic),
        field("kafka", "group", &Config::kafka, &KafkaConfig::group),
        field("kafka", "client_id", &Config::kafka, &KafkaConfig::client_id),
        field("kafka", "instance_id", &Config::kafka, &KafkaConfig::instance_id),
        field("kafka", "format", &Config::kafka, &KafkaConfig::format),
        field("kafka", "schema_registry_url", &Config::kafka, &KafkaConfig::schema_registry_url,
              Secret::dsn),
        field("kafka", "schema_registry_user", &Config::kafka, &KafkaConfig::schema_registry_user),
        field("kafka", "schema_registry_password", &Config::kafka,
              &KafkaConfig::schema_registry_password, Secret::opaque),
        field("kafka", "schema_registry_token", &Config::kafka, &KafkaConfig::schema_registry_token,
              Secret::opaque),
        field("kafka", "schema_registry_timeout_ms", &Config::kafka,
              &KafkaConfig::schema_registry_timeout_ms),
        field("kafka", "schema_registry_unknown_retry_s", &Config::kafka,
              &KafkaConfig::schema_registry_unknown_retry_s),
        field("kafka", "schema_registry_ca_file", &Config::kafka,
              &KafkaConfig::schema_registry_ca_file),
        field("pg", "dsn", &Config::pg, &PgConfig::dsn, Secret::dsn),
        field("pg", "connect_timeout_s", &Config::pg, &PgConfig::connect_timeout_s),
        field("pg", "lock_timeout_ms", &Config::pg, &PgConfig::lock_timeout_ms),
        field("pg", "idle_in_transaction_timeout_ms", &Config::pg,
              &PgConfig::idle_in_transaction_timeout_ms),
        field("pg", "keepalives_idle_s", &Config::pg, &PgConfig::keepalives_idle_s),
        field("pg", "keepalives_interval_s", &Config::pg, &PgConfig::keepalives_interval_s),
        field("pg", "keepalives_count", &Config::pg, &PgConfig::keepalives_count),
        field("http", "enabled", &Config::http, &HttpConfig::enabled),
        field("http", "listen", &Config::http, &HttpConfig::listen),
        field("http", "threads", &Config::http, &HttpConfig::threads),
        field("http", "max_header_bytes", &Config::http, &HttpConfig::max_header_bytes),
        field("http", "max_body_bytes", &Config::http, &HttpConfig::max_body_bytes),
        field("http", "read_timeout_ms", &Config::http, &HttpConfig::read_timeout_ms),
        field("http", "idle_timeout_ms", &Config::http, &HttpConfig::idle_timeout_ms),
        field("http", "max_connections", &Config::http, &HttpConfig::max_connections),
        field("http", "statement_timeout_ms", &Config::http, &HttpConfig::statement_timeout_ms),
        field("http", "pool_size", &Config::http, &HttpConfig::pool_size),
        field("http", "pg_dsn", &Config::http, &HttpConfig::pg_dsn, Secret::dsn),
        field("http", "replica_max_lag_ms", &Config::http, &HttpConfig::replica_max_lag_ms),
        field("http", "max_limit", &Config::http, &HttpConfig::max_limit),
        field("http", "open_landing_pages", &Config::http, &HttpConfig::open_landing_pages),
        field("batch", "max_rows", &Config::batch, &BatchConfig::max_rows),
        field("batch", "max_bytes", &Config::batch, &BatchConfig::max_bytes),
        field("batch", "max_ms", &Config::batch, &BatchConfig::max_ms),
        field("batch", "min_ms", &Config::batch, &BatchConfig::min_ms),
        field("batch", "inflight_bytes", &Config::batch, &BatchConfig::inflight_bytes),
        field("batch", "writers", &Config::batch, &BatchConfig::writers),
        field("validate", "max_future_skew_s", &Config::validate,
              &ValidateConfig::max_future_skew_s),
        field("validate", "max_age_s", &Config::validate, &ValidateConfig::max_age_s),
        field("validate", "reject_null_island", &Config::validate,
              &ValidateConfig::reject_null_island),
        field("validate", "max_speed_kmh", &Config::validate, &ValidateConfig::max_speed_kmh),
        field("validate", "max_vehicle_id_len", &Config::validate,
              &ValidateConfig::max_vehicle_id_len),
        field("validate", "max_payload_bytes", &Config::validate,
              &ValidateConfig::max_payload_bytes),
        field("postgis", "partition_interval", &Config::postgis,
              &PostgisConfig::partition_interval),
        field("postgis", "partitions_ahead", &Config::postgis, &PostgisConfig::partitions_ahead),
        field("postgis", "retention", &Config::postgis, &PostgisConfig::retention),
        field("postgis", "ddl_lock_timeout_ms", &Config::postgis,
              &PostgisConfig::ddl_lock_timeout_ms),
        field("postgis", "defer_indexes", &Config::postgis, &PostgisConfig::defer_indexes),
        field("postgis", "index_grace_s", &Config::postgis, &PostgisConfig::index_grace_s),
        field("postgis", "index_check_interval_s", &Config::postgis,
              &PostgisConfig::index_check_interval_s),
        field("archive", "enabled", &Config::archive, &ArchiveConfig::enabled),
        field("archive", "warehouse", &Config::archive, &ArchiveConfig::warehouse),
        field("archive", "s3_endpoint", &Config::archive, &ArchiveConfig::s3_endpoint),
        field("archive", "s3_region", &Config::archive, &ArchiveConfig::s3_region),
        field("archive", "s3_path_style", &Config::archive, &ArchiveConfig::s3_path_style),
        field("archive", "s3_access_key_id", &Config::archive, &ArchiveConfig::s3_access_key_id),
        field("archive", "s3_secret_access_key", &Config::archive,
              &ArchiveConfig::s3_secret_access_key, Secret::opaque),
        field("archive", "s3_session_token", &Config::archive, &ArchiveConfig::s3_session_token,
              Secret::opaque),
        field("archive", "s3_retry_attempts", &Config::archive, &ArchiveConfig::s3_retry_attempts),
        field("archive", "s3_retry_base_delay_ms", &Config::archive,
              &ArchiveConfig::s3_retry_base_delay_ms),
        field("archive", "s3_timeout_ms", &Config::archive, &ArchiveConfig::s3_timeout_ms),
        field("archive", "catalog_type", &Config::archive, &ArchiveConfig::catalog_type),
        field("archive", "catalog", &Config::archive, &ArchiveConfig::catalog),
        field("archive", "rest_uri", &Config::archive, &ArchiveConfig::rest_uri),
        field("archive", "rest_warehouse", &Config::archive, &ArchiveConfig::rest_warehouse),
        field("archive", "rest_token", &Config::archive, &ArchiveConfig::rest_token,
              Secret::opaque),
        field("archive", "rest_credential", &Config::archive, &ArchiveConfig::rest_credential,
              Secret::credential),
        field("archive", "rest_oauth2_uri", &Config::archive, &ArchiveConfig::rest_oauth2_uri),
        field("archive", "rest_scope", &Config::archive, &ArchiveConfig::rest_scope),
        field("archive", "rest_timeout_ms", &Config::archive, &ArchiveConfig::rest_timeout_ms),
        field("archive", "rest_ca_file", &Config::archive, &ArchiveConfig::rest_ca_file),
        field("archive", "rest_access_delegation", &Config::archive,
              &ArchiveConfig::rest_access_delegation),
        field("archive", "partition", &Config::archive, &ArchiveConfig::partition),
        field("archive", "compaction_interval_s", &Config::archive,
              &ArchiveConfig::compaction_interval_s),
        field("archive", "compact_min_files", &Config::archive, &ArchiveConfig::compact_min_files),
        field("archive", "namespace", &Config::archive, &ArchiveConfig::namespace_),
        field("archive", "table", &Config::archive, &ArchiveConfig::table),
        field("archive", "target_file_bytes", &Config::archive, &ArchiveConfig::target_file_bytes),
        field("archive", "commit_interval_s", &Config::archive, &ArchiveConfig::commit_interval_s),
        field("archive", "poll_interval_ms", &Config::archive, &ArchiveConfig::poll_interval_ms),
        field("archive", "maintenance_interval_s", &Config::archive,
              &ArchiveConfig::maintenance_interval_s),
        field("archive", "snapshot_max_age_s", &Config::archive,
              &ArchiveConfig::snapshot_max_age_s),
        field("archive", "min_snapshots_to_keep", &Config::archive,
              &ArchiveConfig::min_snapshots_to_keep),
        field("archive", "max_manifests", &Config::archive, &ArchiveConfig::max_manifests),
        field("archive", "orphan_min_age_s", &Config::archive, &ArchiveConfig::orphan_min_age_s),
        field("archive", "metadata_versions_max", &Config::archive,
              &ArchiveConfig::metadata_versions_max),
        field("metrics", "listen", &Config::metrics, &MetricsConfig::listen),
        field("log", "level", &Config::log, &LogConfig::level),
        field("log", "format", &Config::log, &LogConfig::format),
    };
    return all;
}

// librdkafka properties live in their own table, [kafka.properties], passed through as strings.
constexpr std::string_view kPropertiesPath = "kafka.properties";
constexpr std::string_view kPropertiesEnvPrefix = "TRACKD_KAFKA_PROPERTIES_";

// Bearer tokens live in their own table too, [http.tokens], one `name = "scope:secret"` each;
// the name is what logs show, so that a secret never has to.
constexpr std::string_view kTokensPath = "http.tokens";
constexpr std::string_view kTokensEnvPrefix = "TRACKD_HTTP_TOKENS_";

// A token's name as TRACKD_HTTP_TOKENS_<NAME> spells it: lower case, '_' for '-'.
std::string token_spelling(std::string name) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) {
        return ch == '-' ? '_' : static_cast<char>(std::tolower(ch));
    });
    return name;
}

// "read:SECRET" -> {read, SECRET}; the scope and secret are validated in validate().
HttpToken parse_token(const std::string& text, const std::string& where) {
    const auto colon = text.find(':');
    if (colon == std::string::npos) {
        throw ConfigError(where, "expected \"read:<token>\" or \"write:<token>\"");
    }
    return HttpToken{text.substr(0, colon), text.substr(colon + 1)};
}

std::set<std::string> sections() {
    std::set<std::string> out;
    for (const auto& f : fields()) out.insert(f.section);
    return out;
}

const Field* find_field(const std::string& section, const std::string& key) {
    for (const auto& f : fields()) {
        if (f.section == section && f.key == key) return &f;
    }
    return nullptr;
}

void apply_properties_table(Config& c, const toml::table& props) {
    for (const auto& [k, v] : props) {
        std::string where = std::string(kPropertiesPath) + "." + std::string(k.str());
        if (auto s = v.value_exact<std::string>()) {
            c.kafka.properties[std::string(k.str())] = *s;
        } else if (auto i = v.value_exact<std::int64_t>()) {
            c.kafka.properties[std::string(k.str())] = std::to_string(*i);
        } else if (auto b = v.value_exact<bool>()) {
            c.kafka.properties[std::string(k.str())] = *b ? "true" : "false";
        } else {
            throw ConfigError(where, "expected a string, integer or boolean");
        }
    }
}

void apply_toml(Config& c, const toml::table& root) {
    const auto known = sections();
    for (const auto& [sec_key, sec_node] : root) {
        const std::string section(sec_key.str());
        if (known.count(section) == 0) {
            throw ConfigError(section,
                              "unknown section (known: kafka, pg, http, batch, "
                              "validate, postgis, archive, metrics, log)");
        }
        const auto* table = sec_node.as_table();
        if (table == nullptr) throw ConfigError(section, "expected a table [" + section + "]");
        for (const auto& [key_key, node] : *table) {
            const std::string key(key_key.str());
            const std::string where = fmt::format("{}.{}", section, key);
            if (section == "http" && key == "tokens") {
                const auto* tokens = node.as_table();
                if (tokens == nullptr) throw ConfigError(where, "expected a table");
                for (const auto& [name, value] : *tokens) {
                    const std::string token_where = where + "." + std::string(name.str());
                    auto text = value.value_exact<std::string>();
                    if (!text) throw ConfigError(token_where, "expected a string \"scope:token\"");
                    c.http.tokens[std::string(name.str())] = parse_token(*text, token_where);
                }
                continue;
            }
            if (section == "kafka" && key == "properties") {
                const auto* props = node.as_table();
                if (props == nullptr) throw ConfigError(where, "expected a table");
                apply_properties_table(c, *props);
                continue;
            }
            const Field* f = find_field(section, key);
            if (f == nullptr) throw ConfigError(where, "unknown key");
            f->from_toml(c, node, where);
        }
    }
}

void apply_env(Config& c, const Environment& env) {
    const auto known = sections();
    for (const auto& [name, value] : env) {
        if (name.rfind("TRACKD_", 0) != 0) continue;
        if (name.rfind(kPropertiesEnvPrefix, 0) == 0) {
            // TRACKD_KAFKA_PROPERTIES_SASL_MECHANISM -> sasl.mechanism
            std::string prop = name.substr(kPropertiesEnvPrefix.size());
            std::transform(prop.begin(), prop.end(), prop.begin(), [](unsigned char ch) {
                return ch == '_' ? '.' : static_cast<char>(std::tolower(ch));
            });
            if (prop.empty()) throw ConfigError(name, "names no librdkafka property");
            c.kafka.properties[prop] = value;
            continue;
        }
        if (name.rfind(kTokensEnvPrefix, 0) == 0) {
            // TRACKD_HTTP_TOKENS_DASHBOARD=read:SECRET -> [http.tokens] dashboard
            std::string token_name = token_spelling(name.substr(kTokensEnvPrefix.size()));
            if (token_name.empty()) throw ConfigError(name, "names no token");
            // It replaces the file's token that it spells, whatever that one's case, with '_'
            // for '-' (TRACKD_HTTP_TOKENS_OPS_TEAM replaces "Ops-Team"): otherwise the old
            // secret would go on working beside the new one.
            std::vector<std::string> spelled;
            for (const auto& [file_name, token] : c.http.tokens) {
                if (token_spelling(file_name) == token_name) spelled.push_back(file_name);
            }
            if (spelled.size() > 1) {
                throw ConfigError(name, fmt::format("spells both [http.tokens] {} and {}; rename "
                                                    "one of them",
                                                    spelled[0], spelled[1]));
            }
            if (spelled.size() == 1) token_name = spelled[0];
            c.http.tokens[token_name] =
                parse_token(value, fmt::format("{}.{} (from {})", kTokensPath, token_name, name));
            continue;
        }
        const std::string rest = name.substr(7);
        const auto underscore = rest.find('_');
        std::string section = rest.substr(0, underscore);
        std::transform(section.begin(), section.end(), section.begin(),
                       [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
        if (known.count(section) == 0) continue;  // another tool's variable
        bool matched = false;
        for (const auto& f : fields()) {
            if (f.section == section && "TRACKD_" + upper(f.section) + "_" + upper(f.key) == name) {
                f.from_text(c, value, f.path() + " (from " + name + ")");
                matched = true;
                break;
            }
        }
        if (!matched) {
            throw ConfigError(name, "unknown setting in section [" + section + "]");
        }
    }
}

// Digits only, 1..65535.
bool valid_port(std::string_view port) {
    int n = 0;
    const char* e = port.data() + port.size();
    auto [ptr, ec] = std::from_chars(port.data(), e, n);
    return ec == std::errc{} && ptr == e && n > 0 && n < 65536;
}

bool valid_host_port(const std::string& s) {
    const auto colon = s.rfind(':');
    return colon != std::string::npos && colon != 0 &&
           valid_port(std::string_view(s).substr(colon + 1));
}

// "<N> <unit>" with a PostgreSQL interval unit trackd documents, e.g. "30 days".
bool valid_interval(const std::string& s) {
    static const std::regex pattern(R"(^[1-9][0-9]{0,5} (hour|day|week|month)s?$)");
    return std::regex_match(s, pattern);
}

// The most of its unit a valid_interval postgis.retention may hold: 1000 years, so that
// now() - retention stays far from PostgreSQL's earliest timestamp (4713 BC), before which every
// maintenance run's drop would fail.
std::int64_t max_retention(const std::string& unit) {
    if (unit == "hour") return 1000LL * 36525 * 24 / 100;  // 8766000: more than 6 digits allow
    if (unit == "day") return 1000LL * 36525 / 100;        // 365250
    if (unit == "week") return 1000LL * 36525 / 100 / 7;   // 52178
    return 1000LL * 12;                                    // months
}

// The archive's ages (archive.snapshot_max_age_s, archive.orphan_min_age_s) are at most 100
// years. The archiver multiplies them by 1000 (milliseconds) and takes them from now, for orphans
// and uploads as a std::chrono::system_clock duration (nanoseconds): bounded so, each product and
// now less it fit an int64. Unbounded, a product could wrap to about now, and maintenance then
// expired every snapshot, deleted every unreferenced file and aborted every upload.
constexpr std::int64_t kMaxAgeS = 100LL * 36525 * 864;  // 3155760000
// In nanoseconds, with room for now (about 1.8e18 ns since 1970) beside it.
static_assert(kMaxAgeS < std::numeric_limits<std::int64_t>::max() / 1'000'000'000 / 2);

// A local path, file:..., or s3://bucket[/prefix] with an S3 bucket name (3..63 of a-z 0-9 . -,
// starting and ending with a letter or digit). Any other scheme is refused.
bool valid_warehouse(const std::string& w) {
    if (w.rfind("s3://", 0) == 0) {
        const auto rest = w.substr(5);
        const auto bucket = rest.substr(0, rest.find('/'));
        static const std::regex name(R"(^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$)");
        return std::regex_match(bucket, name) && rest.find("//") == std::string::npos;
    }
    if (w.rfind("file:", 0) == 0) return true;
    static const std::regex scheme(R"(^[A-Za-z][A-Za-z0-9+.-]*:.*)");
    return !std::regex_match(w, scheme);
}

bool valid_endpoint(const std::string& e) {
    static const std::regex pattern(R"(^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?$)");
    return std::regex_match(e, pattern);
}

void require(bool ok, const std::string& key, const std::string& problem) {
    if (!ok) throw ConfigError(key, problem);
}

// An http(s) URL trackd connects to: net::parse_uri, which reads it when the client is made,
// must find a host in it, and a port it names must be in 1..65535. `shown` is the URL as the
// message prints it (masked when it may hold a password).
void require_http_url(const std::string& url, const std::string& key, const std::string& shown) {
    require(url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0, key,
            "'" + shown + "' is not an http:// or https:// URI");
    net::Uri uri;
    try {
        uri = net::parse_uri(url);
    } catch (const std::invalid_argument&) {
        // No host, or a ':' with no port after it.
        const auto authority = url.substr(0, url.find('/', url.find("://") + 3));
        throw ConfigError(key,
                          "'" + shown + "' " +
                              (authority.back() == ':' ? "has no port after ':'" : "has no host"));
    }
    require(valid_port(uri.port), key,
            "'" + shown + "' has port '" + uri.port + "', not one in 1..65535");
}

// A CA file setting: empty, or a readable file holding PEM certificates, for a client that
// speaks https (`used`, what `needs` names).
void require_ca_file(const std::string& path, const std::string& key, bool used,
                     const std::string& needs) {
    if (path.empty()) return;
    require(used, key, "is only used with " + needs);
    std::error_code ec;
    require(std::filesystem::exists(path, ec), key, "'" + path + "' does not exist");
    require(std::filesystem::is_regular_file(path, ec), key,
            "'" + path + "' is not a file (a PEM file of CA certificates)");
    std::ifstream in(path);
    require(in.is_open(), key, "'" + path + "' cannot be read");
    std::stringstream text;
    text << in.rdbuf();
    require(text.str().find("-----BEGIN CERTIFICATE-----") != std::string::npos, key,
            "'" + path + "' holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
}

void validate(const Config& c) {
    require(!c.kafka.brokers.empty(), "kafka.brokers", "must not be empty (host:port,...)");
    require(!c.kafka.topic.empty(), "kafka.topic", "must not be empty");
    require(c.kafka.topic.size() <= 249 &&
                std::all_of(c.kafka.topic.begin(), c.kafka.topic.end(),
                            [](unsigned char ch) {
                                return std::isalnum(ch) != 0 || ch == '.' || ch == '_' || ch == '-';
                            }),
            "kafka.topic", "'" + c.kafka.topic + "' is not a valid topic name ([A-Za-z0-9._-]+)");
    require(!c.kafka.group.empty(), "kafka.group", "must not be empty");
    for (const auto& [k, v] : c.kafka.properties) {
        require(k != "enable.auto.commit" || v == "false",
                std::string(kPropertiesPath) + ".enable.auto.commit",
                "must stay false: trackd stores offsets in PostgreSQL");
        // trackd sets these from its own keys after the properties: one here would be ignored.
        for (const auto& [property, own] :
             std::initializer_list<std::pair<std::string_view, std::string_view>>{
                 {"group.id", "kafka.group"},
                 {"bootstrap.servers", "kafka.brokers"},
                 {"group.instance.id", "kafka.instance_id"},
                 {"client.id", "kafka.client_id"}}) {
            require(k != property, std::string(kPropertiesPath) + "." + k,
                    fmt::format("set it with {} instead", own));
        }
    }
    const auto& fmt_name = c.kafka.format;
    require(fmt_name == "json" || fmt_name == "protobuf" || fmt_name == "auto", "kafka.format",
            "'" + fmt_name + "' is not one of json, protobuf, auto");
    const auto& url = c.kafka.schema_registry_url;
    if (!url.empty()) {
        static const std::regex kUrl(
            R"(https?://([^/:@]+:[^/@]*@)?[A-Za-z0-9.-]+(:[0-9]{1,5})?(/.*)?)");
        require(std::regex_match(url, kUrl), "kafka.schema_registry_url",
                "'" + mask_dsn(url) + "' is not http[s]://host[:port][/path]");
        require_http_url(url, "kafka.schema_registry_url", mask_dsn(url));
    }
    require_ca_file(c.kafka.schema_registry_ca_file, "kafka.schema_registry_ca_file",
                    url.rfind("https://", 0) == 0, "an https:// kafka.schema_registry_url");
    require(c.kafka.schema_registry_token.empty() ||
                (c.kafka.schema_registry_user.empty() && c.kafka.schema_registry_password.empty()),
            "kafka.schema_registry_token",
            "set either a bearer token or schema_registry_user + schema_registry_password");
    require(c.kafka.schema_registry_password.empty() || !c.kafka.schema_registry_user.empty(),
            "kafka.schema_registry_user", "must be set when schema_registry_password is");
    const bool registry_auth =
        !c.kafka.schema_registry_user.empty() || !c.kafka.schema_registry_token.empty();
    require(!registry_auth || !url.empty(),
            c.kafka.schema_registry_token.empty() ? "kafka.schema_registry_user"
                                                  : "kafka.schema_registry_token",
            "is only used with kafka.schema_registry_url");
    require(!registry_auth || url.empty() || net::parse_uri(url).userinfo.empty(),
            "kafka.schema_registry_url",
            "has user:password@ as well as schema_registry_user or schema_registry_token; keep "
            "one of them");
    require(
        c.kafka.schema_registry_timeout_ms >= 100 && c.kafka.schema_registry_timeout_ms <= 600000,
        "kafka.schema_registry_timeout_ms", "must be between 100 and 600000");
    require(c.kafka.schema_registry_unknown_retry_s >= 1 &&
                c.kafka.schema_registry_unknown_retry_s <= 86400,
            "kafka.schema_registry_unknown_retry_s", "must be between 1 and 86400");
    require(url.empty() || c.kafka.format != "json", "kafka.schema_registry_url",
            "is only used with kafka.format = protobuf or auto");
    require(!c.pg.dsn.empty(), "pg.dsn", "must not be empty");
    require(c.pg.connect_timeout_s >= 1 && c.pg.connect_timeout_s <= 3600, "pg.connect_timeout_s",
            "must be between 1 and 3600");
    require(c.pg.lock_timeout_ms >= 0 && c.pg.lock_timeout_ms <= 3600000, "pg.lock_timeout_ms",
            "must be between 0 (no limit) and 3600000");
    require(c.pg.idle_in_transaction_timeout_ms == 0 ||
                (c.pg.idle_in_transaction_timeout_ms >= 1000 &&
                 c.pg.idle_in_transaction_timeout_ms <= 3600000),
            "pg.idle_in_transaction_timeout_ms",
            "must be 0 (no limit) or between 1000 and 3600000");
    require(c.pg.keepalives_idle_s >= 1 && c.pg.keepalives_idle_s <= 7200, "pg.keepalives_idle_s",
            "must be between 1 and 7200");
    require(c.pg.keepalives_interval_s >= 1 && c.pg.keepalives_interval_s <= 600,
            "pg.keepalives_interval_s", "must be between 1 and 600");
    require(c.pg.keepalives_count >= 1 && c.pg.keepalives_count <= 100, "pg.keepalives_count",
            "must be between 1 and 100");
    require(c.postgis.ddl_lock_timeout_ms >= 10 && c.postgis.ddl_lock_timeout_ms <= 600000,
            "postgis.ddl_lock_timeout_ms", "must be between 10 and 600000");
    require(c.kafka.instance_id.size() <= 249, "kafka.instance_id",
            "must be at most 249 characters");
    require(valid_host_port(c.http.listen), "http.listen",
            "'" + c.http.listen + "' is not host:port with a port in 1..65535");
    require(c.http.threads >= 1 && c.http.threads <= 256, "http.threads",
            "must be between 1 and 256");
    require(c.http.max_header_bytes >= 1024 && c.http.max_header_bytes <= 1024 * 1024,
            "http.max_header_bytes", "must be between 1024 and 1048576");
    require(c.http.max_body_bytes >= 1024 && c.http.max_body_bytes <= 64 * 1024 * 1024,
            "http.max_body_bytes", "must be between 1024 and 67108864");
    require(c.http.read_timeout_ms >= 100 && c.http.read_timeout_ms <= 600000,
            "http.read_timeout_ms", "must be between 100 and 600000");
    require(c.http.idle_timeout_ms >= 100 && c.http.idle_timeout_ms <= 3600000,
            "http.idle_timeout_ms", "must be between 100 and 3600000");
    require(c.http.max_connections >= 1 && c.http.max_connections <= 1000000,
            "http.max_connections", "must be between 1 and 1000000");
    require(c.http.statement_timeout_ms >= 10 && c.http.statement_timeout_ms <= 600000,
            "http.statement_timeout_ms", "must be between 10 and 600000");
    require(c.http.pool_size >= 1 && c.http.pool_size <= 256, "http.pool_size",
            "must be between 1 and 256");
    require(c.http.replica_max_lag_ms >= 0 && c.http.replica_max_lag_ms <= 86400000,
            "http.replica_max_lag_ms", "must be between 0 (no check) and 86400000");
    require(c.http.pg_dsn.empty() || c.http.pg_dsn.find_first_not_of(" \t") != std::string::npos,
            "http.pg_dsn", "must be a libpq DSN or empty (reads from pg.dsn)");
    require(c.http.max_limit >= 1 && c.http.max_limit <= 1000000, "http.max_limit",
            "must be between 1 and 1000000");
    std::set<std::string> secrets;
    for (const auto& [name, token] : c.http.tokens) {
        const std::string where = std::string(kTokensPath) + "." + name;
        require(!name.empty() && std::all_of(name.begin(), name.end(),
                                             [](unsigned char ch) {
                                                 return std::isalnum(ch) != 0 || ch == '_' ||
                                                        ch == '-';
                                             }),
                where, "a token name may hold only letters, digits, '_' and '-'");
        require(token.scope == "read" || token.scope == "write", where,
                "scope '" + token.scope + "' is not read or write");
        // RFC 6750 b64token characters, and long enough not to be guessed.
        require(token.secret.size() >= 16, where, "the token must be at least 16 characters");
        require(std::all_of(token.secret.begin(), token.secret.end(),
                            [](unsigned char ch) {
                                return std::isalnum(ch) != 0 || ch == '-' || ch == '.' ||
                                       ch == '_' || ch == '~' || ch == '+' || ch == '/' ||
                                       ch == '=';
                            }),
                where, "the token may hold only A-Z a-z 0-9 - . _ ~ + / =");
        require(secrets.insert(token.secret).second, where,
                "the same token is configured under another name");
    }
    require(c.batch.max_rows >= 1, "batch.max_rows", "must be at least 1");
    require(c.batch.max_bytes >= 1024, "batch.max_bytes", "must be at least 1024");
    require(c.batch.max_ms >= 1 && c.batch.max_ms <= 600000, "batch.max_ms",
            "must be between 1 and 600000");
    require(c.batch.min_ms >= 0 && c.batch.min_ms <= 600000, "batch.min_ms",
            "must be between 0 and 600000 (above batch.max_ms it acts as batch.max_ms)");
    require(c.batch.writers >= 1 && c.batch.writers <= 16, "batch.writers",
            "must be between 1 and 16");
    require(c.batch.inflight_bytes >= c.batch.max_bytes, "batch.inflight_bytes",
            "must be at least batch.max_bytes (" + std::to_string(c.batch.max_bytes) + ")");
    require(c.validate.max_future_skew_s >= 0, "validate.max_future_skew_s",
            "must not be negative");
    require(c.validate.max_age_s >= 1, "validate.max_age_s", "must be at least 1");
    require(c.validate.max_speed_kmh > 0, "validate.max_speed_kmh", "must be positive");
    require(c.validate.max_vehicle_id_len >= 1 && c.validate.max_vehicle_id_len <= 1024,
            "validate.max_vehicle_id_len", "must be between 1 and 1024");
    require(c.validate.max_payload_bytes >= 256, "validate.max_payload_bytes",
            "must be at least 256");
    const auto& iv = c.postgis.partition_interval;
    require(iv == "hour" || iv == "day" || iv == "week" || iv == "month",
            "postgis.partition_interval", "'" + iv + "' is not one of hour, day, week, month");
    require(c.postgis.partitions_ahead >= 0 && c.postgis.partitions_ahead <= 1000,
            "postgis.partitions_ahead", "must be between 0 and 1000");
    require(c.postgis.index_grace_s >= 0, "postgis.index_grace_s", "must not be negative");
    require(c.postgis.index_check_interval_s >= 1, "postgis.index_check_interval_s",
            "must be at least 1");
    if (const auto& r = c.postgis.retention; !r.empty()) {
        require(valid_interval(r), "postgis.retention",
                "'" + r + "' is not '<N> hours', '<N> days', '<N> weeks' or '<N> months'");
        const auto space = r.find(' ');
        auto unit = r.substr(space + 1);
        if (unit.back() == 's') unit.pop_back();
        const auto most = max_retention(unit);
        require(std::stoll(r.substr(0, space)) <= most, "postgis.retention",
                "'" + r + "' is more than 1000 years (at most " + std::to_string(most) + " " +
                    unit + "s)");
    }
    const auto& a = c.archive;
    require(a.catalog_type == "jdbc" || a.catalog_type == "rest", "archive.catalog_type",
            "'" + a.catalog_type + "' is not one of jdbc, rest");
    require(!a.warehouse.empty() || a.catalog_type == "rest", "archive.warehouse",
            "must not be empty with the JDBC catalog (only a REST catalog chooses a location)");
    require(valid_warehouse(a.warehouse), "archive.warehouse",
            "'" + a.warehouse +
                "' is not a local path, a file:// URI or s3://bucket/prefix (a bucket name is "
                "3..63 characters of a-z 0-9 . -)");
    if (!a.s3_endpoint.empty()) {
        require(valid_endpoint(a.s3_endpoint), "archive.s3_endpoint",
                "'" + a.s3_endpoint + "' is not http://host[:port] or https://host[:port]");
        require_http_url(a.s3_endpoint, "archive.s3_endpoint", a.s3_endpoint);
    }
    require(
        a.s3_access_key_id.empty() == a.s3_secret_access_key.empty(),
        a.s3_access_key_id.empty() ? "archive.s3_access_key_id" : "archive.s3_secret_access_key",
        "set both archive.s3_access_key_id and archive.s3_secret_access_key, or neither");
    require(a.s3_session_token.empty() || !a.s3_access_key_id.empty(), "archive.s3_session_token",
            "needs archive.s3_access_key_id and archive.s3_secret_access_key");
    require(a.s3_retry_attempts >= 1 && a.s3_retry_attempts <= 20, "archive.s3_retry_attempts",
            "must be between 1 and 20");
    require(a.s3_retry_base_delay_ms >= 1 && a.s3_retry_base_delay_ms <= 10000,
            "archive.s3_retry_base_delay_ms", "must be between 1 and 10000");
    require(a.s3_timeout_ms >= 100 && a.s3_timeout_ms <= 600000, "archive.s3_timeout_ms",
            "must be between 100 and 600000");
    if (a.catalog_type == "rest") {
        require(!a.rest_uri.empty(), "archive.rest_uri",
                "must be set when archive.catalog_type = \"rest\"");
        require_http_url(a.rest_uri, "archive.rest_uri", a.rest_uri);
        require(a.rest_token.empty() || a.rest_credential.empty(), "archive.rest_token",
                "set either archive.rest_token or archive.rest_credential, not both");
        require(a.rest_credential.empty() || a.rest_credential.find(':') != std::string::npos,
                "archive.rest_credential", "must be \"client_id:client_secret\"");
        if (!a.rest_oauth2_uri.empty()) {
            require_http_url(a.rest_oauth2_uri, "archive.rest_oauth2_uri", a.rest_oauth2_uri);
        }
        require_ca_file(
            a.rest_ca_file, "archive.rest_ca_file",
            a.rest_uri.rfind("https://", 0) == 0 || a.rest_oauth2_uri.rfind("https://", 0) == 0,
            "an https:// archive.rest_uri or archive.rest_oauth2_uri");
        require(
            a.rest_access_delegation.empty() || a.rest_access_delegation == "vended-credentials",
            "archive.rest_access_delegation",
            "'" + a.rest_access_delegation +
                "' is not \"vended-credentials\" (or empty: trackd's own S3 credentials)");
    } else {
        // Set with the JDBC catalog, a REST catalog's key would be ignored without a word. The
        // two with a default count as set when they differ from it (check-config prints them).
        const ArchiveConfig defaults;
        for (const auto& [key, set] : std::initializer_list<std::pair<const char*, bool>>{
                 {"archive.rest_uri", !a.rest_uri.empty()},
                 {"archive.rest_warehouse", !a.rest_warehouse.empty()},
                 {"archive.rest_token", !a.rest_token.empty()},
                 {"archive.rest_credential", !a.rest_credential.empty()},
                 {"archive.rest_oauth2_uri", !a.rest_oauth2_uri.empty()},
                 {"archive.rest_scope", a.rest_scope != defaults.rest_scope},
                 {"archive.rest_timeout_ms", a.rest_timeout_ms != defaults.rest_timeout_ms},
                 {"archive.rest_ca_file", !a.rest_ca_file.empty()},
                 {"archive.rest_access_delegation", !a.rest_access_delegation.empty()}}) {
            require(!set, key, "is only used with archive.catalog_type = \"rest\"");
        }
    }
    require(a.rest_timeout_ms >= 100 && a.rest_timeout_ms <= 600000, "archive.rest_timeout_ms",
            "must be between 100 and 600000");
    require(a.compaction_interval_s >= 0, "archive.compaction_interval_s",
            "must not be negative (0 disables scheduled compaction)");
    require(a.compact_min_files >= 2, "archive.compact_min_files", "must be at least 2");
    require(a.partition == "day" || a.partition == "hour", "archive.partition",
            "'" + a.partition + "' is not one of day, hour");
    for (const auto& [key, value] :
         {std::pair<const char*, const std::string*>{"archive.catalog", &c.archive.catalog},
          {"archive.namespace", &c.archive.namespace_},
          {"archive.table", &c.archive.table}}) {
        // Iceberg identifiers end up in file paths and in a dotted name: keep them plain.
        require(!value->empty() && value->size() <= 255 &&
                    std::all_of(value->begin(), value->end(),
                                [](unsigned char ch) {
                                    return std::isalnum(ch) != 0 || ch == '_' || ch == '-';
                                }),
                key, "'" + *value + "' must be 1..255 characters of A-Z a-z 0-9 _ -");
    }
    require(c.archive.target_file_bytes >= 1024 && c.archive.target_file_bytes <= (8LL << 30),
            "archive.target_file_bytes", "must be between 1024 and 8589934592");
    require(c.archive.commit_interval_s >= 1 && c.archive.commit_interval_s <= 86400,
            "archive.commit_interval_s", "must be between 1 and 86400");
    require(c.archive.poll_interval_ms >= 10 && c.archive.poll_interval_ms <= 600000,
            "archive.poll_interval_ms", "must be between 10 and 600000");
    require(c.archive.maintenance_interval_s >= 0, "archive.maintenance_interval_s",
            "must not be negative (0 disables scheduled maintenance)");
    const auto max_age = std::to_string(kMaxAgeS);
    require(c.archive.snapshot_max_age_s >= 0 && c.archive.snapshot_max_age_s <= kMaxAgeS,
            "archive.snapshot_max_age_s", "must be between 0 and " + max_age + " (100 years)");
    require(c.archive.min_snapshots_to_keep >= 1, "archive.min_snapshots_to_keep",
            "must be at least 1");
    require(c.archive.max_manifests >= 1, "archive.max_manifests", "must be at least 1");
    require(c.archive.orphan_min_age_s >= 0 && c.archive.orphan_min_age_s <= kMaxAgeS,
            "archive.orphan_min_age_s", "must be between 0 and " + max_age + " (100 years)");
    require(c.archive.metadata_versions_max >= 1, "archive.metadata_versions_max",
            "must be at least 1");
    require(c.metrics.listen.empty() || valid_host_port(c.metrics.listen), "metrics.listen",
            "'" + c.metrics.listen + "' is not host:port with a port in 1..65535 (or empty)");
    require(c.metrics.listen.empty() || c.metrics.listen != c.http.listen, "metrics.listen",
            "must differ from http.listen (leave it empty to serve /metrics there)");
    const auto& lv = c.log.level;
    require(lv == "debug" || lv == "info" || lv == "warn" || lv == "error", "log.level",
            "'" + lv + "' is not one of debug, info, warn, error");
    require(c.log.format == "text" || c.log.format == "json", "log.format",
            "'" + c.log.format + "' is not text or json");
}

bool secret_property(const std::string& name) {
    for (const char* word : {"password", "secret", "key", "token", "oauthbearer.config"}) {
        if (name.find(word) != std::string::npos) return true;
    }
    return false;
}

}  // namespace

Environment process_environment() {
    Environment env;
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
        const std::string_view entry(*e);
        if (entry.rfind("TRACKD_", 0) != 0) continue;
        const auto eq = entry.find('=');
        if (eq == std::string_view::npos) continue;
        env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
    }
    return env;
}

Config load_from_string(const std::string& toml_text, const std::string& source_name,
                        const Environment& env) {
    Config c;
    toml::table root;
    try {
        root = toml::parse(toml_text, source_name);
    } catch (const toml::parse_error& e) {
        const auto& where = e.source().begin;
        throw ConfigError(
            source_name + ":" + std::to_string(where.line) + ":" + std::to_string(where.column),
            std::string(e.description()));
    }
    apply_toml(c, root);
    apply_env(c, env);
    validate(c);
    return c;
}

Config load(const std::string& file, const Environment& env) {
    if (file.empty()) return load_from_string("", "(defaults)", env);
    std::ifstream in(file);
    if (!in) throw ConfigError("--config", "cannot read '" + file + "'");
    std::ostringstream text;
    text << in.rdbuf();
    return load_from_string(text.str(), file, env);
}

std::string to_masked_toml(const Config& config) {
    std::ostringstream out;
    std::string current;
    for (const auto& f : fields()) {
        if (f.section != current) {
            if (!current.empty()) out << "\n";
            out << "[" << f.section << "]\n";
            current = f.section;
        }
        const std::string value = f.to_toml(config);
        out << f.key << " = " << value << "\n";
    }
    out << "\n[" << kTokensPath << "]\n";
    for (const auto& [name, token] : config.http.tokens) {
        out << quote(name) << " = " << quote(token.scope + ":****") << "\n";
    }
    out << "\n[" << kPropertiesPath << "]\n";
    for (const auto& [k, v] : config.kafka.properties) {
        out << quote(k) << " = " << quote(secret_property(k) ? "****" : v) << "\n";
    }
    return out.str();
}

}  // namespace trackd::config
