// What every endpoint service shares: the connection pools and the HTTP settings.
#pragma once

#include <string>

#include "trackd/config/config.hpp"

#include "connection_pool.hpp"

namespace trackd::http {

struct ServiceContext {
    ConnectionPool& pool;     // reads: http.pg_dsn (a replica) when set, else pg.dsn
    ConnectionPool& primary;  // writes (geofences): pg.dsn; the same pool as `pool` without replica
    const config::HttpConfig& http;
    std::string fallback_host;  // for links when a request has no usable Host header
    bool replica = false;       // reads go to http.pg_dsn
};

// Default page size of every list endpoint (capped by http.max_limit).
inline constexpr int kDefaultLimit = 100;
// Longest vehicle id / zone name accepted in a path.
inline constexpr std::size_t kMaxIdentifierBytes = 1024;

}  // namespace trackd::http
