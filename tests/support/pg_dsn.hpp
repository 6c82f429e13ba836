// Host and port in a PostgreSQL DSN of URI form (postgresql://user@host:port/db?...), for the
// tests' proxies in front of the server (tests only).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace trackd::test {

// Where host:port stands in a URI-form DSN (postgresql://user@host:port/db?...): [begin, end).
inline std::pair<std::size_t, std::size_t> pg_hostport_span(const std::string& dsn) {
    const auto scheme = dsn.find("://");
    if (scheme == std::string::npos) throw std::invalid_argument("not a URI DSN: " + dsn);
    auto start = scheme + 3;
    auto end = dsn.find_first_of("/?", start);
    if (end == std::string::npos) end = dsn.size();
    const auto at = dsn.rfind('@', end);
    if (at != std::string::npos && at >= start) start = at + 1;
    return {start, end};
}

// host and port of a URI-form DSN; port 5432 if absent.
inline std::pair<std::string, unsigned short> pg_endpoint(const std::string& dsn) {
    const auto [start, end] = pg_hostport_span(dsn);
    const std::string hostport = dsn.substr(start, end - start);
    const auto colon = hostport.rfind(':');
    if (colon == std::string::npos || hostport.back() == ']') return {hostport, 5432};
    return {hostport.substr(0, colon),
            static_cast<unsigned short>(std::stoi(hostport.substr(colon + 1)))};
}

// `dsn` with its host:port replaced by `host`:`port` (a proxy in front of the server).
inline std::string pg_dsn_at(const std::string& dsn, unsigned short port,
                             const std::string& host = "127.0.0.1") {
    const auto [start, end] = pg_hostport_span(dsn);
    return dsn.substr(0, start) + host + ":" + std::to_string(port) + dsn.substr(end);
}

}  // namespace trackd::test
