// Process-wide counters of geofence events, for /metrics.
//
// Contract: plain monotonic counters, incremented with relaxed atomics from any thread:
// `events_emitted` after an ingest transaction with events has committed (by its count),
// `stream_clients_connected` each time a client opens GET /v1/events/stream, and
// `stream_clients_open` up and down as stream responses start and end.
#pragma once

#include <atomic>
#include <cstdint>

namespace trackd::events {

inline std::atomic<std::uint64_t> events_emitted{0};
inline std::atomic<std::uint64_t> stream_clients_connected{0};
inline std::atomic<std::int64_t> stream_clients_open{0};

}  // namespace trackd::events
