// One run of the simulated fleet: generate, produce, account, report.
#pragma once

#include "fleet_options.hpp"

namespace trackd::fleet {

// Runs until --messages are sent, --duration-s has passed or SIGINT/SIGTERM (a second signal
// stops waiting for delivery reports). Returns the process exit status: 0 when every message
// was delivered, 1 otherwise. Throws on start-up failures (Kafka unreachable, no topic, ...).
int run_fleet(const FleetOptions& options);

}  // namespace trackd::fleet
