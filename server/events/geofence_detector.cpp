#include "trackd/events/geofence_detector.hpp"

namespace trackd::events {

const char* kind_name(EventKind kind) { return kind == EventKind::enter ? "enter" : "exit"; }

Detection detect(const std::map<std::string, ZoneState>& previous, const std::vector<Step>& steps,
                 const std::map<std::string, std::int64_t>& dwell_us) {
    Detection out;
    // Zones of interest: a state to carry on, or a position inside. Every other zone stays
    // outside with nothing pending: no event, no row.
    for (const auto& [zone, state] : previous) {
        if (dwell_us.count(zone) != 0) out.states[zone] = state;
    }
    for (const auto& step : steps) {
        for (const auto& zone : step.zones) {
            if (dwell_us.count(zone) != 0) out.states.try_emplace(zone);
        }
    }
    for (const auto& step : steps) {
        for (auto& [zone, state] : out.states) {
            const bool in = step.zones.count(zone) != 0;
            if (in == state.inside) {
                state.pending.reset();  // back on the counted side: the change did not last
                continue;
            }
            if (!state.pending) state.pending = step.sample;
            if (step.sample.time_us - state.pending->time_us >= dwell_us.at(zone)) {
                out.events.push_back(
                    Event{zone, in ? EventKind::enter : EventKind::exit, *state.pending});
                state.inside = in;
                state.pending.reset();
            }
        }
    }
    return out;
}

std::vector<std::size_t> advancing(std::optional<OrderKey> committed,
                                   const std::vector<OrderKey>& keys_in_read_order) {
    std::vector<std::size_t> out;
    std::optional<OrderKey> latest = committed;
    for (std::size_t i = 0; i < keys_in_read_order.size(); ++i) {
        if (latest && keys_in_read_order[i] <= *latest) continue;
        latest = keys_in_read_order[i];
        out.push_back(i);
    }
    return out;
}

}  // namespace trackd::events
