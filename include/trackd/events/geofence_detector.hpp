// Geofence enter/exit detection: a pure function of the previous state and a vehicle's new
// positions, so the rules are tested without a database (docs/ingest.md, "Geofence events").
//
// Contract: detect() walks one vehicle's positions in time order and, per zone, reports each
// crossing into or out of it. With a zone dwell time D > 0, a crossing counts only once the
// vehicle has been seen on the new side for at least D (a later position at least D after the
// first one on that side, with no position back on the old side in between); the event then
// carries the first position on the new side (its time, place and Kafka coordinates). With
// D = 0 every crossing counts at once. No state means outside. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace trackd::events {

// One position of a vehicle, as far as detection needs it.
struct Sample {
    std::int64_t time_us = 0;  // recorded_at, microseconds since the Unix epoch
    double longitude = 0;
    double latitude = 0;
    std::int32_t partition = 0;
    std::int64_t offset = 0;

    bool operator==(const Sample&) const = default;
};

// A vehicle's detection state in one zone.
struct ZoneState {
    bool inside = false;
    // The first position contradicting `inside` while the dwell time runs.
    std::optional<Sample> pending;

    // The state that needs no row: outside, nothing pending.
    [[nodiscard]] bool is_default() const { return !inside && !pending; }
    bool operator==(const ZoneState&) const = default;
};

enum class EventKind { enter, exit };

const char* kind_name(EventKind kind);

struct Event {
    std::string zone;
    EventKind kind = EventKind::enter;
    Sample at;  // the first position on the new side

    bool operator==(const Event&) const = default;
};

// A position with the zones that cover it (boundary included), by name.
struct Step {
    Sample sample;
    std::set<std::string> zones;
};

struct Detection {
    // In the order they were confirmed (by position, then zone name).
    std::vector<Event> events;
    // The new state of every zone in `previous` or in a step that still exists; a default
    // state means the zone's row can go.
    std::map<std::string, ZoneState> states;
};

// `previous`: the vehicle's state per zone (zones absent: outside). `steps`: its new positions,
// strictly increasing in time. `dwell_us`: every zone that exists now, with its dwell time;
// zones not in it (deleted) are ignored, in `previous` and in the steps.
Detection detect(const std::map<std::string, ZoneState>& previous, const std::vector<Step>& steps,
                 const std::map<std::string, std::int64_t>& dwell_us);

// trackd's one total order of a vehicle's positions, wherever a "latest" is chosen (batch
// dedupe, current state, validation, geofences): recorded_at, then the Kafka offset.
struct OrderKey {
    std::int64_t recorded_at_us = 0;
    std::int64_t offset = 0;
    // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
    auto operator<=>(const OrderKey&) const = default;
};

// Which positions take part in detection: read order in, indices out. A position counts when it
// is after `committed` (the vehicle's latest committed position, if any) and after every
// position read before it, in OrderKey order; older ones (late, replayed) produce no events.
// The result is in strictly increasing order, and the same however the positions are batched.
std::vector<std::size_t> advancing(std::optional<OrderKey> committed,
                                   const std::vector<OrderKey>& keys_in_read_order);

}  // namespace trackd::events
