#include "trackd/core/metrics.hpp"

#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace trackd::core::metrics {
namespace {

TEST(Metrics, RendersCountersAndGaugesWithHelpAndType) {
    Registry r;
    r.counter("trackd_b_total", "Bees", {{"reason", "x"}}).inc();
    r.counter("trackd_b_total", "Bees", {{"reason", "x"}}).inc(2);
    r.counter("trackd_b_total", "Bees", {{"reason", "a"}}).add(0.5);
    r.gauge("trackd_a_bytes", "Bytes\nwith a \\ newline").set(-3);
    EXPECT_EQ(r.render(),
              "# HELP trackd_a_bytes Bytes\\nwith a \\\\ newline\n"
              "# TYPE trackd_a_bytes gauge\n"
              "trackd_a_bytes -3\n"
              "# HELP trackd_b_total Bees\n"
              "# TYPE trackd_b_total counter\n"
              "trackd_b_total{reason=\"a\"} 0.5\n"
              "trackd_b_total{reason=\"x\"} 3\n");
}

TEST(Metrics, HistogramBucketsAreCumulativeWithInf) {
    Registry r;
    auto& h = r.histogram("trackd_commit_duration_seconds", "Commit time", {0.1, 1, 10},
                          {{"writer", "0"}});
    for (const double v : {0.05, 0.1, 0.5, 5.0, 50.0}) h.observe(v);
    EXPECT_EQ(h.count(), 5U);
    EXPECT_EQ(r.render(),
              "# HELP trackd_commit_duration_seconds Commit time\n"
              "# TYPE trackd_commit_duration_seconds histogram\n"
              "trackd_commit_duration_seconds_bucket{writer=\"0\",le=\"0.1\"} 2\n"
              "trackd_commit_duration_seconds_bucket{writer=\"0\",le=\"1\"} 3\n"
              "trackd_commit_duration_seconds_bucket{writer=\"0\",le=\"10\"} 4\n"
              "trackd_commit_duration_seconds_bucket{writer=\"0\",le=\"+Inf\"} 5\n"
              "trackd_commit_duration_seconds_sum{writer=\"0\"} 55.65\n"
              "trackd_commit_duration_seconds_count{writer=\"0\"} 5\n");
}

TEST(Metrics, LabelValuesAreEscaped) {
    Registry r;
    r.gauge("trackd_x", "x", {{"route", "a\"b\\c\nd"}}).set(1);
    EXPECT_NE(r.render().find("trackd_x{route=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos)
        << r.render();
}

TEST(Metrics, SameNameAndLabelsIsTheSameSeries) {
    Registry r;
    auto& a = r.counter("trackd_n_total", "n", {{"k", "v"}});
    auto& b = r.counter("trackd_n_total", "n", {{"k", "v"}});
    EXPECT_EQ(&a, &b);
    EXPECT_NE(&a, &r.counter("trackd_n_total", "n", {{"k", "w"}}));
}

TEST(Metrics, MisuseIsRefused) {
    Registry r;
    r.counter("trackd_n_total", "n");
    EXPECT_THROW(r.gauge("trackd_n_total", "n"), std::logic_error);             // another type
    EXPECT_THROW(r.counter("trackd_n_total", "other help"), std::logic_error);  // another help
    EXPECT_THROW(r.counter("n_total", "no prefix"), std::logic_error);
    EXPECT_THROW(r.counter("trackd_bad-name", "dash"), std::logic_error);
    EXPECT_THROW(r.gauge("trackd_g", "g", {{"bad-label", "x"}}), std::logic_error);
    EXPECT_THROW(r.gauge("trackd_g", "g", {{"__reserved", "x"}}), std::logic_error);
    EXPECT_THROW(r.gauge("trackd_g", "g", {{"a", "1"}, {"a", "2"}}), std::logic_error);
    EXPECT_THROW(r.histogram("trackd_h", "h", {1, 1}), std::logic_error);
    EXPECT_THROW(r.histogram("trackd_h2", "h", {}), std::logic_error);
    EXPECT_THROW(r.histogram("trackd_h3", "h", {1}, {{"le", "x"}}), std::logic_error);
    r.histogram("trackd_h4", "h", {1, 2});
    EXPECT_THROW(r.histogram("trackd_h4", "h", {1, 3}), std::logic_error);  // other buckets
}

TEST(Metrics, LabelSetsAreBounded) {
    Registry r;
    for (std::size_t i = 0; i < kMaxSeries; ++i) {
        r.gauge("trackd_g", "g", {{"i", std::to_string(i)}});
    }
    EXPECT_THROW(r.gauge("trackd_g", "g", {{"i", "one too many"}}), std::logic_error);
}

TEST(Metrics, RemovedSeriesIsHiddenUntilLookedUpAgain) {
    Registry r;
    auto& lag = r.gauge("trackd_lag", "lag", {{"partition", "3"}});
    lag.set(7);
    r.remove("trackd_lag", {{"partition", "3"}});
    EXPECT_EQ(r.render().find("trackd_lag{"), std::string::npos);
    EXPECT_NE(r.render().find("# TYPE trackd_lag gauge"), std::string::npos);
    lag.set(8);  // the reference stays valid
    r.gauge("trackd_lag", "lag", {{"partition", "3"}});
    EXPECT_NE(r.render().find("trackd_lag{partition=\"3\"} 8\n"), std::string::npos);
}

TEST(Metrics, ConcurrentUpdatesAreNotLost) {
    Registry r;
    auto& c = r.counter("trackd_c_total", "c");
    auto& h = r.histogram("trackd_h_seconds", "h", exponential_buckets(0.001, 2, 10));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&] {
            for (int i = 0; i < 10000; ++i) {
                c.inc();
                h.observe(0.003);
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(c.value(), 40000);
    EXPECT_EQ(h.count(), 40000U);
    EXPECT_EQ(h.bucket_counts()[2], 40000U);  // 0.001, 0.002, [0.004]
}

TEST(Metrics, ExponentialBuckets) {
    EXPECT_EQ(exponential_buckets(1, 10, 3), (std::vector<double>{1, 10, 100}));
}

TEST(Metrics, ProcessMetricsAreRendered) {
    const auto text = render_process_metrics();
    for (const char* name :
         {"trackd_process_cpu_seconds_total ", "trackd_process_resident_memory_bytes ",
          "trackd_process_open_fds ", "trackd_process_start_time_seconds "}) {
        const auto pos = text.find(std::string("\n") + name);
        ASSERT_NE(pos, std::string::npos) << name << " missing:\n" << text;
    }
    const auto rss_at = text.find("\ntrackd_process_resident_memory_bytes ");
    EXPECT_GT(std::stod(text.substr(rss_at + 38)), 1e5);
}

}  // namespace
}  // namespace trackd::core::metrics
