// trackd-fleet's command line.
//
// Contract: parse_fleet_options() returns complete, checked options or throws
// core::ConfigError naming the option and the bad value; "--help" sets help.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "geo.hpp"

namespace trackd::fleet {

struct FleetOptions {
    std::string brokers = "127.0.0.1:59092";
    std::string topic = "vehicle-positions";
    std::uint32_t vehicles = 1000;
    std::optional<std::uint64_t> messages;  // neither this nor duration_s: kDefaultMessages
    std::optional<double> duration_s;
    double rate = 0;  // messages per second, 0 = as fast as possible
    std::int64_t interval_ms = 1000;
    LonLat city{13.405, 52.52};
    double radius_km = 15;
    double bad_share = 0.01;
    double out_of_order_share = 0.005;
    double duplicate_share = 0.005;
    std::uint64_t seed = 1;
    std::optional<std::int64_t> start_ms;  // kStartNow, or default: the last round ends near now
    std::string manifest;
    std::string summary_json;
    bool quiet = false;
    std::string id_prefix = "veh-";
    bool protobuf = false;                   // --format protobuf
    std::optional<std::uint32_t> schema_id;  // --framing confluent --schema-id N
    std::vector<std::pair<std::string, std::string>> kafka_properties;  // -X key=value
    bool help = false;
};

inline constexpr std::uint64_t kDefaultMessages = 100'000;
// --start now: the first round is the moment the fleet starts (live demos).
inline constexpr std::int64_t kStartNow = std::numeric_limits<std::int64_t>::min();

extern const std::string_view kFleetUsage;

FleetOptions parse_fleet_options(int argc, char** argv);

}  // namespace trackd::fleet
