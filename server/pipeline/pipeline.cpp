#include "trackd/pipeline/pipeline.hpp"

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "trackd/archive/archiver.hpp"
#include "trackd/core/log.hpp"
#include "trackd/core/version.hpp"
#include "trackd/db/connection.hpp"
#include "trackd/db/migrations.hpp"
#include "trackd/http/server.hpp"
#include "trackd/pipeline/ingest.hpp"
#include "trackd/sink/postgis/history_indexer.hpp"

namespace trackd::pipeline {

void run(const config::Config& config, std::atomic<bool>& stop) {
    {
        db::Connection conn(config.pg, "trackd run");
        db::check_schema(conn);
    }
    // Before anything starts: a warehouse that cannot work (a bucket that does not exist or does
    // not answer) stops start-up here, naming the key.
    std::shared_ptr<archive::Archiver> archiver;
    if (config.archive.enabled) archiver = std::make_shared<archive::Archiver>(config);
    core::log::info("trackd starting", {{"version", std::string(core::version())},
                                        {"topic", config.kafka.topic},
                                        {"group", config.kafka.group}});
    std::optional<http::Server> http;
    if (config.http.enabled || !config.metrics.listen.empty()) {
        if (config.http.enabled && config.http.tokens.empty()) {
            core::log::warn(
                "http: no [http.tokens] configured; only /healthz, /readyz "
                "and the landing pages answer without 401");
        }
        http.emplace(config);
        http->start();
    } else {
        core::log::warn(
            "http: http.enabled = false and metrics.listen is empty: no /metrics, /healthz or "
            "/readyz is served (set metrics.listen = \"host:port\" to serve them alone)");
    }
    // The archiver has its own thread, connections and stop flag, so that it stops after
    // ingest (the stop order in pipeline.hpp), not with it.
    std::atomic<bool> stop_archive{false};
    std::thread archive;
    if (archiver) {
        archive = std::thread([archiver, &stop_archive] {
            try {
                archiver->run(stop_archive);
            } catch (const std::exception& e) {
                // run() retries everything it can; this is a bug or a broken setup: say so and
                // leave ingest running (the archive catches up from the table on restart).
                core::log::error("archiver stopped", {{"error", e.what()}});
            }
        });
    }
    // Closed partitions get their GiST and btree built beside ingest, on their own connection
    // (postgis.defer_indexes; without it, partitions left hot from when it was on), and the
    // partitions being written their BRIN summaries and first statistics, on another; stopped
    // with the archiver, after ingest. The empty open partitions made ahead get the hot
    // indexes before ingest starts.
    if (config.postgis.defer_indexes) {
        try {
            sink::postgis::HistoryIndexer(config).defer_open_partitions();
        } catch (const db::DbError& e) {  // they close with the closed indexes: slower only
            core::log::warn("open history partitions keep their closed indexes",
                            {{"error", e.what()}});
        }
    }
    std::thread indexer(
        [&config, &stop_archive] { sink::postgis::HistoryIndexer(config).run(stop_archive); });
    std::exception_ptr failure;
    try {
        run_ingest(config, stop, production_seams(config));  // 1. ingest
    } catch (...) {
        failure = std::current_exception();
        stop = true;
    }
    stop_archive = true;  // 2. the archiver
    if (archive.joinable()) archive.join();
    if (indexer.joinable()) indexer.join();
    http.reset();  // 3. the HTTP server
    if (failure) std::rethrow_exception(failure);
    core::log::info("trackd stopped");
}

}  // namespace trackd::pipeline
