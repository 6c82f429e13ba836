// `trackd run`: ingest, the HTTP API and (with archive.enabled) the archiver, with one
// documented stop order. main() parses the command line and calls run().
//
// Contract: run() checks the schema version (throws core::StartupError with what to run when it
// does not match), starts the HTTP server (http.enabled or metrics.listen), the archiver thread
// (archive.enabled) and ingest, and blocks until `stop` becomes true or ingest fails. Stop
// order, so that partitions move to other instances first and readers are served to the end:
//   1. ingest: stops fetching, commits or abandons in-flight batches (at most 5 s), leaves the
//      consumer group;
//   2. the archiver: finishes or abandons its current step and releases its lock;
//   3. the HTTP server: stops accepting, lets requests in progress finish (at most 5 s).
// A fatal ingest error stops the others in the same order, then is rethrown.
#pragma once

#include <atomic>

#include "trackd/config/config.hpp"

namespace trackd::pipeline {

void run(const config::Config& config, std::atomic<bool>& stop);

}  // namespace trackd::pipeline
