// Geofence event metrics, exported at GET /metrics (docs/operations.md): events committed, and
// clients of GET /v1/events/stream (connections opened, and open now). Each function looks its
// series up once; updates are relaxed atomics, from any thread.
#pragma once

#include "trackd/core/metrics.hpp"

namespace trackd::events {

// Incremented by the event count after an ingest transaction with events has committed.
inline core::metrics::Counter& events_emitted() {
    static auto& c = core::metrics::counter("trackd_geofence_events_total",
                                            "Geofence enter/exit events committed");
    return c;
}

inline core::metrics::Counter& stream_clients_connected() {
    static auto& c = core::metrics::counter("trackd_event_stream_connections_total",
                                            "GET /v1/events/stream responses started");
    return c;
}

inline core::metrics::Gauge& stream_clients_open() {
    static auto& g = core::metrics::gauge("trackd_event_stream_clients",
                                          "GET /v1/events/stream responses open now");
    return g;
}

}  // namespace trackd::events
