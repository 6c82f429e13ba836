// Prometheus metrics: counters, gauges and histograms in one process-wide registry, rendered
// as the Prometheus text exposition format 0.0.4 at GET /metrics.
//
//   auto& rejected = core::metrics::counter("trackd_messages_rejected_total",
//                                           "Messages refused, by reason code",
//                                           {{"reason", "malformed_json"}});
//   rejected.inc();
//
// Contract: counter()/gauge()/histogram() look the series up (or create it) under a lock and
// return a reference that stays valid for the life of the process: look it up once, keep the
// reference, and update it on the hot path. Updates are lock-free (relaxed atomics) and may
// come from any thread; a histogram observation is a short bucket scan plus two atomic adds.
// Names start with "trackd_" and carry their unit ("_seconds", "_bytes", "_total" for
// counters). Label values must come from a bounded set (reason codes, route patterns,
// partition numbers), never from request data: a family refuses more than kMaxSeries series.
// Asking for an existing name with another type, help text or bucket list is a programming
// error and throws std::logic_error, as do invalid names.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace trackd::core::metrics {

// Label names and values, in the order they are rendered.
using Labels = std::vector<std::pair<std::string, std::string>>;

// A monotonically increasing count (inc) or sum (add, e.g. seconds spent paused). Counting
// is an integer atomic add, two to three times cheaper than a floating-point one.
class Counter {
  public:
    void inc() { count_.fetch_add(1, std::memory_order_relaxed); }
    template <class T>
    requires std::is_integral_v<T>  // fractions: add()
    void inc(T n) { count_.fetch_add(static_cast<std::uint64_t>(n), std::memory_order_relaxed); }
    void add(double v) { sum_.fetch_add(v, std::memory_order_relaxed); }
    [[nodiscard]] double value() const {
        return static_cast<double>(count_.load(std::memory_order_relaxed)) +
               sum_.load(std::memory_order_relaxed);
    }

  private:
    std::atomic<std::uint64_t> count_{0};
    std::atomic<double> sum_{0.0};
};

// A value that goes up and down.
class Gauge {
  public:
    void set(double v) { value_.store(v, std::memory_order_relaxed); }
    void inc(double v = 1.0) { value_.fetch_add(v, std::memory_order_relaxed); }
    void dec(double v = 1.0) { value_.fetch_sub(v, std::memory_order_relaxed); }
    [[nodiscard]] double value() const { return value_.load(std::memory_order_relaxed); }

  private:
    std::atomic<double> value_{0.0};
};

// Observations counted into fixed buckets (upper bounds, ascending; +Inf is implicit).
class Histogram {
  public:
    explicit Histogram(std::vector<double> bounds);

    void observe(double v) {
        std::size_t i = 0;
        while (i < bounds_.size() && v > bounds_[i]) ++i;
        counts_[i].fetch_add(1, std::memory_order_relaxed);
        sum_.fetch_add(v, std::memory_order_relaxed);
    }

    [[nodiscard]] const std::vector<double>& bounds() const { return bounds_; }
    // Observations per bucket, not cumulative; the last one is the +Inf bucket.
    [[nodiscard]] std::vector<std::uint64_t> bucket_counts() const;
    [[nodiscard]] std::uint64_t count() const;
    [[nodiscard]] double sum() const { return sum_.load(std::memory_order_relaxed); }

  private:
    std::vector<double> bounds_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
    std::atomic<double> sum_{0.0};
};

// Bucket bounds: `count` values from `start`, each `factor` times the previous.
std::vector<double> exponential_buckets(double start, double factor, std::size_t count);

// Series per family at most; beyond it counter()/gauge()/histogram() throw std::logic_error.
inline constexpr std::size_t kMaxSeries = 4096;

class Registry {
  public:
    Registry();
    ~Registry();
    Registry(const Registry&) = delete;
    Registry& operator=(const Registry&) = delete;

    Counter& counter(std::string_view name, std::string_view help, const Labels& labels = {});
    Gauge& gauge(std::string_view name, std::string_view help, const Labels& labels = {});
    Histogram& histogram(std::string_view name, std::string_view help,
                         const std::vector<double>& bounds, const Labels& labels = {});

    // Hides a series from render() (e.g. the lag of a partition this instance no longer owns).
    // References to it stay valid; looking it up again shows it again.
    void remove(std::string_view name, const Labels& labels);

    // The text exposition format 0.0.4: families sorted by name, each with HELP and TYPE.
    [[nodiscard]] std::string render() const;

  private:
    struct Family;
    struct Series;
    Series& find_or_add(std::string_view name, std::string_view help, int type,
                        const std::vector<double>* bounds, const Labels& labels);

    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<Family>> families_;
};

// The process-wide registry that GET /metrics renders.
Registry& registry();

inline Counter& counter(std::string_view name, std::string_view help, const Labels& labels = {}) {
    return registry().counter(name, help, labels);
}
inline Gauge& gauge(std::string_view name, std::string_view help, const Labels& labels = {}) {
    return registry().gauge(name, help, labels);
}
inline Histogram& histogram(std::string_view name, std::string_view help,
                            const std::vector<double>& bounds, const Labels& labels = {}) {
    return registry().histogram(name, help, bounds, labels);
}

// Sets trackd_process_resident_memory_bytes, trackd_process_cpu_seconds_total,
// trackd_process_open_fds and trackd_process_start_time_seconds from /proc/self, then renders
// the process-wide registry: what GET /metrics answers.
std::string render_process_metrics();

// The Content-Type of render()'s output.
inline constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace trackd::core::metrics
