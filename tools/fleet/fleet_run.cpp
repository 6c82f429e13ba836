#include "fleet_run.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <limits>
#include <memory>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "trackd/core/time.hpp"

#include "fleet_generator.hpp"
#include "fleet_producer.hpp"
#include "manifest_writer.hpp"
#include "tally.hpp"
#include "timestamp.hpp"

namespace trackd::fleet {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Used only to place the default timeline for --duration-s without --rate.
constexpr double kAssumedMaxRate = 500'000;
constexpr std::int64_t kMinuteMs = 60'000;
constexpr std::int64_t kHourMs = 60 * kMinuteMs;
constexpr std::int64_t kDayMs = 24 * kHourMs;
constexpr std::int64_t kMaxDefaultSpanMs = 20 * kDayMs;
constexpr auto kProgressEvery = 5s;
constexpr auto kMaxFlushWait = 600s;

std::atomic<int> g_signals{0};

extern "C" void on_signal(int /*sig*/) { g_signals.fetch_add(1); }

struct Timeline {
    std::int64_t start_ms = 0;   // the first round
    std::int64_t end_ms = 0;     // where the last round is expected to end
    std::int64_t future_ms = 0;  // future_timestamp messages
    std::int64_t stale_ms = 0;   // stale_timestamp messages
};

// Places the simulated timeline so that, by default, the last round ends near the moment it is
// sent. The future/stale timestamps depend only on the options (so a seed and --start give the
// same bytes) yet stay future/stale for trackd while the run lasts: future is 1 day after the
// timeline's end plus the expected wall time of sending (with default --start, 1 day after the
// last message is sent), stale is 60 days before the timeline's end.
Timeline place_timeline(const FleetOptions& o) {
    double expected = 0;
    if (o.messages) expected = static_cast<double>(*o.messages);
    if (o.duration_s) {
        const double by_time = *o.duration_s * (o.rate > 0 ? o.rate : kAssumedMaxRate);
        expected = o.messages ? std::min(expected, by_time) : by_time;
    }
    const double rounds = std::ceil(expected / o.vehicles);
    auto span_ms =
        static_cast<std::int64_t>(std::min(rounds * static_cast<double>(o.interval_ms), 1e15));
    // How long sending takes in wall time (0 when unthrottled: assume it is quick).
    const auto wall_ms = static_cast<std::int64_t>(o.rate > 0 ? expected / o.rate * 1000 : 0);
    const std::int64_t now = core::now_us() / 1000;
    Timeline t;
    if (o.start_ms) {
        t.start_ms = *o.start_ms == kStartNow ? now : *o.start_ms;
    } else {
        if (span_ms > kMaxDefaultSpanMs) {
            fmt::print(stderr,
                       "trackd-fleet: warning: the run spans more than 20 days of simulated time; "
                       "starting 20 days ago, so late positions will be in the future\n");
            span_ms = kMaxDefaultSpanMs;
        }
        t.start_ms = now - span_ms;
    }
    t.end_ms = t.start_ms + span_ms;
    t.future_ms = t.end_ms + wall_ms + kDayMs;
    t.stale_ms = t.end_ms - 60 * kDayMs;

    if (t.start_ms < now - 30 * kDayMs) {
        fmt::print(stderr,
                   "trackd-fleet: warning: the timeline starts more than 30 days ago; trackd "
                   "(validate.max_age_s) rejects such positions as stale\n");
    }
    // Simulated time runs linearly from start_ms (at now) to end_ms (at now + wall_ms).
    const std::int64_t ahead_ms = std::max(t.start_ms - now, t.end_ms - (now + wall_ms));
    if (ahead_ms > 5 * kMinuteMs) {
        fmt::print(stderr,
                   "trackd-fleet: warning: positions will run up to {:.0f} s ahead of the clock; "
                   "trackd (validate.max_future_skew_s) rejects them beyond 300 s\n",
                   static_cast<double>(ahead_ms) / 1000);
    }
    if (t.future_ms < now + wall_ms + 12 * kHourMs) {
        fmt::print(stderr,
                   "trackd-fleet: warning: future_timestamp messages carry {}, less than 12 h "
                   "after the run ends; trackd may not see them as future\n",
                   to_rfc3339_ms(t.future_ms));
    }
    return t;
}

// A token bucket: `rate` tokens per second, holding at most 10 ms worth (at least one).
class RateLimiter {
  public:
    explicit RateLimiter(double rate)
        : rate_(rate), capacity_(std::max(1.0, rate / 100)), tokens_(1), last_(Clock::now()) {}

    // Takes a token, waiting (and calling idle) as needed. False when should_stop() said so.
    template <typename Idle, typename Stop>
    bool take(Idle&& idle, Stop&& should_stop) {
        for (;;) {
            const auto now = Clock::now();
            tokens_ = std::min(
                capacity_, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
            last_ = now;
            if (tokens_ >= 1) {
                tokens_ -= 1;
                return true;
            }
            if (should_stop()) return false;
            idle();
            const double wait_s = std::min((1 - tokens_) / rate_, 0.05);
            std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
        }
    }

  private:
    double rate_;
    double capacity_;
    double tokens_;
    Clock::time_point last_;
};

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

int run_fleet(const FleetOptions& o) {
    const Timeline timeline = place_timeline(o);

    GeneratorConfig gc;
    gc.vehicles = o.vehicles;
    gc.interval_ms = o.interval_ms;
    gc.start_ms = timeline.start_ms;
    gc.future_timestamp_ms = timeline.future_ms;
    gc.stale_timestamp_ms = timeline.stale_ms;
    gc.city = City{o.city, o.radius_km * 1000};
    gc.bad_share = o.bad_share;
    gc.out_of_order_share = o.out_of_order_share;
    gc.duplicate_share = o.duplicate_share;
    gc.seed = o.seed;
    gc.protobuf = o.protobuf;
    gc.id_prefix = o.id_prefix;
    gc.schema_id = o.schema_id;
    FleetGenerator generator(gc);

    Tally tally(o.protobuf);
    std::unique_ptr<ManifestWriter> manifest;
    if (!o.manifest.empty()) manifest = std::make_unique<ManifestWriter>(o.manifest, o.protobuf);
    std::optional<FleetProducer> producer;
    producer.emplace(ProducerConfig{o.brokers, o.topic, o.kafka_properties},
                     generator.vehicle_ids(), tally, manifest.get());

    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    if (!o.quiet) {
        fmt::print(stderr,
                   "trackd-fleet: {} vehicles -> '{}' ({} partitions) on {}; simulated time from "
                   "{} every {} ms; seed {}\n",
                   o.vehicles, o.topic, producer->partition_count(), o.brokers,
                   to_rfc3339_ms(timeline.start_ms), o.interval_ms, o.seed);
    }

    const std::uint64_t limit = o.messages.value_or(std::numeric_limits<std::uint64_t>::max());
    const auto t0 = Clock::now();
    const Clock::time_point deadline = o.duration_s
                                           ? t0 + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(*o.duration_s))
                                           : Clock::time_point::max();
    auto next_progress = t0 + kProgressEvery;
    std::uint64_t delivered_at_last_progress = 0;
    std::uint64_t produced = 0;
    RateLimiter limiter(o.rate);
    Message message;

    auto should_stop = [&] {
        return g_signals.load() > 0 || producer->fatal_error() || Clock::now() >= deadline;
    };
    auto report_progress = [&](Clock::time_point now) {
        if (now < next_progress) return;
        const std::uint64_t delivered = tally.delivered();
        if (!o.quiet) {
            fmt::print(stderr,
                       "trackd-fleet: {} sent, {:.0f} msg/s, {} in flight, {} failed, {:.0f} s\n",
                       delivered,
                       static_cast<double>(delivered - delivered_at_last_progress) /
                           std::chrono::duration<double>(kProgressEvery).count(),
                       producer->in_flight(), tally.failed(), seconds_since(t0));
        }
        delivered_at_last_progress = delivered;
        next_progress += kProgressEvery;
    };

    while (produced < limit) {
        if (o.rate > 0) {
            if (!limiter.take(
                    [&] {
                        producer->poll();
                        report_progress(Clock::now());
                    },
                    should_stop)) {
                break;
            }
        }
        generator.next(message);
        producer->produce(message);
        ++produced;
        if (o.rate > 0 || (produced & 1023) == 0) {
            producer->poll();
            report_progress(Clock::now());
            if (should_stop()) break;
        }
    }

    const auto flush_started = Clock::now();
    while (producer->in_flight() > 0) {
        const int signals_before = g_signals.load();
        if (producer->flush(1s) == 0) break;
        report_progress(Clock::now());
        if (producer->fatal_error() || (signals_before > 0 && g_signals.load() > signals_before) ||
            Clock::now() - flush_started > kMaxFlushWait) {
            fmt::print(stderr, "trackd-fleet: giving up on {} undelivered messages\n",
                       producer->in_flight());
            producer->purge();
            break;
        }
    }
    const double elapsed_s = seconds_since(t0);
    if (const auto n = producer->delivered_without_offset(); n > 0) {
        fmt::print(stderr, "trackd-fleet: {} message(s) reported delivered without an offset\n", n);
    }
    producer.reset();  // every delivery report has been served
    if (manifest) manifest->close();

    if (g_signals.load() > 0) fmt::print(stderr, "trackd-fleet: interrupted\n");
    tally.print_text(stdout, elapsed_s, o.topic);
    std::fflush(stdout);
    if (!o.summary_json.empty()) {
        std::FILE* f = std::fopen(o.summary_json.c_str(), "w");
        if (f == nullptr) {
            throw std::runtime_error("--summary-json: cannot open '" + o.summary_json + "'");
        }
        const std::string json = tally.json(elapsed_s) + "\n";
        const bool ok = std::fwrite(json.data(), 1, json.size(), f) == json.size();
        if (std::fclose(f) != 0 || !ok) {
            throw std::runtime_error("--summary-json: writing '" + o.summary_json + "' failed");
        }
    }
    return tally.failed() == 0 && tally.delivered() == produced ? 0 : 1;
}

}  // namespace trackd::fleet
