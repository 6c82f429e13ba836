// trackd-fleet: a simulated fleet producing vehicle positions to Kafka (docs/fleet.md).
// Start-up failures print one line and exit 1; usage errors exit 2.
#include <cstdio>
#include <exception>

#include <fmt/format.h>

#include "trackd/core/error.hpp"

#include "fleet_options.hpp"
#include "fleet_run.hpp"

int main(int argc, char** argv) {
    using namespace trackd;
    fleet::FleetOptions options;
    try {
        options = fleet::parse_fleet_options(argc, argv);
    } catch (const core::ConfigError& e) {
        fmt::print(stderr, "trackd-fleet: {}\n", e.what());
        return 2;
    }
    if (options.help) {
        fmt::print("{}", fleet::kFleetUsage);
        return 0;
    }
    try {
        return fleet::run_fleet(options);
    } catch (const std::exception& e) {
        fmt::print(stderr, "trackd-fleet: {}\n", e.what());
        return 1;
    }
}
