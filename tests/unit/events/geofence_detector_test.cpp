// The enter/exit/debounce rules on scripted paths, without a database.
#include "trackd/events/geofence_detector.hpp"

#include <gtest/gtest.h>

namespace trackd::events {
namespace {

constexpr std::int64_t kS = 1000000;  // one second in microseconds

Sample at(std::int64_t t_s, std::int64_t offset = 0) {
    return Sample{t_s * kS, 13.0 + static_cast<double>(t_s) / 1000, 52.0, 0, offset};
}

Step step(std::int64_t t_s, std::set<std::string> zones) {
    return Step{at(t_s, t_s), std::move(zones)};
}

Event enter(const std::string& zone, std::int64_t t_s) {
    return Event{zone, EventKind::enter, at(t_s, t_s)};
}
Event exit(const std::string& zone, std::int64_t t_s) {
    return Event{zone, EventKind::exit, at(t_s, t_s)};
}

const std::map<std::string, std::int64_t> kNoDwell = {{"a", 0}, {"b", 0}};

TEST(GeofenceDetector, EnterAndExitWithinOneBatch) {
    const auto d = detect({}, {step(1, {}), step(2, {"a"}), step(3, {"a"}), step(4, {})}, kNoDwell);
    EXPECT_EQ(d.events, (std::vector<Event>{enter("a", 2), exit("a", 4)}));
    ASSERT_EQ(d.states.size(), 1U);
    EXPECT_TRUE(d.states.at("a").is_default());
}

TEST(GeofenceDetector, OverlappingZonesInZoneNameOrder) {
    const auto d = detect({}, {step(1, {"a", "b"}), step(2, {"b"}), step(3, {})}, kNoDwell);
    EXPECT_EQ(d.events,
              (std::vector<Event>{enter("a", 1), enter("b", 1), exit("a", 2), exit("b", 3)}));
}

TEST(GeofenceDetector, StateCarriesAcrossCalls) {
    const auto first = detect({}, {step(1, {"a"})}, kNoDwell);
    EXPECT_EQ(first.events, (std::vector<Event>{enter("a", 1)}));
    EXPECT_TRUE(first.states.at("a").inside);
    // Still inside in the next batch: nothing; then out.
    const auto second = detect(first.states, {step(2, {"a"}), step(3, {})}, kNoDwell);
    EXPECT_EQ(second.events, (std::vector<Event>{exit("a", 3)}));
}

TEST(GeofenceDetector, JitterWithoutDebounceGivesEveryCrossing) {
    const auto d = detect({}, {step(1, {"a"}), step(2, {}), step(3, {"a"}), step(4, {})}, kNoDwell);
    EXPECT_EQ(d.events,
              (std::vector<Event>{enter("a", 1), exit("a", 2), enter("a", 3), exit("a", 4)}));
}

TEST(GeofenceDetector, JitterWithDebounceGivesNone) {
    const std::map<std::string, std::int64_t> dwell = {{"a", 10 * kS}};
    const auto d = detect({}, {step(1, {"a"}), step(2, {}), step(3, {"a"}), step(4, {})}, dwell);
    EXPECT_TRUE(d.events.empty());
    EXPECT_TRUE(d.states.at("a").is_default());
}

TEST(GeofenceDetector, DebouncedEnterCarriesTheFirstPositionInside) {
    const std::map<std::string, std::int64_t> dwell = {{"a", 10 * kS}};
    // Inside at 5, still inside at 9 (not long enough yet), confirmed at 15.
    const auto first = detect({}, {step(5, {"a"}), step(9, {"a"})}, dwell);
    EXPECT_TRUE(first.events.empty());
    ASSERT_TRUE(first.states.at("a").pending.has_value());
    EXPECT_EQ(*first.states.at("a").pending, at(5, 5));
    const auto second = detect(first.states, {step(15, {"a"})}, dwell);
    EXPECT_EQ(second.events, (std::vector<Event>{enter("a", 5)}));
    EXPECT_EQ(second.states.at("a"), (ZoneState{true, std::nullopt}));
    // Leaving needs the same absence: out at 20, back at 25 (no exit), out at 30 and 40.
    const auto third =
        detect(second.states, {step(20, {}), step(25, {"a"}), step(30, {}), step(40, {})}, dwell);
    EXPECT_EQ(third.events, (std::vector<Event>{exit("a", 30)}));
}

TEST(GeofenceDetector, DeletedZoneIsIgnored) {
    const std::map<std::string, ZoneState> prev = {{"gone", ZoneState{true, std::nullopt}}};
    const auto d = detect(prev, {step(1, {"gone", "a"})}, kNoDwell);
    EXPECT_EQ(d.events, (std::vector<Event>{enter("a", 1)}));
    EXPECT_EQ(d.states.count("gone"), 0U);
}

TEST(GeofenceDetector, NoStepsKeepsTheState) {
    const std::map<std::string, ZoneState> prev = {{"a", ZoneState{true, std::nullopt}}};
    const auto d = detect(prev, {}, kNoDwell);
    EXPECT_TRUE(d.events.empty());
    EXPECT_EQ(d.states, prev);
}

// Keys in Kafka order: offsets 100, 101, ... (one partition, as messages are keyed by vehicle).
std::vector<OrderKey> in_kafka_order(const std::vector<std::int64_t>& times,
                                     std::int64_t first_offset = 100) {
    std::vector<OrderKey> out;
    for (const auto t : times) out.push_back(OrderKey{t, first_offset++});
    return out;
}

TEST(GeofenceDetector, AdvancingSkipsOlderPositionsAndTakesEqualTimesInKafkaOrder) {
    EXPECT_EQ(advancing(std::nullopt, in_kafka_order({10, 20, 15, 20, 30})),
              (std::vector<std::size_t>{0, 1, 3, 4}));
    EXPECT_EQ(advancing(OrderKey{25, 99}, in_kafka_order({10, 20, 30, 26})),
              (std::vector<std::size_t>{2}));
    EXPECT_EQ(advancing(OrderKey{40, 99}, in_kafka_order({10, 40, 39})),
              (std::vector<std::size_t>{1}));
    // A replay of the committed position itself (same time, same offset) takes no part.
    EXPECT_TRUE(advancing(OrderKey{40, 100}, in_kafka_order({40, 10})).empty());
}

TEST(GeofenceDetector, AdvancingIsTheSameHoweverBatched) {
    const auto keys = in_kafka_order({5, 3, 8, 8, 7, 9, 12, 1, 13, 13});
    const auto whole = advancing(std::nullopt, keys);
    for (std::size_t cut = 0; cut <= keys.size(); ++cut) {
        const std::vector<OrderKey> a(keys.begin(), keys.begin() + static_cast<long>(cut));
        const std::vector<OrderKey> b(keys.begin() + static_cast<long>(cut), keys.end());
        std::vector<std::size_t> joined = advancing(std::nullopt, a);
        std::optional<OrderKey> latest;
        for (const auto& k : a) latest = latest ? std::max(*latest, k) : k;
        for (const auto i : advancing(latest, b)) joined.push_back(i + cut);
        EXPECT_EQ(joined, whole) << "cut at " << cut;
    }
}

}  // namespace
}  // namespace trackd::events
