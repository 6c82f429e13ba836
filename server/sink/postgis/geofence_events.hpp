// The geofence step of an ingest transaction (docs/ingest.md, "Geofence events").
//
// Contract: detect() runs inside the batch's transaction BEFORE the current-state upsert: it
// reads each vehicle's latest committed time, asks PostGIS once which zones cover the batch's
// advancing positions (events::advancing; for large batches through a temporary GiST index on
// the points, built and dropped inside the transaction), loads those vehicles' detection state and
// runs events::detect. write() runs as the LAST work before COMMIT: it stores the new states and,
// if there are events, takes their ids from trackd.geofence_event_ids (whose row lock orders
// event-producing transactions, so ids follow commit order) and inserts them. A batch with no
// zones defined costs one query. Database errors propagate as db::DbError. Owned by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trackd/batch/batch.hpp"
#include "trackd/events/geofence_detector.hpp"

namespace trackd::db {
class Connection;
}

namespace trackd::sink::postgis {

struct VehicleEvent {
    std::string vehicle_id;
    events::Event event;
};

struct StateChange {
    std::string vehicle_id;
    std::int64_t zone_id = 0;
    events::ZoneState state;  // default: delete the row
};

struct GeofenceWork {
    std::vector<VehicleEvent> events;
    std::vector<StateChange> changes;
};

// Once per connection: the session's temporary table for the batch's points.
void prepare_geofence_session(db::Connection& conn);

GeofenceWork detect_geofence_events(db::Connection& conn, const batch::Batch& batch);

// Returns the number of events written.
std::size_t write_geofence_events(db::Connection& conn, const GeofenceWork& work,
                                  std::int64_t ingest_batch_id);

}  // namespace trackd::sink::postgis
