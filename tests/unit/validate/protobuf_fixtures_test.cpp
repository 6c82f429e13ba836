// The Protobuf fixture corpus (tests/fixtures/protobuf/) through decode + validate, as the
// pipeline runs it: valid fixtures give exact positions, each rejected fixture exactly the
// reason in its name, and every reason a Protobuf payload can have has a fixture.
#include "support/protobuf_fixtures.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "trackd/config/config.hpp"
#include "trackd/core/rejection.hpp"
#include "trackd/decode/payload_decoder.hpp"
#include "trackd/validate/validator.hpp"

namespace trackd::validate {
namespace {

namespace fs = std::filesystem;
using core::Position;
using core::Rejection;

constexpr std::int64_t kNow = 1714564800LL * 1'000'000;  // 2024-05-01T12:00:00Z
constexpr std::int64_t kT = 1714564770LL * 1'000'000;    // 2024-05-01T11:59:30Z

const fs::path kFixtures = fs::path(TRACKD_SOURCE_DIR) / "tests/fixtures/protobuf";

std::vector<fs::path> files_in(const std::string& dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(kFixtures / dir)) {
        const auto ext = e.path().extension();
        if (e.is_regular_file() && (ext == ".txtpb" || ext == ".hex")) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string code_in_name(const fs::path& p) {
    const std::string name = p.filename().string();
    return name.substr(0, name.find('.'));
}

// decode (format protobuf, schemas checked when the fixture names registry answers) + validate.
class Pipeline {
  public:
    explicit Pipeline(const test::ProtobufFixture& f)
        : decoder_(decode::Format::protobuf, 64 * 1024, !f.schemas.empty() || !f.answers.empty()),
          validator_(config::ValidateConfig{}) {
        for (const auto& [id, text] : f.schemas) {
            if (text.empty()) {
                decoder_.protobuf().add_unknown_schema(
                    id, "the registry answered 404 (error_code 40403) for schema id " +
                            std::to_string(id));
            } else {
                decoder_.protobuf().add_schema(id, test::registry_answer(text));
            }
        }
        for (const auto& [id, answer] : f.answers) decoder_.protobuf().add_schema(id, answer);
    }

    std::variant<Position, Rejection> run(const std::string& payload, const LastPosition* last) {
        auto d = decoder_.decode(payload);
        if (auto* r = std::get_if<Rejection>(&d)) return std::move(*r);
        if (std::holds_alternative<decode::SchemaNeeded>(d)) {
            ADD_FAILURE() << "schema needed: the fixture names no registry answer for it";
            return Rejection{core::Reason::unknown_schema, "?"};
        }
        return validator_.validate(std::get<decode::DecodedMessage>(std::move(d)), last, kNow);
    }

  private:
    decode::PayloadDecoder decoder_;
    Validator validator_;
};

std::string payload_of(const test::ProtobufFixture& f, const std::string& message) {
    if (!f.frame_id) return message;
    return test::confluent_header(*f.frame_id, f.long_form, f.index) + message;
}

std::string describe(const std::variant<Position, Rejection>& r) {
    if (const auto* rej = std::get_if<Rejection>(&r)) {
        return std::string(core::code(rej->reason)) + ": " + rej->detail;
    }
    return "accepted";
}

TEST(ProtobufFixtures, ValidOnesGiveExactPositions) {
    struct Expected {
        double lon, lat;
        std::optional<double> altitude;
        std::int64_t t = kT;
        std::string attributes;
    };
    const std::map<std::string, Expected> expected = {
        {"lat_lon.txtpb", {13.404954, 52.520008, 34.5, kT + 123456, R"({"driver":"anna"})"}},
        {"framed_short_index.txtpb", {13.404954, 52.520008, {}, kT, ""}},
        {"framed_long_index.txtpb", {13.404954, 52.520008, {}, kT, ""}},
        {"geom_wkb_ewkb_pointz.txtpb", {13.404954, 52.520008, 34.5, kT, ""}},
        {"geom_wkb_iso.txtpb", {13.404954, 52.520008, {}, kT, ""}},
        {"projected_3857.txtpb", {13.404954, 52.520008, {}, kT, ""}},
        {"attributes_escaped.txtpb",
         {13.404954, 52.520008, {}, kT, R"({"say \"hi\"":"back\\slash\u0009tab"})"}},
        {"unknown_fields.txtpb", {13.404954, 52.520008, {}, kT, ""}},
        {"repeated_field_last_wins.txtpb", {13.404954, 52.0, {}, kT, ""}},
    };
    const auto files = files_in("valid");
    ASSERT_EQ(files.size(), expected.size());
    for (const auto& path : files) {
        const auto name = path.filename().string();
        SCOPED_TRACE(name);
        ASSERT_EQ(expected.count(name), 1U) << "no expectation for " << name;
        const auto& e = expected.at(name);
        const auto f = test::load_protobuf_fixture(path);
        Pipeline pipeline(f);
        const auto r = pipeline.run(payload_of(f, f.messages.at(0)), nullptr);
        ASSERT_TRUE(std::holds_alternative<Position>(r)) << describe(r);
        const auto& p = std::get<Position>(r);
        EXPECT_EQ(p.vehicle_id, "truck-0042");
        EXPECT_EQ(p.recorded_at_us, e.t);
        EXPECT_NEAR(p.longitude, e.lon, 1e-7);
        EXPECT_NEAR(p.latitude, e.lat, 1e-7);
        EXPECT_EQ(p.altitude_m, e.altitude);
        EXPECT_EQ(p.attributes_json, e.attributes);
    }
}

TEST(ProtobufFixtures, LatLonFixtureKeepsEveryNumber) {
    const auto f = test::load_protobuf_fixture(kFixtures / "valid/lat_lon.txtpb");
    Pipeline pipeline(f);
    const auto r = pipeline.run(f.messages.at(0), nullptr);
    ASSERT_TRUE(std::holds_alternative<Position>(r)) << describe(r);
    const auto& p = std::get<Position>(r);
    EXPECT_EQ(p.speed_kmh, 42.5F);
    EXPECT_EQ(p.heading_deg, 270.0F);
    EXPECT_EQ(p.accuracy_m, 3.5F);
}

TEST(ProtobufFixtures, RejectedOnesGiveTheReasonInTheirName) {
    const auto files = files_in("rejected");
    ASSERT_FALSE(files.empty());
    for (const auto& path : files) {
        const auto code = code_in_name(path);
        SCOPED_TRACE(path.filename().string());
        ASSERT_NE(core::find_reason(code), nullptr) << "not a reason code: " << code;
        const auto f = test::load_protobuf_fixture(path);
        Pipeline pipeline(f);
        const auto r = pipeline.run(payload_of(f, f.messages.at(0)), nullptr);
        ASSERT_TRUE(std::holds_alternative<Rejection>(r)) << "accepted";
        const auto& rej = std::get<Rejection>(r);
        EXPECT_EQ(core::code(rej.reason), code) << rej.detail;
        EXPECT_FALSE(rej.detail.empty());
        EXPECT_LT(rej.detail.size(), 240U) << rej.detail;
    }
}

TEST(ProtobufFixtures, SequencesRejectTheirLastMessage) {
    for (const auto& path : files_in("sequences")) {
        const auto code = code_in_name(path);
        SCOPED_TRACE(path.filename().string());
        const auto f = test::load_protobuf_fixture(path);
        ASSERT_GE(f.messages.size(), 2U);
        Pipeline pipeline(f);
        std::optional<LastPosition> last;
        for (std::size_t i = 0; i < f.messages.size(); ++i) {
            const auto r = pipeline.run(payload_of(f, f.messages[i]), last ? &*last : nullptr);
            if (i + 1 < f.messages.size()) {
                ASSERT_TRUE(std::holds_alternative<Position>(r)) << describe(r);
                const auto& p = std::get<Position>(r);
                last = LastPosition{p.recorded_at_us, p.longitude, p.latitude};
            } else {
                ASSERT_TRUE(std::holds_alternative<Rejection>(r)) << "last message accepted";
                EXPECT_EQ(core::code(std::get<Rejection>(r).reason), code);
            }
        }
    }
}

TEST(ProtobufFixtures, EveryReasonAProtobufPayloadCanHaveHasOne) {
    std::set<std::string> covered;
    for (const auto& p : files_in("rejected")) covered.insert(code_in_name(p));
    for (const auto& p : files_in("sequences")) covered.insert(code_in_name(p));
    for (const auto& info : core::reasons()) {
        if (info.reason == core::Reason::malformed_json) continue;  // JSON only
        EXPECT_EQ(covered.count(std::string(info.code)), 1U) << "no fixture for " << info.code;
    }
}

}  // namespace
}  // namespace trackd::validate
