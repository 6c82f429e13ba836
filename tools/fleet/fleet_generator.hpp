// The stream of messages a simulated fleet sends: positions of every vehicle, round after round,
// with out-of-order re-sends, duplicates and bad messages mixed in at the configured shares.
//
// Contract: the stream depends only on the GeneratorConfig (same config and seed, same bytes).
// Per vehicle: valid timestamps strictly increase by interval_ms; a bad message carries the
// timestamp the vehicle's next valid one will have (unless the kind is about the timestamp) and
// does not move the vehicle; a duplicate immediately follows the valid message it repeats; an
// out_of_order message repeats a position 2-5 steps older than the vehicle's latest, plus
// "resent":true. Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "geo.hpp"
#include "message_kinds.hpp"
#include "payload.hpp"
#include "rng.hpp"
#include "vehicle.hpp"

namespace trackd::fleet {

struct GeneratorConfig {
    std::uint32_t vehicles = 1000;
    std::int64_t interval_ms = 1000;
    std::int64_t start_ms = 0;             // timestamp of the first round
    std::int64_t future_timestamp_ms = 0;  // what future_timestamp messages carry
    std::int64_t stale_timestamp_ms = 0;   // what stale_timestamp messages carry
    City city;
    double bad_share = 0.01;
    double out_of_order_share = 0.005;
    double duplicate_share = 0.005;
    std::uint64_t seed = 1;
    // Payloads as JSON, or as trackd.v1.Position (protobuf_payload.hpp), behind the Confluent
    // wire-format header with this schema id when it is set.
    bool protobuf = false;
    std::optional<std::uint32_t> schema_id;
    std::string id_prefix = "veh-";  // vehicle ids: <prefix>000001, ...
};

struct Message {
    std::string payload;
    std::uint32_t vehicle = 0;  // index into FleetGenerator::vehicle_ids()
    KindId kind = kValid;
    std::optional<std::int64_t> recorded_at_ms;  // the payload's timestamp, when it has one
};

class FleetGenerator {
  public:
    // Throws std::invalid_argument when the shares cannot be met.
    explicit FleetGenerator(const GeneratorConfig& config);

    // Writes the next message into out (reusing its buffer).
    void next(Message& out);

    [[nodiscard]] const std::vector<std::string>& vehicle_ids() const { return ids_; }

  private:
    static constexpr std::size_t kHistory = 6;  // the latest valid sample and 5 before it

    struct Track {
        Vehicle vehicle;
        std::array<Sample, kHistory> history{};
        std::uint64_t valid_count = 0;
        char shift = 'A';
    };

    [[nodiscard]] std::int64_t next_timestamp_ms(std::uint32_t v) const;
    [[nodiscard]] Sample sample_of(const Track& track, std::int64_t t_ms) const;
    // Clears `payload` and writes the Confluent header when there is one.
    void begin(std::string& payload) const;
    void append_position(std::string& payload, std::uint32_t v, const Sample& s, bool resent) const;
    void emit_valid(std::uint32_t v, Message& out);
    bool emit_out_of_order(std::uint32_t v, Message& out);
    bool emit_bad(std::uint32_t v, Message& out);

    GeneratorConfig config_;
    double dt_s_;
    Rng rng_;
    std::vector<std::string> ids_;
    std::vector<Track> tracks_;
    std::vector<KindId> bad_kinds_;
    std::uint64_t bad_rotation_ = 0;

    // Per draw: P(bad), P(bad or out_of_order); per valid message: P(a duplicate follows).
    double p_bad_ = 0;
    double p_bad_or_ooo_ = 0;
    double p_duplicate_after_valid_ = 0;

    std::uint32_t cursor_ = 0;  // the vehicle whose turn it is
    std::uint64_t round_ = 0;

    bool duplicate_pending_ = false;
    Message duplicate_;
};

}  // namespace trackd::fleet
