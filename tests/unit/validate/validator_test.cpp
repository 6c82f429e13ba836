#include "trackd/validate/validator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "trackd/config/config.hpp"
#include "trackd/core/rejection.hpp"
#include "trackd/decode/decoder.hpp"

namespace trackd::validate {
namespace {

namespace fs = std::filesystem;
using core::Position;
using core::Rejection;
using decode::DecodedMessage;

// The fixed clock of every test: 2024-05-01T12:00:00Z.
constexpr std::int64_t kNow = 1714564800LL * 1'000'000;
// 2024-05-01T11:59:30Z, the time of most fixtures.
constexpr std::int64_t kT = 1714564770LL * 1'000'000;

const fs::path kFixtures = fs::path(TRACKD_SOURCE_DIR) / "tests/fixtures/messages";

std::string read_file(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<fs::path> files_in(const std::string& dir, const std::string& ext) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(kFixtures / dir)) {
        if (e.is_regular_file() && e.path().extension() == ext) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The reason code a rejected fixture names: its file name up to the first '.'.
std::string code_in_name(const fs::path& p) {
    const std::string name = p.filename().string();
    return name.substr(0, name.find('.'));
}

// decode + validate, as the pipeline does.
class Pipeline {
  public:
    explicit Pipeline(const config::ValidateConfig& cfg = {})
        : decoder_(static_cast<std::size_t>(cfg.max_payload_bytes)), validator_(cfg) {}

    std::variant<Position, Rejection> run(std::string_view payload, const LastPosition* last,
                                          std::int64_t now_us = kNow) {
        auto decoded = decoder_.decode(payload);
        if (auto* r = std::get_if<Rejection>(&decoded)) return std::move(*r);
        return validator_.validate(std::get<DecodedMessage>(std::move(decoded)), last, now_us);
    }

  private:
    decode::Decoder decoder_;
    Validator validator_;
};

std::string describe(const std::variant<Position, Rejection>& r) {
    if (const auto* rej = std::get_if<Rejection>(&r)) {
        return std::string(core::code(rej->reason)) + ": " + rej->detail;
    }
    return "accepted";
}

DecodedMessage message(double lon, double lat, std::int64_t t = kT) {
    DecodedMessage m;
    m.vehicle_id = "truck-0042";
    m.recorded_at_us = t;
    m.longitude = lon;
    m.latitude = lat;
    return m;
}

std::string code_of(Validator& v, const DecodedMessage& m, const LastPosition* last = nullptr,
                    std::int64_t now = kNow) {
    const auto r = v.validate(m, last, now);
    if (const auto* rej = std::get_if<Rejection>(&r)) return std::string(core::code(rej->reason));
    return "accepted";
}

// ---- valid fixtures: exact values ----

struct Expected {
    std::string vehicle_id;
    std::int64_t recorded_at_us;
    double longitude, latitude;
    double tolerance;  // degrees: 1e-9 as given in 4326, 1e-6 after a transform
    std::optional<double> altitude_m;
    std::optional<float> speed_kmh, heading_deg, accuracy_m;
    std::string attributes_json;
};

const std::map<std::string, Expected>& expected_valid() {
    static const std::map<std::string, Expected> kExpected = [] {
        const Expected berlin{"truck-0042", kT, 13.404954, 52.520008, 1e-9, {}, {}, {}, {}, ""};
        auto at = [&](std::int64_t t) {
            Expected e = berlin;
            e.recorded_at_us = t;
            return e;
        };
        auto transformed = [&] {
            Expected e = berlin;
            e.tolerance = 1e-6;
            return e;
        };
        std::map<std::string, Expected> m;
        m["rfc3339_utc.json"] = berlin;
        m["rfc3339_utc.json"].speed_kmh = 48.5F;
        m["rfc3339_utc.json"].heading_deg = 271.0F;
        m["rfc3339_utc.json"].accuracy_m = 4.2F;
        m["rfc3339_offset.json"] = berlin;
        m["rfc3339_negative_offset.json"] = berlin;
        m["rfc3339_fraction.json"] = at(kT + 123456);
        m["rfc3339_nanoseconds.json"] = at(kT + 123456);
        m["epoch_ms.json"] = at(kT + 123000);
        m["geom_hex_wkb.json"] = berlin;
        m["geom_hex_ewkb_srid4326.json"] = berlin;
        m["geom_hex_ewkb_pointz.json"] = berlin;
        m["geom_hex_ewkb_pointz.json"].altitude_m = 34.5;
        m["geom_hex_ewkb_srid3857_overrides_field.json"] = transformed();
        m["projected_3857.json"] = transformed();
        m["projected_25833.json"] = transformed();
        m["geographic_4258.json"] = transformed();
        m["nulls_mean_absent.json"] = berlin;
        m["escaped_keys.json"] = berlin;
        m["escaped_keys.json"].attributes_json = R"({"dri\u0076er":"anna"})";
        m["attributes_nested.json"] =
            Expected{"bus-7",
                     kT,
                     11.576124,
                     48.137154,
                     1e-9,
                     {},
                     {},
                     {},
                     {},
                     R"({"driver":{"id":17,"name":"Anna Müller"},"tags":["night", "express"],)"
                     R"("doors_open":false,"fuel_pct":63.5,"note":"line \"7\"\n","trailer":null,)"
                     R"("big":12345678901234567890123,"tiny":1e-400})"};
        m["pretty_printed.json"] = Expected{
            "van-3", kT,   151.209296, -33.868820, 1e-9,
            12.25,   0.0F, 0.0F,       {},         R"({"route":"R12","load":{ "kg" : 850 }})"};
        return m;
    }();
    return kExpected;
}

TEST(ValidFixtures, EveryFileHasExpectedValuesAndViceVersa) {
    std::set<std::string> files;
    for (const auto& p : files_in("valid", ".json")) files.insert(p.filename().string());
    std::set<std::string> expected;
    for (const auto& [name, e] : expected_valid()) expected.insert(name);
    EXPECT_EQ(files, expected);
}

TEST(ValidFixtures, DecodeAndValidateToExactValues) {
    Pipeline pipeline;
    for (const auto& path : files_in("valid", ".json")) {
        const std::string name = path.filename().string();
        SCOPED_TRACE(name);
        const auto it = expected_valid().find(name);
        if (it == expected_valid().end()) continue;  // reported by the test above
        const Expected& e = it->second;
        const auto r = pipeline.run(read_file(path), nullptr);
        ASSERT_TRUE(std::holds_alternative<Position>(r)) << describe(r);
        const auto& p = std::get<Position>(r);
        EXPECT_EQ(p.vehicle_id, e.vehicle_id);
        EXPECT_EQ(p.recorded_at_us, e.recorded_at_us);
        EXPECT_NEAR(p.longitude, e.longitude, e.tolerance);
        EXPECT_NEAR(p.latitude, e.latitude, e.tolerance);
        EXPECT_EQ(p.altitude_m, e.altitude_m);
        EXPECT_EQ(p.speed_kmh, e.speed_kmh);
        EXPECT_EQ(p.heading_deg, e.heading_deg);
        EXPECT_EQ(p.accuracy_m, e.accuracy_m);
        EXPECT_EQ(p.attributes_json, e.attributes_json);
    }
}

// ---- rejected fixtures: exactly the reason in the file name ----

TEST(RejectedFixtures, EachYieldsTheReasonInItsName) {
    Pipeline pipeline;
    const auto files = files_in("rejected", ".json");
    ASSERT_FALSE(files.empty());
    for (const auto& path : files) {
        const std::string code = code_in_name(path);
        SCOPED_TRACE(path.filename().string());
        ASSERT_NE(core::find_reason(code), nullptr) << "not a reason code: " << code;
        const auto r = pipeline.run(read_file(path), nullptr);
        ASSERT_TRUE(std::holds_alternative<Rejection>(r)) << "accepted";
        const auto& rej = std::get<Rejection>(r);
        EXPECT_EQ(core::code(rej.reason), code) << rej.detail;
        EXPECT_FALSE(rej.detail.empty());
        EXPECT_LT(rej.detail.size(), 200U) << rej.detail;
    }
}

// Each line is a message for the same vehicle; every line but the last is accepted (and becomes
// `last` when it is the newest so far); the last is rejected with the reason in the file name.
TEST(SequenceFixtures, LastMessageYieldsTheReasonInItsName) {
    for (const auto& path : files_in("sequences", ".jsonl")) {
        const std::string code = code_in_name(path);
        SCOPED_TRACE(path.filename().string());
        ASSERT_NE(core::find_reason(code), nullptr) << "not a reason code: " << code;
        Pipeline pipeline;
        std::istringstream lines(read_file(path));
        std::vector<std::string> messages;
        for (std::string line; std::getline(lines, line);) {
            if (!line.empty()) messages.push_back(line);
        }
        ASSERT_GE(messages.size(), 2U);
        std::optional<LastPosition> last;
        for (std::size_t i = 0; i < messages.size(); ++i) {
            const auto r = pipeline.run(messages[i], last ? &*last : nullptr);
            if (i + 1 < messages.size()) {
                ASSERT_TRUE(std::holds_alternative<Position>(r))
                    << "line " << i + 1 << ": " << describe(r);
                const auto& p = std::get<Position>(r);
                if (!last || p.recorded_at_us > last->recorded_at_us) {
                    last = LastPosition{p.recorded_at_us, p.longitude, p.latitude};
                }
            } else {
                ASSERT_TRUE(std::holds_alternative<Rejection>(r)) << "last line accepted";
                EXPECT_EQ(core::code(std::get<Rejection>(r).reason), code)
                    << std::get<Rejection>(r).detail;
            }
        }
    }
}

TEST(Fixtures, EveryReasonCodeHasOne) {
    std::set<std::string> covered;
    for (const auto& p : files_in("rejected", ".json")) covered.insert(code_in_name(p));
    for (const auto& p : files_in("sequences", ".jsonl")) covered.insert(code_in_name(p));
    for (const auto& info : core::reasons()) {
        // Reasons only a Protobuf payload can have: tests/fixtures/protobuf/ covers them.
        if (info.reason == core::Reason::malformed_protobuf ||
            info.reason == core::Reason::bad_frame || info.reason == core::Reason::unknown_schema ||
            info.reason == core::Reason::incompatible_schema) {
            continue;
        }
        EXPECT_TRUE(covered.count(std::string(info.code)) == 1)
            << "no fixture for reason " << info.code;
    }
}

// ---- the clock ----

TEST(Validator, UsesTheClockItIsGivenAndNeverReadsOne) {
    Validator v(config::ValidateConfig{});
    const std::int64_t t2020 = 1577836800LL * 1'000'000;  // 2020-01-01T00:00:00Z
    const auto m = message(13.4, 52.5, t2020);
    EXPECT_EQ(code_of(v, m, nullptr, t2020 + 10'000'000), "accepted");
    EXPECT_EQ(code_of(v, m, nullptr, kNow), "stale_timestamp");
    EXPECT_EQ(code_of(v, m, nullptr, t2020 - 301'000'000), "future_timestamp");
    EXPECT_EQ(code_of(v, m, nullptr, t2020 - 300'000'000), "accepted");  // exactly at the skew
    const std::int64_t max_age_us = config::ValidateConfig{}.max_age_s * 1'000'000;
    EXPECT_EQ(code_of(v, m, nullptr, t2020 + max_age_us), "accepted");  // exactly at max age
    EXPECT_EQ(code_of(v, m, nullptr, t2020 + max_age_us + 1), "stale_timestamp");
}

TEST(Validator, TimestampDetailsNameTheTimeAndTheSetting) {
    Validator v(config::ValidateConfig{});
    auto r = v.validate(message(13.4, 52.5, kNow + 600'000'000), nullptr, kNow);
    EXPECT_EQ(std::get<Rejection>(r).detail,
              "timestamp: 2024-05-01T12:10:00Z is 600 s ahead of the clock "
              "(validate.max_future_skew_s = 300)");
    r = v.validate(message(13.4, 52.5, 1709251200LL * 1'000'000), nullptr, kNow);
    EXPECT_EQ(std::get<Rejection>(r).detail,
              "timestamp: 2024-03-01T00:00:00Z is older than validate.max_age_s (2592000 s)");
}

// ---- each check, and their order ----

TEST(Validator, VehicleIdLengthLimit) {
    config::ValidateConfig cfg;
    cfg.max_vehicle_id_len = 8;
    Validator v(cfg);
    auto m = message(13.4, 52.5);
    m.vehicle_id = "12345678";
    EXPECT_EQ(code_of(v, m), "accepted");
    m.vehicle_id = "123456789";
    const auto r = v.validate(m, nullptr, kNow);
    EXPECT_EQ(std::get<Rejection>(r).detail,
              "vehicle_id: 9 bytes, longer than validate.max_vehicle_id_len (8)");
    m.vehicle_id = "";
    EXPECT_EQ(code_of(v, m), "bad_vehicle_id");
}

TEST(Validator, ChecksRunInTheDocumentedOrder) {
    Validator v(config::ValidateConfig{});
    auto m = message(200, 95, kNow - 40LL * 86400 * 1'000'000);
    m.vehicle_id = std::string(100, 'v');
    m.speed_kmh = -1;
    m.heading_deg = 400;
    m.accuracy_m = -1;
    m.geom_hex = "zz";
    m.srid = 999999;
    const std::vector<std::pair<std::string, std::function<void()>>> steps = {
        {"bad_vehicle_id", [&] { m.vehicle_id = "v"; }},
        {"stale_timestamp", [&] { m.recorded_at_us = kT; }},
        {"bad_wkb", [&] { m.geom_hex = "010200000000000000"; }},  // empty LineString
        {"not_a_point", [&] { m.geom_hex.clear(); }},
        {"unknown_srid",
         [&] {
             m.srid = 32633;
             m.longitude = 1e12;
             m.latitude = 1e12;
         }},
        {"transform_failed",
         [&] {
             m.srid = 4326;
             m.longitude = 200;
             m.latitude = 95;
         }},
        {"lat_out_of_range", [&] { m.latitude = 0; }},
        {"lon_out_of_range", [&] { m.longitude = 0; }},
        {"null_island", [&] { m.longitude = 1; }},
        {"negative_accuracy", [&] { m.accuracy_m = 0; }},
        {"bad_heading", [&] { m.heading_deg = 0; }},
        {"bad_speed", [&] { m.speed_kmh = 0; }},
    };
    for (const auto& [code, fix] : steps) {
        EXPECT_EQ(code_of(v, m), code);
        fix();
    }
    EXPECT_EQ(code_of(v, m), "accepted");
    // future_timestamp comes before the position checks too.
    m.recorded_at_us = kNow + 3600LL * 1'000'000;
    m.latitude = 95;
    EXPECT_EQ(code_of(v, m), "future_timestamp");
}

TEST(Validator, NotFinite) {
    Validator v(config::ValidateConfig{});
    const double inf = std::numeric_limits<double>::infinity();
    EXPECT_EQ(code_of(v, message(std::nan(""), 52.5)), "not_finite");
    EXPECT_EQ(code_of(v, message(13.4, inf)), "not_finite");
    auto m = message(13.4, 52.5);
    m.altitude_m = inf;
    EXPECT_EQ(code_of(v, m), "not_finite");
    m = message(13.4, 52.5);
    m.speed_kmh = 1e300;  // would be +inf as a float (real column)
    EXPECT_EQ(code_of(v, m), "not_finite");
    m = message(13.4, 52.5);
    m.accuracy_m = std::nan("");
    EXPECT_EQ(code_of(v, m), "not_finite");
}

TEST(Validator, RangeEdges) {
    Validator v(config::ValidateConfig{});
    EXPECT_EQ(code_of(v, message(180, 90)), "accepted");
    EXPECT_EQ(code_of(v, message(-180, -90)), "accepted");
    EXPECT_EQ(code_of(v, message(180.0000001, 0)), "lon_out_of_range");
    EXPECT_EQ(code_of(v, message(0, -90.0000001)), "lat_out_of_range");
    EXPECT_EQ(code_of(v, message(0, 0)), "null_island");
    EXPECT_EQ(code_of(v, message(-0.0, 0)), "null_island");
    EXPECT_EQ(code_of(v, message(0, 1e-9)), "accepted");
    auto m = message(13.4, 52.5);
    m.heading_deg = 0;
    EXPECT_EQ(code_of(v, m), "accepted");
    m.heading_deg = 359.999;
    EXPECT_EQ(code_of(v, m), "accepted");
    m.heading_deg = 360;
    EXPECT_EQ(code_of(v, m), "bad_heading");
    m.heading_deg = -0.001;
    EXPECT_EQ(code_of(v, m), "bad_heading");
    m = message(13.4, 52.5);
    m.speed_kmh = 0;
    m.accuracy_m = 0;
    EXPECT_EQ(code_of(v, m), "accepted");
}

TEST(Validator, HeadingJustBelow360StaysBelow360AsAFloat) {
    Validator v(config::ValidateConfig{});
    auto m = message(13.4, 52.5);
    m.heading_deg = 359.99999999;
    const auto r = v.validate(m, nullptr, kNow);
    ASSERT_TRUE(std::holds_alternative<Position>(r));
    EXPECT_LT(*std::get<Position>(r).heading_deg, 360.0F);
}

TEST(Validator, NullIslandCanBeAllowed) {
    config::ValidateConfig cfg;
    cfg.reject_null_island = false;
    Validator v(cfg);
    EXPECT_EQ(code_of(v, message(0, 0)), "accepted");
}

TEST(Validator, CopiesOrMovesStrings) {
    Validator v(config::ValidateConfig{});
    auto m = message(13.4, 52.5);
    m.attributes_json = R"({"driver":"anna-with-a-long-name-beyond-sso"})";
    const auto copied = v.validate(m, nullptr, kNow);
    EXPECT_EQ(std::get<Position>(copied).attributes_json, m.attributes_json);
    EXPECT_EQ(std::get<Position>(copied).vehicle_id, "truck-0042");
    const std::string attributes = m.attributes_json;
    const auto moved = v.validate(std::move(m), nullptr, kNow);
    EXPECT_EQ(std::get<Position>(moved).attributes_json, attributes);
    EXPECT_EQ(std::get<Position>(moved).vehicle_id, "truck-0042");
}

// ---- CRS and WKB ----

TEST(Validator, ProjectedCoordinatesAreTransformed) {
    Validator v(config::ValidateConfig{});
    auto m = message(1492232.6533872557, 6894701.264846518);  // EPSG:3857 x, y
    m.srid = 3857;
    for (int i = 0; i < 3; ++i) {  // the cached transform gives the same answer
        const auto r = v.validate(m, nullptr, kNow);
        ASSERT_TRUE(std::holds_alternative<Position>(r)) << describe(r);
        EXPECT_NEAR(std::get<Position>(r).longitude, 13.404954, 1e-9);
        EXPECT_NEAR(std::get<Position>(r).latitude, 52.520008, 1e-9);
    }
}

TEST(Validator, UnknownSrids) {
    Validator v(config::ValidateConfig{});
    for (int srid : {999999, 0, -1, 4978 /* geocentric */, 5703 /* vertical */}) {
        auto m = message(13.4, 52.5);
        m.srid = srid;
        EXPECT_EQ(code_of(v, m), "unknown_srid") << srid;
        EXPECT_EQ(code_of(v, m), "unknown_srid") << srid << " (cached)";
    }
    auto m = message(13.4, 52.5);
    m.srid = 999999;
    EXPECT_EQ(std::get<Rejection>(v.validate(m, nullptr, kNow)).detail,
              "srid: EPSG:999999 is not a CRS PROJ knows");
}

TEST(Validator, TransformFailure) {
    Validator v(config::ValidateConfig{});
    auto m = message(1e12, 1e12);
    m.srid = 32633;
    const auto r = v.validate(m, nullptr, kNow);
    ASSERT_TRUE(std::holds_alternative<Rejection>(r));
    EXPECT_EQ(std::get<Rejection>(r).reason, core::Reason::transform_failed);
    EXPECT_EQ(std::get<Rejection>(r).detail,
              "srid 32633: (1000000000000, 1000000000000) has no WGS 84 position: "
              "Point outside of projection domain");
}

TEST(Validator, WkbPoints) {
    Validator v(config::ValidateConfig{});
    auto m = message(0, 0);
    m.latitude.reset();
    m.longitude.reset();
    // EWKB PointZ SRID=4326 (13.404954 52.520008 34.5), lower-case hex
    m.geom_hex = "01010000a0e6100000cec4742156cf2a4045d4449f8f424a400000000000404140";
    m.altitude_m = 99;  // the Z of the geometry wins
    auto r = v.validate(m, nullptr, kNow);
    ASSERT_TRUE(std::holds_alternative<Position>(r)) << describe(r);
    EXPECT_EQ(std::get<Position>(r).longitude, 13.404954);
    EXPECT_EQ(std::get<Position>(r).latitude, 52.520008);
    EXPECT_EQ(std::get<Position>(r).altitude_m, 34.5);
    // geom_hex wins over latitude/longitude when both are given
    m.longitude = 1;
    m.latitude = 1;
    r = v.validate(m, nullptr, kNow);
    EXPECT_EQ(std::get<Position>(r).longitude, 13.404954);

    m.geom_hex = "0101";
    EXPECT_EQ(code_of(v, m), "bad_wkb");
    m.geom_hex = "010";
    EXPECT_EQ(std::get<Rejection>(v.validate(m, nullptr, kNow)).detail,
              "geom_hex: odd number of hex digits: \"010\"");
    m.geom_hex = "0107000000";
    EXPECT_EQ(code_of(v, m), "bad_wkb");  // truncated collection
    m.geom_hex = "010700000000000000";    // GEOMETRYCOLLECTION EMPTY
    EXPECT_EQ(code_of(v, m), "not_a_point");
}

// ---- against the latest position ----

TEST(Validator, Duplicate) {
    Validator v(config::ValidateConfig{});
    const LastPosition last{kT, 13.404954, 52.520008};
    EXPECT_EQ(code_of(v, message(13.404954, 52.520008, kT), &last), "duplicate");
    EXPECT_EQ(code_of(v, message(13.404954, 52.520008, kT + 1), &last), "accepted");
    EXPECT_EQ(code_of(v, message(13.404955, 52.520008, kT), &last), "accepted");  // 7 cm
}

TEST(Validator, SpeedJump) {
    Validator v(config::ValidateConfig{});  // 350 km/h
    const LastPosition last{kT, 13.404954, 52.520008};
    // 0.001 degrees of latitude is about 111 m: 400 km/h in one second.
    EXPECT_EQ(code_of(v, message(13.404954, 52.521008, kT + 1'000'000), &last), "speed_jump");
    // The same distance over two seconds is 200 km/h.
    EXPECT_EQ(code_of(v, message(13.404954, 52.521008, kT + 2'000'000), &last), "accepted");
    // Older than last: |dt| counts the same way.
    EXPECT_EQ(code_of(v, message(13.404954, 52.521008, kT - 1'000'000), &last), "speed_jump");
    EXPECT_EQ(code_of(v, message(13.404954, 52.521008, kT - 2'000'000), &last), "accepted");
    // dt below one second counts as one second: 55 m in 0.1 s is fine.
    EXPECT_EQ(code_of(v, message(13.404954, 52.520508, kT + 100'000), &last), "accepted");
    // Same time, different place: also measured over one second.
    EXPECT_EQ(code_of(v, message(13.404954, 52.521008, kT), &last), "speed_jump");
    // Across the antimeridian: 0.001 degrees of longitude at the equator is 111 m.
    const LastPosition east{kT, 179.9995, 0.001};
    EXPECT_EQ(code_of(v, message(-179.9995, 0.001, kT + 2'000'000), &east), "accepted");
    EXPECT_EQ(code_of(v, message(-179.9995, 0.001, kT + 1'000'000), &east), "speed_jump");
    const auto r = v.validate(message(13.404954, 52.521008, kT + 1'000'000), &last, kNow);
    EXPECT_EQ(std::get<Rejection>(r).detail,
              "implied speed 401 km/h (111 m in 1.000 s from the latest position) exceeds "
              "validate.max_speed_kmh (350)");
}

// The cheap distance bound must never change a decision the geodesic would make.
TEST(Validator, SpeedJumpAgreesWithTheGeodesicEverywhere) {
    config::ValidateConfig cfg;
    Validator v(cfg);
    std::mt19937_64 rng(12345);
    std::uniform_real_distribution<double> lat_d(-89.9, 89.9);
    std::uniform_real_distribution<double> lon_d(-180, 180);
    std::uniform_real_distribution<double> step(-0.02, 0.02);
    std::uniform_int_distribution<std::int64_t> dt_d(0, 20'000'000);
    int jumps = 0;
    int accepted = 0;
    for (int i = 0; i < 20000; ++i) {
        const double lat1 = lat_d(rng);
        const double lon1 = lon_d(rng);
        const double lat2 = std::clamp(lat1 + step(rng), -90.0, 90.0);
        double lon2 = lon1 + step(rng);
        if (lon2 > 180) lon2 -= 360;
        if (lon2 < -180) lon2 += 360;
        const std::int64_t dt = dt_d(rng);
        const LastPosition last{kT - dt, lon1, lat1};
        const double dt_s = std::max(static_cast<double>(dt) / 1e6, 1.0);
        const double kmh = geodesic_distance_m(lon1, lat1, lon2, lat2) / dt_s * 3.6;
        if (std::fabs(kmh - cfg.max_speed_kmh) < 1e-6) continue;  // too close to call
        const std::string expected = kmh > cfg.max_speed_kmh ? "speed_jump" : "accepted";
        auto m = message(lon2, lat2, kT);
        m.vehicle_id = "v";
        ASSERT_EQ(code_of(v, m, &last), expected)
            << lon1 << "," << lat1 << " -> " << lon2 << "," << lat2 << " dt=" << dt;
        (expected == "speed_jump" ? jumps : accepted) += 1;
    }
    EXPECT_GT(jumps, 1000);
    EXPECT_GT(accepted, 1000);
}

TEST(Geodesic, KnownDistances) {
    // Along the equator the geodesic is the equator: a * dlon.
    EXPECT_NEAR(geodesic_distance_m(0, 0, 1, 0), 111319.49079327357, 1e-6);
    // Equator to pole: the WGS 84 quarter meridian.
    EXPECT_NEAR(geodesic_distance_m(0, 0, 0, 90), 10001965.729311, 1e-3);
    EXPECT_EQ(geodesic_distance_m(13.4, 52.5, 13.4, 52.5), 0.0);
    EXPECT_NEAR(geodesic_distance_m(179.9995, 0, -179.9995, 0), 111.31949079327357, 1e-6);
}

}  // namespace
}  // namespace trackd::validate
