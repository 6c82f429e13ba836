// Operations: a real Prometheus (Debian's /usr/bin/prometheus) scraping a running trackd during
// ingest, and the check that every metric the Grafana dashboards and the alert rules use is one
// that a running trackd exports.
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <boost/asio/ip/tcp.hpp>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "trackd/net/http_client.hpp"

#include "support/child_process.hpp"
#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/ingest_harness.hpp"

namespace trackd::test {
namespace {

namespace fs = std::filesystem;

std::string read_text(const fs::path& p) {
    std::ifstream in(p);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// GET /metrics until it answers (trackd starts its HTTP server after the schema check).
std::string scrape(unsigned short port) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < until) {
        try {
            auto r = HttpClient(port).get("/metrics");
            if (r.status == 200) return r.body;
        } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): not listening yet
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return {};
}

// Waits until `ready` holds for the exported text.
template <class Pred>
std::string scrape_until(unsigned short port, Pred ready) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    std::string text;
    while (std::chrono::steady_clock::now() < until) {
        text = scrape(port);
        if (ready(text)) return text;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return text;
}

std::map<std::string, std::string> exported_types(const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("# TYPE ", 0) != 0) continue;
        std::istringstream f(line.substr(7));
        std::string name;
        std::string type;
        f >> name >> type;
        out[name] = type;
    }
    return out;
}

// trackd_* names in a PromQL expression (or any text).
std::set<std::string> metric_names(const std::string& text) {
    static const std::regex name(R"(trackd_[a-zA-Z0-9_]+)");
    std::set<std::string> out;
    for (auto it = std::sregex_iterator(text.begin(), text.end(), name);
         it != std::sregex_iterator(); ++it) {
        out.insert(it->str());
    }
    return out;
}

void collect_exprs(const nlohmann::json& j, std::vector<std::string>& exprs, int& sql) {
    if (j.is_object()) {
        for (const auto& [k, v] : j.items()) {
            if (k == "expr" && v.is_string()) exprs.push_back(v.get<std::string>());
            if (k == "rawSql" && v.is_string()) ++sql;
            collect_exprs(v, exprs, sql);
        }
    } else if (j.is_array()) {
        for (const auto& v : j) collect_exprs(v, exprs, sql);
    }
}

TEST(Operations, PrometheusScrapesTrackdDuringIngest) {
    ASSERT_TRUE(fs::exists("/usr/bin/prometheus")) << "install Debian's prometheus package";
    IngestHarness h("metricsprom", 2);
    const auto metrics_port = free_port();
    auto trackd =
        h.start_trackd({{"TRACKD_METRICS_LISTEN", "127.0.0.1:" + std::to_string(metrics_port)}});
    ASSERT_FALSE(scrape(metrics_port).empty()) << IngestHarness::read_file(h.log_path());

    const fs::path dir = fs::path(h.log_path()).parent_path() / "prometheus";
    fs::create_directories(dir / "data");
    std::ofstream(dir / "prometheus.yml")
        << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
           "scrape_configs:\n  - job_name: trackd\n    static_configs:\n"
           "      - targets: [\"127.0.0.1:"
        << metrics_port << "\"]\n";
    const auto prom_port = free_port();
    ChildProcess prometheus(
        {"/usr/bin/prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
         "--storage.tsdb.path=" + (dir / "data").string(),
         "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
        {}, (dir / "prometheus.log").string());
    const auto query = [&](const std::string& promql) {
        return HttpClient(prom_port).get("/api/v1/query?query=" + net::url_encode(promql));
    };

    h.produce(20, 3000);
    const auto manifest = load_manifest(h.manifest_path());
    std::int64_t accepted = 0;
    for (const auto& [c, e] : manifest) accepted += e.reason.empty() ? 1 : 0;
    ASSERT_GT(accepted, 0);
    ASSERT_TRUE(
        h.wait_drained(static_cast<std::int64_t>(manifest.size()), std::chrono::seconds(120)))
        << IngestHarness::read_file(h.log_path());

    // Read back through Prometheus's HTTP API: the accepted counter reaches exactly the number
    // of messages the fleet sent that trackd must accept, and a lag series per partition.
    double seen_accepted = -1;
    std::size_t lag_series = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < until) {
        try {
            auto a = query("sum(trackd_messages_accepted_total)");
            if (a.status == 200) {
                for (auto r : a.json()["data"]["result"].get_array()) {
                    seen_accepted = std::stod(std::string(std::string_view(r["value"].at(1))));
                }
            }
            auto lag = query("trackd_kafka_consumer_lag_messages");
            if (lag.status == 200) lag_series = lag.json()["data"]["result"].get_array().size();
        } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): not up yet
        }
        if (seen_accepted == static_cast<double>(accepted) && lag_series == 2) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    EXPECT_EQ(seen_accepted, static_cast<double>(accepted))
        << IngestHarness::read_file((dir / "prometheus.log").string());
    EXPECT_EQ(lag_series, 2U) << "one lag series per partition";
    // Every message is committed: the lag as Prometheus sees it comes down to 0, and its rate
    // of change is a series too.
    auto lag = query("max(trackd_kafka_consumer_lag_messages)");
    ASSERT_EQ(lag.status, 200);
    auto rate = query("count(trackd_kafka_consumer_lag_change_messages_per_second)");
    ASSERT_EQ(rate.status, 200);
    ASSERT_EQ(rate.json()["data"]["result"].get_array().size(), 1U);
    EXPECT_EQ(std::string(std::string_view(rate.json()["data"]["result"].at(0)["value"].at(1))),
              "2");
    trackd->kill(SIGTERM);
    EXPECT_TRUE(trackd->wait_for(std::chrono::seconds(15)));
    // The API is off (the harness) but metrics.listen serves: no warning that nothing is.
    EXPECT_EQ(IngestHarness::read_file(h.log_path()).find("no /metrics, /healthz or /readyz"),
              std::string::npos);
    prometheus.kill(SIGTERM);
    EXPECT_TRUE(prometheus.wait_for(std::chrono::seconds(30)));
}

// A dashboard or an alert that names a metric trackd does not export would silently show
// nothing: every trackd_* name in grafana/dashboards/*.json and deploy/prometheus/alerts.yml
// must be in a live trackd's /metrics (histogram names with _bucket, _sum or _count).
TEST(Operations, DashboardsAndAlertsUseExportedMetrics) {
    IngestHarness h("metricsnames", 1);
    const auto http_port = free_port();
    const std::string warehouse = fs::path(h.log_path()).parent_path() / "warehouse";
    auto trackd = h.start_trackd({{"TRACKD_HTTP_ENABLED", "true"},
                                  {"TRACKD_HTTP_LISTEN", "127.0.0.1:" + std::to_string(http_port)},
                                  {"TRACKD_ARCHIVE_ENABLED", "true"},
                                  {"TRACKD_ARCHIVE_WAREHOUSE", warehouse},
                                  {"TRACKD_ARCHIVE_COMMIT_INTERVAL_S", "1"},
                                  // The API's reads through http.pg_dsn (here the primary
                                  // itself) export the replica lag gauge.
                                  {"TRACKD_HTTP_PG_DSN", h.db().dsn()}});
    h.produce(5, 200);
    ASSERT_TRUE(h.wait_drained(200, std::chrono::seconds(120)))
        << IngestHarness::read_file(h.log_path());
    // The lag and archive series appear once a partition was fetched and the archiver ran.
    const auto text = scrape_until(http_port, [](const std::string& t) {
        return t.find("\ntrackd_kafka_consumer_lag_messages{") != std::string::npos &&
               t.find("\ntrackd_archive_commits_total 0\n") == std::string::npos &&
               t.find("\ntrackd_archive_lag_seconds ") != std::string::npos;
    });
    const auto types = exported_types(text);
    ASSERT_GT(types.size(), 20U) << text;

    std::set<std::string> exported;
    for (const auto& [name, type] : types) {
        exported.insert(name);
        if (type == "histogram") {
            for (const char* suffix : {"_bucket", "_sum", "_count"}) exported.insert(name + suffix);
        }
    }

    std::map<std::string, std::set<std::string>> used;  // metric -> files using it
    const fs::path root(TRACKD_SOURCE_DIR);
    int dashboards = 0;
    for (const auto& entry : fs::directory_iterator(root / "grafana" / "dashboards")) {
        if (entry.path().extension() != ".json") continue;
        ++dashboards;
        const auto doc = nlohmann::json::parse(read_text(entry.path()));
        std::vector<std::string> exprs;
        int sql = 0;
        collect_exprs(doc, exprs, sql);
        EXPECT_FALSE(exprs.empty() && sql == 0) << entry.path() << " queries nothing";
        for (const auto& e : exprs) {
            const auto names = metric_names(e);
            EXPECT_FALSE(names.empty()) << entry.path() << ": no trackd metric in " << e;
            for (const auto& n : names) used[n].insert(entry.path().filename().string());
        }
    }
    EXPECT_GE(dashboards, 4);
    const auto rules = read_text(root / "deploy" / "prometheus" / "alerts.yml");
    std::istringstream lines(rules);
    int exprs = 0;
    bool in_expr = false;
    static const std::regex yaml_key(R"(^\s*(- )?[a-z_]+:( .*)?$)");
    for (std::string line; std::getline(lines, line);) {
        // An `expr:` value, inline or a `|` block of the lines up to the next key.
        if (std::regex_match(line, yaml_key)) {
            in_expr = line.find("expr:") != std::string::npos;
            exprs += in_expr ? 1 : 0;
        }
        if (!in_expr) continue;
        for (const auto& n : metric_names(line)) used[n].insert("alerts.yml");
    }
    EXPECT_GE(exprs, 5);
    EXPECT_GT(used.size(), 10U);
    for (const auto& [name, files] : used) {
        std::string where;
        for (const auto& f : files) where += " " + f;
        EXPECT_TRUE(exported.count(name) != 0)
            << name << " (used by" << where << ") is not exported by trackd";
    }
    trackd->kill(SIGTERM);
    EXPECT_TRUE(trackd->wait_for(std::chrono::seconds(15)));
}

}  // namespace
}  // namespace trackd::test
