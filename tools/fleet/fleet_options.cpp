#include "fleet_options.hpp"

#include <charconv>
#include <cmath>
#include <functional>
#include <map>

#include "trackd/core/error.hpp"

#include "timestamp.hpp"

namespace trackd::fleet {

const std::string_view kFleetUsage = R"(usage: trackd-fleet [options]

A simulated fleet: vehicles drive around a city and send their positions to Kafka (key =
vehicle_id), with out-of-order re-sends, duplicates and bad messages mixed in. See docs/fleet.md.

  --brokers LIST            Kafka bootstrap servers (default 127.0.0.1:59092)
  --topic NAME              topic, must exist (default vehicle-positions)
  --vehicles N              number of vehicles (default 1000)
  --messages M              total messages to send, bad ones included (default 100000
                            when --duration-s is not given)
  --duration-s S            stop after S seconds (with --messages: whichever comes first)
  --rate R                  messages per second, 0 = as fast as possible (default 0)
  --interval-ms MS          simulated time between a vehicle's positions (default 1000)
  --start TIME              RFC 3339 timestamp of the first round, or "now" (default: now
                            minus rounds x interval, so the last round ends near now)
  --city LON,LAT            city centre (default 13.405,52.52, Berlin)
  --radius-km KM            city radius (default 15)
  --bad-share F             share of bad messages, spread evenly over the bad kinds
                            (default 0.01)
  --out-of-order-share F    share of out-of-order re-sends (default 0.005)
  --duplicate-share F       share of exact duplicates (default 0.005)
  --seed N                  random seed; same seed and --start, same messages (default 1)
  --manifest FILE           one CSV line per delivered message:
                            partition,offset,kind,expected_reason,vehicle_id,recorded_at_us
  --summary-json FILE       counts by kind and by expected reason, as JSON
  --id-prefix P             vehicle ids are P000001, P000002, ... (default veh-); fleets
                            sharing a topic need different prefixes
  --format json|protobuf    payloads as JSON (default) or trackd.v1.Position
                            (proto/trackd/v1/position.proto)
  --framing none|confluent  with --format protobuf: the Confluent wire-format header (magic
                            byte, --schema-id, message index [0]) before each message
                            (default none)
  --schema-id N             the schema id the Confluent header carries
  -X KEY=VALUE              librdkafka producer property (repeatable), applied last
  --quiet                   no progress lines
  --help                    this text
)";

namespace {

using core::ConfigError;

template <typename T>
T parse_number(const std::string& option, const std::string& text) {
    T value{};
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (ec != std::errc() || ptr != end || text.empty()) {
        throw ConfigError(option, "expected a number, got '" + text + "'");
    }
    if constexpr (std::is_floating_point_v<T>) {
        if (!std::isfinite(value)) throw ConfigError(option, "expected a finite number");
    }
    return value;
}

double parse_share(const std::string& option, const std::string& text) {
    const auto v = parse_number<double>(option, text);
    if (v < 0 || v >= 1)
        throw ConfigError(option, "expected a share in [0, 1), got '" + text + "'");
    return v;
}

LonLat parse_city(const std::string& option, const std::string& text) {
    const auto comma = text.find(',');
    if (comma == std::string::npos) {
        throw ConfigError(option, "expected LON,LAT (e.g. 13.405,52.52), got '" + text + "'");
    }
    const LonLat c{parse_number<double>(option, text.substr(0, comma)),
                   parse_number<double>(option, text.substr(comma + 1))};
    if (c.lon < -180 || c.lon > 180 || c.lat < -80 || c.lat > 80) {
        throw ConfigError(option, "longitude must be in [-180, 180] and latitude in [-80, 80]");
    }
    return c;
}

}  // namespace

FleetOptions parse_fleet_options(int argc, char** argv) {
    FleetOptions o;
    std::string framing = "none";
    std::optional<std::uint32_t> schema_id;
    using Setter = std::function<void(const std::string& option, const std::string& value)>;
    const std::map<std::string, Setter, std::less<>> with_value = {
        {"--brokers", [&](auto&, auto& v) { o.brokers = v; }},
        {"--topic", [&](auto&, auto& v) { o.topic = v; }},
        {"--vehicles",
         [&](auto& k, auto& v) {
             o.vehicles = parse_number<std::uint32_t>(k, v);
             if (o.vehicles == 0) throw ConfigError(k, "must be at least 1");
         }},
        {"--messages", [&](auto& k, auto& v) { o.messages = parse_number<std::uint64_t>(k, v); }},
        {"--duration-s",
         [&](auto& k, auto& v) {
             o.duration_s = parse_number<double>(k, v);
             if (*o.duration_s <= 0) throw ConfigError(k, "must be positive");
         }},
        {"--rate",
         [&](auto& k, auto& v) {
             o.rate = parse_number<double>(k, v);
             if (o.rate < 0) throw ConfigError(k, "must be >= 0");
         }},
        {"--interval-ms",
         [&](auto& k, auto& v) {
             o.interval_ms = parse_number<std::int64_t>(k, v);
             if (o.interval_ms <= 0) throw ConfigError(k, "must be positive");
         }},
        {"--start",
         [&](auto& k, auto& v) {
             o.start_ms = v == "now" ? std::optional(kStartNow) : parse_rfc3339_ms(v);
             if (!o.start_ms) {
                 throw ConfigError(k,
                                   "expected an RFC 3339 timestamp such as "
                                   "2026-11-30T01:02:03.456Z, got '" +
                                       v + "'");
             }
         }},
        {"--city", [&](auto& k, auto& v) { o.city = parse_city(k, v); }},
        {"--radius-km",
         [&](auto& k, auto& v) {
             o.radius_km = parse_number<double>(k, v);
             if (o.radius_km <= 0 || o.radius_km > 1000) {
                 throw ConfigError(k, "must be in (0, 1000]");
             }
         }},
        {"--bad-share", [&](auto& k, auto& v) { o.bad_share = parse_share(k, v); }},
        {"--out-of-order-share",
         [&](auto& k, auto& v) { o.out_of_order_share = parse_share(k, v); }},
        {"--duplicate-share", [&](auto& k, auto& v) { o.duplicate_share = parse_share(k, v); }},
        {"--seed", [&](auto& k, auto& v) { o.seed = parse_number<std::uint64_t>(k, v); }},
        {"--manifest", [&](auto&, auto& v) { o.manifest = v; }},
        {"--id-prefix",
         [&](auto& k, auto& v) {
             if (v.empty() || v.size() > 32) throw ConfigError(k, "expected 1..32 characters");
             o.id_prefix = v;
         }},
        {"--format",
         [&](auto& k, auto& v) {
             if (v != "json" && v != "protobuf") {
                 throw ConfigError(k, "expected json or protobuf, got '" + v + "'");
             }
             o.protobuf = v == "protobuf";
         }},
        {"--framing",
         [&](auto& k, auto& v) {
             if (v != "none" && v != "confluent") {
                 throw ConfigError(k, "expected none or confluent, got '" + v + "'");
             }
             framing = v;
         }},
        {"--schema-id", [&](auto& k, auto& v) { schema_id = parse_number<std::uint32_t>(k, v); }},
        {"--summary-json", [&](auto&, auto& v) { o.summary_json = v; }},
        {"-X",
         [&](auto& k, auto& v) {
             const auto eq = v.find('=');
             if (eq == std::string::npos || eq == 0) {
                 throw ConfigError(k, "expected KEY=VALUE, got '" + v + "'");
             }
             o.kafka_properties.emplace_back(v.substr(0, eq), v.substr(eq + 1));
         }},
    };

    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--help" || arg == "-h") {
            o.help = true;
            continue;
        }
        if (arg == "--quiet" || arg == "-q") {
            o.quiet = true;
            continue;
        }
        std::string value;
        bool has_value = false;
        if (const auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
            value = arg.substr(eq + 1);
            arg.resize(eq);
            has_value = true;
        }
        const auto it = with_value.find(arg);
        if (it == with_value.end()) {
            throw ConfigError(arg, "unknown option (see trackd-fleet --help)");
        }
        if (!has_value) {
            if (i + 1 >= argc) throw ConfigError(arg, "needs a value");
            value = argv[++i];
        }
        it->second(arg, value);
    }

    if (o.bad_share + o.out_of_order_share + o.duplicate_share >= 1) {
        throw ConfigError("--bad-share", "bad, out-of-order and duplicate shares must sum to < 1");
    }
    if (o.messages && *o.messages == 0) throw ConfigError("--messages", "must be at least 1");
    if (framing == "confluent") {
        if (!o.protobuf) throw ConfigError("--framing", "confluent needs --format protobuf");
        if (!schema_id) throw ConfigError("--framing", "confluent needs --schema-id N");
        o.schema_id = schema_id;
    } else if (schema_id) {
        throw ConfigError("--schema-id", "only with --framing confluent");
    }
    if (!o.messages && !o.duration_s) o.messages = kDefaultMessages;
    return o;
}

}  // namespace trackd::fleet
