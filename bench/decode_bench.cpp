// bench/decode: decode + validate alone, on one core, as trackd's poll thread runs them.
//
// Inputs:
//   fleet_mix        the simulated fleet's stream (docs/fleet.md) with its default shares: 1% bad
//                    (every bad kind in rotation), 0.5% out of order, 0.5% duplicates, ~5% epoch
//                    timestamps, ~2% geom_hex; 20,000 vehicles. This is the realistic mix.
//   fleet_valid      the same stream with no bad, late or duplicate messages.
//   fixtures_valid / fixtures_rejected   tests/fixtures/messages/{valid,rejected}/*.json, equal
//                    weight each (PROJ transforms, WKB, every rejection path: not realistic).
//   fleet_mix_protobuf, fleet_mix_protobuf_framed   the fleet_mix stream (same seed, same kinds)
//                    as trackd.v1.Position, plain and behind the Confluent header.
// Per message, like pipeline/ingest.cpp: PayloadDecoder::decode, the lookup of the vehicle's latest
// accepted position, Validator::validate (moving the strings), the update of that position.
// items_per_second is messages/s on one core. BM_DecodeValidateNoLatest (fleet mix only) leaves
// out the latest-position map, BM_Decode validation too: the differences are their shares.
// BM_DecodeValidateStdMap keeps the map in std::unordered_map, as trackd did before
// core::StringTable.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include <benchmark/benchmark.h>

#include "trackd/config/config.hpp"
#include "trackd/core/string_table.hpp"
#include "trackd/core/time.hpp"
#include "trackd/decode/payload_decoder.hpp"
#include "trackd/validate/validator.hpp"

#include "fleet_generator.hpp"

namespace {

constexpr std::uint32_t kVehicles = 20000;
constexpr std::size_t kFleetMessages = 200000;  // 10 rounds of 20,000 vehicles

struct Corpus {
    std::vector<std::string> payloads;
    std::int64_t now_us = 0;  // the clock validate() is given: the end of the fleet's timeline
    std::size_t bytes = 0;
    bool protobuf = false;  // decoded with kafka.format = protobuf, else json
};

trackd::decode::PayloadDecoder decoder_for(const Corpus& c,
                                           const trackd::config::ValidateConfig& cfg) {
    return {c.protobuf ? trackd::decode::Format::protobuf : trackd::decode::Format::json,
            static_cast<std::size_t>(cfg.max_payload_bytes), false};
}

Corpus fleet_corpus(bool with_bad, bool protobuf = false, bool framed = false) {
    using namespace trackd::fleet;
    const std::int64_t now = trackd::core::now_us() / 1000;
    const std::int64_t rounds = (kFleetMessages + kVehicles - 1) / kVehicles;
    GeneratorConfig gc;
    gc.vehicles = kVehicles;
    gc.interval_ms = 1000;
    gc.start_ms = now - rounds * gc.interval_ms;
    gc.future_timestamp_ms = now + 24 * 3600 * 1000LL;
    gc.stale_timestamp_ms = now - 60 * 24 * 3600 * 1000LL;
    gc.city = City{LonLat{13.405, 52.52}, 15000};
    if (!with_bad) {
        gc.bad_share = 0;
        gc.out_of_order_share = 0;
        gc.duplicate_share = 0;
    }
    gc.seed = 1;
    gc.protobuf = protobuf;
    if (framed) gc.schema_id = 1;
    FleetGenerator generator(gc);
    Corpus c;
    c.protobuf = protobuf;
    c.now_us = now * 1000;
    c.payloads.reserve(kFleetMessages);
    Message m;
    for (std::size_t i = 0; i < kFleetMessages; ++i) {
        generator.next(m);
        c.bytes += m.payload.size();
        c.payloads.push_back(m.payload);
    }
    return c;
}

Corpus fixture_corpus(const std::string& folder) {
    Corpus c;
    // The clock the unit tests use: the fixtures are dated around it.
    c.now_us = 1714564800LL * 1000000;
    std::vector<std::filesystem::path> files;
    for (const auto& e :
         std::filesystem::directory_iterator(std::string(TRACKD_FIXTURES_DIR) + "/" + folder)) {
        if (e.path().extension() == ".json") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        std::ostringstream s;
        s << in.rdbuf();
        auto text = s.str();
        // Fixture files end with a newline that a Kafka payload would not have.
        while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
        c.bytes += text.size();
        c.payloads.push_back(std::move(text));
    }
    return c;
}

const Corpus& corpus(int which) {
    static const Corpus mix = fleet_corpus(true);
    static const Corpus valid = fleet_corpus(false);
    static const Corpus fixtures_valid = fixture_corpus("valid");
    static const Corpus fixtures_rejected = fixture_corpus("rejected");
    static const Corpus mix_protobuf = fleet_corpus(true, true);
    static const Corpus mix_protobuf_framed = fleet_corpus(true, true, true);
    switch (which) {
        case 4:
            return mix_protobuf;
        case 5:
            return mix_protobuf_framed;
        case 0:
            return mix;
        case 1:
            return valid;
        case 2:
            return fixtures_valid;
        default:
            return fixtures_rejected;
    }
}

void report(benchmark::State& state, const Corpus& c, std::int64_t accepted) {
    const auto n = state.iterations();
    state.SetItemsProcessed(n);
    state.SetBytesProcessed(static_cast<std::int64_t>(static_cast<double>(c.bytes) /
                                                      static_cast<double>(c.payloads.size()) *
                                                      static_cast<double>(n)));
    state.counters["accepted_share"] =
        n == 0 ? 0.0 : static_cast<double>(accepted) / static_cast<double>(n);
    state.counters["corpus"] = static_cast<double>(c.payloads.size());
}

// The latest-position map as trackd had it before core::StringTable: std::unordered_map, for
// the side-by-side figure (BM_DecodeValidateStdMap).
class StdLatest {
  public:
    void reserve(std::size_t n) { map_.reserve(n); }
    trackd::validate::LastPosition* find(const std::string& key) {
        const auto it = map_.find(key);
        return it == map_.end() ? nullptr : &it->second;
    }
    void insert_or_assign(const std::string& key, const trackd::validate::LastPosition& p) {
        map_.insert_or_assign(key, p);
    }

  private:
    std::unordered_map<std::string, trackd::validate::LastPosition> map_;
};

// What the poll thread does per message (pipeline/ingest.cpp, process()).
template <class Latest>
void decode_validate(benchmark::State& state) {
    const Corpus& c = corpus(static_cast<int>(state.range(0)));
    const trackd::config::ValidateConfig cfg;
    auto decoder = decoder_for(c, cfg);
    trackd::validate::Validator validator(cfg);
    Latest latest;
    latest.reserve(kVehicles * 2);
    std::size_t i = 0;
    std::int64_t accepted = 0;
    for (auto _ : state) {
        if (i == c.payloads.size()) {
            // Replaying the corpus would turn every message into an older re-send; start over.
            state.PauseTiming();
            latest = Latest{};
            latest.reserve(kVehicles * 2);
            i = 0;
            state.ResumeTiming();
        }
        auto decoded = decoder.decode(c.payloads[i++]);
        auto* msg = std::get_if<trackd::decode::DecodedMessage>(&decoded);
        if (msg == nullptr) continue;
        trackd::validate::LastPosition* last = latest.find(msg->vehicle_id);
        auto validated = validator.validate(std::move(*msg), last, c.now_us);
        auto* pos = std::get_if<trackd::core::Position>(&validated);
        if (pos == nullptr) continue;
        ++accepted;
        const trackd::validate::LastPosition here{pos->recorded_at_us, pos->longitude,
                                                  pos->latitude};
        if (last == nullptr) {
            latest.insert_or_assign(pos->vehicle_id, here);
        } else if (here.recorded_at_us > last->recorded_at_us) {
            *last = here;
        }
        benchmark::DoNotOptimize(validated);
    }
    report(state, c, accepted);
}

void BM_DecodeValidate(benchmark::State& state) {
    decode_validate<trackd::core::StringTable<trackd::validate::LastPosition>>(state);
}
void BM_DecodeValidateStdMap(benchmark::State& state) { decode_validate<StdLatest>(state); }

// Decode + validate without the latest-position map (every message validated as its vehicle's
// first): the map's share is the difference with BM_DecodeValidate.
void BM_DecodeValidateNoLatest(benchmark::State& state) {
    const Corpus& c = corpus(static_cast<int>(state.range(0)));
    const trackd::config::ValidateConfig cfg;
    auto decoder = decoder_for(c, cfg);
    trackd::validate::Validator validator(cfg);
    std::size_t i = 0;
    std::int64_t accepted = 0;
    for (auto _ : state) {
        if (i == c.payloads.size()) i = 0;
        auto decoded = decoder.decode(c.payloads[i++]);
        auto* msg = std::get_if<trackd::decode::DecodedMessage>(&decoded);
        if (msg == nullptr) continue;
        auto validated = validator.validate(std::move(*msg), nullptr, c.now_us);
        accepted += validated.index() == 0 ? 1 : 0;
        benchmark::DoNotOptimize(validated);
    }
    report(state, c, accepted);
}

// Decode alone (validate's share is the difference).
void BM_Decode(benchmark::State& state) {
    const Corpus& c = corpus(static_cast<int>(state.range(0)));
    const trackd::config::ValidateConfig cfg;
    auto decoder = decoder_for(c, cfg);
    std::size_t i = 0;
    std::int64_t accepted = 0;
    for (auto _ : state) {
        if (i == c.payloads.size()) i = 0;
        auto decoded = decoder.decode(c.payloads[i++]);
        accepted += decoded.index() == 0 ? 1 : 0;
        benchmark::DoNotOptimize(decoded);
    }
    report(state, c, accepted);
}

void corpus_args(benchmark::internal::Benchmark* b) {
    b->ArgName("corpus");
    for (int i = 0; i < 6; ++i) b->Arg(i);
}

}  // namespace

BENCHMARK(BM_DecodeValidate)->Apply(corpus_args);
BENCHMARK(BM_DecodeValidateStdMap)->Arg(0)->Arg(4)->ArgName("corpus");
BENCHMARK(BM_DecodeValidateNoLatest)->Arg(0)->Arg(4)->ArgName("corpus");
BENCHMARK(BM_Decode)->Apply(corpus_args);

int main(int argc, char** argv) {
    benchmark::AddCustomContext("corpus/0", "fleet_mix (realistic: 1% bad, 20,000 vehicles)");
    benchmark::AddCustomContext("corpus/1", "fleet_valid (no bad, late or duplicate messages)");
    benchmark::AddCustomContext("corpus/2", "fixtures_valid (tests/fixtures/messages/valid)");
    benchmark::AddCustomContext("corpus/3", "fixtures_rejected (tests/fixtures/messages/rejected)");
    benchmark::AddCustomContext("corpus/4", "fleet_mix as plain Protobuf (trackd.v1.Position)");
    benchmark::AddCustomContext("corpus/5", "fleet_mix as Protobuf in the Confluent framing");
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
