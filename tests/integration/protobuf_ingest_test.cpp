// Protobuf payloads end to end: the real schema registry (Apicurio, scripts/registry.sh), the
// real broker and PostGIS, SIGKILLs, and the exact accounting of the JSON tests
// (support/ingest_harness.hpp), over topics that mix JSON, plain and framed Protobuf, every
// kind of bad message and an incompatible schema.
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include "trackd/decode/protobuf_decoder.hpp"
#include "trackd/registry/schema_registry.hpp"

#include "support/http_client.hpp"
#include "support/http_front.hpp"
#include "support/ingest_harness.hpp"
#include "support/protobuf_fixtures.hpp"
#include "support/test_ca.hpp"

namespace trackd::test {
namespace {

namespace fs = std::filesystem;

constexpr int kPartitions = 4;
constexpr std::int64_t kFixtureTime = 1714564770;  // recorded_at of most fixtures

// The registry's host port and base path, from registry_url().
struct Registry {
    unsigned short port = 0;
    std::string base;
    Registry() {
        const std::string url = registry_url();
        const auto host_end = url.find(':', 7);
        const auto path = url.find('/', host_end);
        port =
            static_cast<unsigned short>(std::stoi(url.substr(host_end + 1, path - host_end - 1)));
        base = url.substr(path);
    }
    // Registers a schema under `subject` and returns its id.
    std::uint32_t add(const std::string& subject, const std::string& type,
                      const std::string& schema) const {
        const auto r = HttpClient(port).request(
            "POST", base + "/subjects/" + subject + "/versions",
            R"({"schemaType":")" + type + R"(","schema":)" + json_string(schema) + "}",
            "application/vnd.schemaregistry.v1+json");
        EXPECT_EQ(r.status, 200) << r.body;
        return static_cast<std::uint32_t>(std::int64_t(r.json()["id"]));
    }
};

// Produces messages one at a time to explicit partitions and says where each went.
class Producer {
  public:
    Producer() {
        char err[512];
        rd_kafka_conf_t* conf = rd_kafka_conf_new();
        rd_kafka_conf_set(conf, "bootstrap.servers", kafka_brokers().c_str(), err, sizeof err);
        rd_kafka_conf_set_dr_msg_cb(conf, [](rd_kafka_t*, const rd_kafka_message_t* m, void* self) {
            static_cast<Producer*>(self)->last_offset_ = m->err ? -1 : m->offset;
        });
        rd_kafka_conf_set_opaque(conf, this);
        producer_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
        EXPECT_NE(producer_, nullptr) << err;
    }
    ~Producer() { rd_kafka_destroy(producer_); }
    Producer(const Producer&) = delete;
    Producer& operator=(const Producer&) = delete;

    std::int64_t send(const std::string& topic, int partition, const std::string& key,
                      const std::string& payload) {
        last_offset_ = -1;
        rd_kafka_topic_t* t = rd_kafka_topic_new(producer_, topic.c_str(), nullptr);
        EXPECT_EQ(
            rd_kafka_produce(t, partition, RD_KAFKA_MSG_F_COPY, const_cast<char*>(payload.data()),
                             payload.size(), key.data(), key.size(), nullptr),
            0);
        rd_kafka_topic_destroy(t);
        EXPECT_EQ(rd_kafka_flush(producer_, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
        EXPECT_GE(last_offset_, 0);
        return last_offset_;
    }

  private:
    rd_kafka_t* producer_ = nullptr;
    std::int64_t last_offset_ = -1;
};

std::vector<fs::path> fixture_files(const std::string& dir) {
    std::vector<fs::path> out;
    for (const auto& e :
         fs::directory_iterator(fs::path(TRACKD_SOURCE_DIR) / "tests/fixtures/protobuf" / dir)) {
        const auto ext = e.path().extension();
        if (ext == ".txtpb" || ext == ".hex") out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string code_in_name(const fs::path& p) {
    const auto name = p.filename().string();
    return name.substr(0, name.find('.'));
}

struct SchemaIds {
    std::uint32_t position = 0;   // proto/trackd/v1/position.proto
    std::uint32_t renamed = 0;    // compatible under other names
    std::uint32_t float_lat = 0;  // incompatible
    std::uint32_t avro = 0;       // not Protobuf
    std::uint32_t unknown = 0;    // never registered
};

// How long a test waits for the real registry's answer: its first requests after start-up (a
// JVM warming up) took over 5 s in a CI run on two loaded cores.
constexpr std::chrono::seconds kRegistryAnswer{30};

SchemaIds register_schemas(const std::string& subject_prefix) {
    const Registry reg;
    const fs::path schemas = fs::path(TRACKD_SOURCE_DIR) / "tests/fixtures/protobuf/schemas";
    SchemaIds ids;
    ids.position =
        reg.add(subject_prefix + "-position", "PROTOBUF",
                read_text_file(fs::path(TRACKD_SOURCE_DIR) / "proto/trackd/v1/position.proto"));
    ids.renamed = reg.add(subject_prefix + "-renamed", "PROTOBUF",
                          read_text_file(schemas / "renamed_compatible.proto"));
    ids.float_lat = reg.add(subject_prefix + "-float", "PROTOBUF",
                            read_text_file(schemas / "float_latitude.proto"));
    ids.avro = reg.add(subject_prefix + "-avro", "AVRO",
                       R"({"type":"record","name":"P","fields":[{"name":"x","type":"int"}]})");
    ids.unknown = std::max({ids.position, ids.renamed, ids.float_lat, ids.avro}) + 1000;
    return ids;
}

// The time trackd stores for an accepted message (the manifest compares it).
std::optional<std::int64_t> recorded_at_us(const std::string& message) {
    trackd::v1::Position m;
    if (!m.ParseFromString(message) || !m.has_recorded_at()) return std::nullopt;
    return m.recorded_at().seconds() * 1'000'000 + m.recorded_at().nanos() / 1000;
}

// Sends every Protobuf fixture (valid, rejected, sequences), each with a vehicle of its own and
// its times moved to today, and returns what trackd must do with each, as manifest entries.
// Text fixtures go framed with the shipped schema's id (or the compatible renamed one) and,
// when `plain`, also plain; fixtures about schemas go framed with the real ids; whole payloads
// (.hex) go as they are (with `plain` false only those that are framed).
std::map<Coord, ManifestEntry> send_fixtures(const std::string& topic, const SchemaIds& ids,
                                             bool plain) {
    Producer producer;
    std::map<Coord, ManifestEntry> out;
    const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    int n = 0;
    const auto send = [&](const ProtobufFixture& f, const std::string& vehicle,
                          const std::string& header, const std::string& kind,
                          const std::string& code) {
        const int partition = n % kPartitions;
        for (std::size_t i = 0; i < f.messages.size(); ++i) {
            const auto offset = producer.send(topic, partition, vehicle, header + f.messages[i]);
            ManifestEntry e;
            e.partition = partition;
            e.offset = offset;
            e.kind = kind;
            e.reason = i + 1 < f.messages.size() ? "" : code;  // a sequence: its last one
            e.vehicle_id = vehicle;
            if (e.reason.empty()) e.recorded_at_us = recorded_at_us(f.messages[i]);
            out[{partition, offset}] = e;
        }
    };
    for (const std::string dir : {"valid", "rejected", "sequences"}) {
        for (const auto& path : fixture_files(dir)) {
            const std::string name = path.filename().string();
            const std::string code = dir == "valid" ? "" : code_in_name(path);
            if (name == "incompatible_schema.not_a_proto_file.txtpb") continue;  // unit-tested
            const std::string vehicle = "fx-" + std::to_string(++n);
            const auto f = load_protobuf_fixture(path, {vehicle, now_s - kFixtureTime});
            if (path.extension() == ".hex") {
                if (plain || f.messages.at(0).front() == '\0') send(f, vehicle, "", name, code);
            } else if (!f.schemas.empty() || !f.answers.empty()) {
                std::uint32_t id = ids.position;
                if (code == "unknown_schema") id = ids.unknown;
                if (name.find("float_latitude") != std::string::npos) id = ids.float_lat;
                if (name.find("avro") != std::string::npos) id = ids.avro;
                send(f, vehicle, confluent_header(id, f.long_form, f.index), name, code);
            } else if (f.frame_id) {
                send(f, vehicle, confluent_header(ids.position, f.long_form, f.index), name, code);
            } else {
                send(f, vehicle, confluent_header(n % 2 == 0 ? ids.renamed : ids.position),
                     name + " framed", code);
                if (plain) {
                    const std::string other = "fx-" + std::to_string(++n);
                    const auto g = load_protobuf_fixture(path, {other, now_s - kFixtureTime});
                    send(g, other, "", name + " plain", code);
                }
            }
        }
    }
    return out;
}

void merge(std::map<Coord, ManifestEntry>& into, const std::map<Coord, ManifestEntry>& from) {
    for (const auto& [c, e] : from) {
        EXPECT_TRUE(into.emplace(c, e).second) << "two messages at " << c.first << "/" << c.second;
    }
}

std::map<std::string, std::string> registry_env(const std::string& format) {
    return {{"TRACKD_KAFKA_FORMAT", format},
            {"TRACKD_KAFKA_SCHEMA_REGISTRY_URL", registry_url()},
            {"TRACKD_KAFKA_INSTANCE_ID", "proto-" + format + "-" + std::to_string(getpid())}};
}

// A framed Protobuf fleet of `messages` under schema `schema_id`, produced while trackd
// (kafka.format = `format`) is SIGKILLed `kills` times; then the exact accounting of `expected`
// (what was sent before) plus the fleet.
void framed_fleet_under_sigkills(IngestHarness& h, std::map<Coord, ManifestEntry>& expected,
                                 int messages, std::uint32_t schema_id, const std::string& format,
                                 int kills, unsigned seed) {
    const auto before_fleet = static_cast<std::int64_t>(expected.size());
    ChildProcess framed(h.fleet_command(400, messages, 3000,
                                        {"--id-prefix", "pbf-", "--format", "protobuf", "--framing",
                                         "confluent", "--schema-id", std::to_string(schema_id)}),
                        {}, h.dir() + "/framed-fleet.log");
    const auto r = h.kill_and_restart_until_drained(framed, before_fleet + messages,
                                                    registry_env(format), kills, seed);
    ASSERT_TRUE(r.drained);
    std::printf("[ measured ] trackd was killed with SIGKILL %d times, %d after committing\n",
                r.kills, r.after_progress);
    merge(expected, load_manifest(h.manifest_path()));
    ASSERT_EQ(static_cast<std::int64_t>(expected.size()), before_fleet + messages);
    h.check_accounting(expected);
}

// The client against the real registry: a registered schema's answer is what decode/ reads
// (compatible), an unknown id is a 404 with Confluent's error code 40403.
TEST(RegistryClient, FetchesFromTheRealRegistry) {
    const auto ids = register_schemas("client-" + std::to_string(getpid()));
    config::KafkaConfig k;
    k.format = "protobuf";
    k.schema_registry_url = registry_url();
    const auto endpoint = registry::endpoint_of(k);
    const auto found = registry::get_schema(endpoint, ids.position, kRegistryAnswer);
    ASSERT_EQ(found.status, 200) << found.body;
    decode::ProtobufDecoder d(64 * 1024, true);
    d.add_schema(ids.position, found.body);
    d.add_schema(ids.float_lat,
                 registry::get_schema(endpoint, ids.float_lat, kRegistryAnswer).body);
    const auto message = load_protobuf_fixture(fs::path(TRACKD_SOURCE_DIR) /
                                               "tests/fixtures/protobuf/valid/lat_lon.txtpb")
                             .messages.at(0);
    EXPECT_TRUE(std::holds_alternative<decode::DecodedMessage>(
        d.decode(confluent_header(ids.position) + message)));
    const auto bad = d.decode(confluent_header(ids.float_lat) + message);
    ASSERT_TRUE(std::holds_alternative<core::Rejection>(bad));
    EXPECT_EQ(std::get<core::Rejection>(bad).detail,
              "schema id " + std::to_string(ids.float_lat) +
                  ": message fleet.v2.Fix: field 3 is float latitude, but trackd reads field 3 "
                  "(double latitude)");
    const auto unknown = registry::get_schema(endpoint, ids.unknown, kRegistryAnswer);
    EXPECT_EQ(unknown.status, 404);
    EXPECT_NE(unknown.body.find("40403"), std::string::npos) << unknown.body;

    // The client's thread hands over both kinds of answer.
    registry::SchemaRegistry client(k);
    client.request(ids.position);
    client.request(ids.unknown);
    std::vector<registry::SchemaAnswer> answers;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (answers.size() < 2 && std::chrono::steady_clock::now() < until) {
        for (auto& a : client.take_answers()) answers.push_back(std::move(a));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(answers.size(), 2U);
    EXPECT_EQ(answers[0].schema_id, ids.position);
    EXPECT_TRUE(answers[0].found);
    EXPECT_EQ(answers[1].schema_id, ids.unknown);
    EXPECT_FALSE(answers[1].found);
    EXPECT_NE(answers[1].body.find("the registry answered 404"), std::string::npos);
    // An answered id may be asked again (the pipeline does, for a 404, after
    // kafka.schema_registry_unknown_retry_s).
    client.request(ids.unknown);
    answers.clear();
    while (answers.empty() && std::chrono::steady_clock::now() < until + kRegistryAnswer) {
        for (auto& a : client.take_answers()) answers.push_back(std::move(a));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(answers.size(), 1U);
    EXPECT_EQ(answers[0].schema_id, ids.unknown);
    EXPECT_FALSE(answers[0].found);
}

// The client over https: a TLS front (rest_proxy.py with a throwaway CA's certificate) before
// the real registry. With kafka.schema_registry_ca_file naming the CA the answers are the
// registry's; with the system's trust store, another CA, an expired certificate or one for
// another name the handshake is refused, and the error says why (not an answer: retried).
TEST(RegistryClient, HttpsChecksTheRegistrysCertificate) {
    const auto ids = register_schemas("tls-" + std::to_string(getpid()));
    const Registry registry;
    const TlsFronts tls("registrytls", "http://127.0.0.1:" + std::to_string(registry.port));
    const auto& good = tls.good;
    const auto kafka_for = [&](const HttpFront& f, const std::string& ca_file) {
        config::KafkaConfig k;
        k.format = "protobuf";
        k.schema_registry_url = f.uri + registry.base;
        k.schema_registry_ca_file = ca_file;
        return k;
    };

    const auto endpoint = registry::endpoint_of(kafka_for(*good, tls.ca.ca_file()));
    EXPECT_EQ(endpoint.scheme, "https");
    const auto found = registry::get_schema(endpoint, ids.position, kRegistryAnswer);
    ASSERT_EQ(found.status, 200) << found.body << good->text();
    config::KafkaConfig plain;
    plain.format = "protobuf";
    plain.schema_registry_url = registry_url();
    EXPECT_EQ(
        found.body,
        registry::get_schema(registry::endpoint_of(plain), ids.position, kRegistryAnswer).body);
    EXPECT_EQ(registry::get_schema(endpoint, ids.unknown, kRegistryAnswer).status, 404);

    const auto refused = [&](const HttpFront& f, const std::string& ca_file,
                             const std::string& reason) {
        const auto e = registry::endpoint_of(kafka_for(f, ca_file));
        try {
            registry::get_schema(e, ids.position, std::chrono::seconds(5));
            ADD_FAILURE() << "no error for " << f.uri;
        } catch (const std::runtime_error& err) {
            EXPECT_EQ(
                std::string(err.what())
                    .find("localhost:" + e.port +
                          ": TLS handshake: the server's certificate is not trusted: " + reason),
                0U)
                << err.what();
        }
    };
    tls.each_refusal("kafka.schema_registry_ca_file", refused);
    EXPECT_EQ(good->count("forwarded GET"), 2U) << good->text();
    EXPECT_EQ(tls.expired->count("forwarded"), 0U);
    EXPECT_EQ(tls.elsewhere->count("forwarded"), 0U);

    // The client's thread over https.
    registry::SchemaRegistry client(kafka_for(*good, tls.ca.ca_file()));
    client.request(ids.position);
    std::vector<registry::SchemaAnswer> answers;
    ASSERT_TRUE(wait_until(std::chrono::seconds(30), [&] {
        for (auto& a : client.take_answers()) answers.push_back(std::move(a));
        return !answers.empty();
    }));
    ASSERT_EQ(answers.size(), 1U);
    EXPECT_TRUE(answers[0].found);
    EXPECT_EQ(answers[0].body, found.body);
}

// kafka.format = auto: JSON from one fleet, framed Protobuf from another while trackd is killed
// again and again, every Protobuf fixture framed, and a few plain ones (which auto reads as
// JSON: malformed_json).
TEST(ProtobufIngest, MixedAutoTopicSurvivesSigkillsWithExactAccounting) {
    IngestHarness h("pbauto", kPartitions, "trackd-pbauto-" + std::to_string(getpid()));
    const auto ids = register_schemas(h.topic());
    const std::string json_manifest = h.dir() + "/json.csv";
    {
        ChildProcess json(h.fleet_command(300, 3000, 0, {"--id-prefix", "json-"}, json_manifest),
                          {}, h.dir() + "/json-fleet.log");
        ASSERT_EQ(json.wait(), 0) << IngestHarness::read_file(h.dir() + "/json-fleet.log");
    }
    auto expected = load_manifest(json_manifest);
    merge(expected, send_fixtures(h.topic(), ids, /*plain=*/false));
    // Plain Protobuf in auto mode: read as JSON.
    {
        Producer p;
        for (const auto& name : {"lat_lon.txtpb", "geom_wkb_iso.txtpb"}) {
            const auto f = load_protobuf_fixture(
                fs::path(TRACKD_SOURCE_DIR) / "tests/fixtures/protobuf/valid" / name,
                {"fx-plain", 0});
            const auto offset = p.send(h.topic(), 0, "fx-plain", f.messages.at(0));
            expected[{0, offset}] = ManifestEntry{
                0, offset, "plain protobuf in auto", "malformed_json", "fx-plain", std::nullopt};
        }
    }
    framed_fleet_under_sigkills(h, expected, 12000, ids.position, "auto", 3, 777);
    // The fixtures' verdicts, by reason: each reason a framed message can have is there.
    db::Connection conn(h.db().dsn(), "test");
    const auto reasons = conn.query(
        "SELECT string_agg(DISTINCT reason_code, ',' ORDER BY reason_code) FROM "
        "trackd.dead_letters WHERE get_byte(raw_payload, 0) = 0");
    EXPECT_EQ(reasons.at(0, 0),
              "bad_frame,bad_heading,bad_speed,bad_timestamp,bad_vehicle_id,bad_wkb,duplicate,"
              "future_timestamp,incompatible_schema,lat_out_of_range,lon_out_of_range,"
              "malformed_protobuf,missing_field,negative_accuracy,not_a_point,not_finite,"
              "null_island,payload_too_large,speed_jump,stale_timestamp,transform_failed,"
              "unknown_schema,unknown_srid,wrong_type");
}

// kafka.format = protobuf: a plain fleet, every fixture plain and framed, a framed fleet under
// SIGKILLs.
TEST(ProtobufIngest, PlainAndFramedTopicSurvivesSigkillsWithExactAccounting) {
    IngestHarness h("pbplain", kPartitions, "trackd-pbplain-" + std::to_string(getpid()));
    const auto ids = register_schemas(h.topic());
    const std::string plain_manifest = h.dir() + "/plain.csv";
    {
        ChildProcess plain(
            h.fleet_command(300, 3000, 0, {"--id-prefix", "pb-", "--format", "protobuf"},
                            plain_manifest),
            {}, h.dir() + "/plain-fleet.log");
        ASSERT_EQ(plain.wait(), 0) << IngestHarness::read_file(h.dir() + "/plain-fleet.log");
    }
    auto expected = load_manifest(plain_manifest);
    merge(expected, send_fixtures(h.topic(), ids, /*plain=*/true));
    framed_fleet_under_sigkills(h, expected, 8000, ids.renamed, "protobuf", 2, 4242);
}

// The registry away: framed messages of one partition wait (nothing of them is committed or
// dead-lettered), JSON in the other partition goes on; with the registry back, everything is
// there exactly once.
TEST(ProtobufIngest, RegistryDownDelaysOnlyThePartitionThatNeedsIt) {
    IngestHarness h("pbdown", 2, "trackd-pbdown-" + std::to_string(getpid()));
    const auto ids = register_schemas(h.topic());
    Producer p;
    std::map<Coord, ManifestEntry> expected;
    const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    for (int i = 0; i < 20; ++i) {
        const std::string vehicle = "fx-json-" + std::to_string(i);
        const auto json = R"({"vehicle_id":")" + vehicle + R"(","timestamp":)" +
                          std::to_string((now_s - 60) * 1000) +
                          R"(,"latitude":52.5,"longitude":13.4})";
        const auto o = p.send(h.topic(), 0, vehicle, json);
        expected[{0, o}] = ManifestEntry{0, o, "json", "", vehicle, (now_s - 60) * 1'000'000};
        const std::string pb_vehicle = "fx-pb-" + std::to_string(i);
        const auto f = load_protobuf_fixture(
            fs::path(TRACKD_SOURCE_DIR) / "tests/fixtures/protobuf/valid/lat_lon.txtpb",
            {pb_vehicle, now_s - kFixtureTime});
        const auto o2 =
            p.send(h.topic(), 1, pb_vehicle, confluent_header(ids.position) + f.messages[0]);
        expected[{1, o2}] =
            ManifestEntry{1, o2, "framed", "", pb_vehicle, recorded_at_us(f.messages[0])};
    }
    // Nothing listens on port 9 of loopback (discard is not run here): refused at once.
    auto env = registry_env("auto");
    env["TRACKD_KAFKA_SCHEMA_REGISTRY_URL"] = "http://127.0.0.1:9/apis/ccompat/v7";
    auto trackd = h.start_trackd(env);
    db::Connection conn(h.db().dsn(), "test");
    const auto offset_of = [&](int partition) {
        auto r = conn.query(
            "SELECT coalesce(max(next_offset), -1) FROM trackd.kafka_offsets WHERE topic = $1 AND "
            "kafka_partition = $2",
            {h.topic(), std::to_string(partition)});
        return std::stoll(r.at(0, 0));
    };
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (offset_of(0) < 20 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(offset_of(0), 20) << IngestHarness::read_file(h.log_path());
    // The JSON partition is in; wait until the registry has been tried and failed.
    while (IngestHarness::read_file(h.log_path()).find("schema registry unavailable, retrying") ==
               std::string::npos &&
           std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(trackd->running()) << IngestHarness::read_file(h.log_path());
    EXPECT_LE(offset_of(1), 0) << "a framed message was committed without its schema";
    EXPECT_EQ(conn.query("SELECT count(*) FROM trackd.dead_letters").at(0, 0), "0");
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(15)));
    EXPECT_EQ(trackd->exit_code(), 0) << IngestHarness::read_file(h.log_path());

    // The registry back: the waiting messages are read again and go in.
    auto again = h.start_trackd(registry_env("auto"));
    ASSERT_TRUE(h.wait_drained(40, std::chrono::seconds(60)))
        << IngestHarness::read_file(h.log_path());
    again->kill(SIGTERM);
    ASSERT_TRUE(again->wait_for(std::chrono::seconds(30))) << "trackd did not stop on SIGTERM";
    h.check_accounting(expected, /*with_rejected=*/false);
}

// A registry node that has not read a new schema yet answers 404 (a front answers the first
// three lookups so). One 404 is asked again 1 s later; two make the id unknown, and its message
// goes to dead letters as unknown_schema; the id is asked again once
// kafka.schema_registry_unknown_retry_s has passed, and its next message is stored.
TEST(ProtobufIngest, AnIdTheRegistryDidNotKnowIsAskedAgain) {
    IngestHarness h("pblag", 1, "trackd-pblag-" + std::to_string(getpid()));
    const auto ids = register_schemas(h.topic());
    const Registry registry;
    const HttpFront front("registrylag", "http://127.0.0.1:" + std::to_string(registry.port),
                          {"--schema-not-found", "3"});
    auto env = registry_env("protobuf");
    env["TRACKD_KAFKA_SCHEMA_REGISTRY_URL"] = front.uri + registry.base;
    env["TRACKD_KAFKA_SCHEMA_REGISTRY_UNKNOWN_RETRY_S"] = "2";
    const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
    const auto framed = [&](const std::string& vehicle) {
        const auto f = load_protobuf_fixture(
            fs::path(TRACKD_SOURCE_DIR) / "tests/fixtures/protobuf/valid/lat_lon.txtpb",
            {vehicle, now_s - kFixtureTime});
        return confluent_header(ids.position) + f.messages[0];
    };
    Producer p;
    p.send(h.topic(), 0, "lag-1", framed("lag-1"));
    auto trackd = h.start_trackd(env);
    ASSERT_TRUE(h.wait_drained(1, std::chrono::seconds(60)))
        << IngestHarness::read_file(h.log_path());
    db::Connection conn(h.db().dsn(), "test");
    EXPECT_EQ(
        conn.query("SELECT reason_code || ' ' || kafka_offset FROM trackd.dead_letters").at(0, 0),
        "unknown_schema 0");
    EXPECT_EQ(front.count("schema not found 404"), 2U) << front.text();
    // Past the retry interval: the next message of the id asks again (404, then 200 a second
    // later) and is stored.
    std::this_thread::sleep_for(std::chrono::seconds(3));
    p.send(h.topic(), 0, "lag-2", framed("lag-2"));
    ASSERT_TRUE(h.wait_drained(2, std::chrono::seconds(60)))
        << IngestHarness::read_file(h.log_path());
    trackd->kill(SIGTERM);
    ASSERT_TRUE(trackd->wait_for(std::chrono::seconds(30)));
    EXPECT_EQ(trackd->exit_code(), 0) << IngestHarness::read_file(h.log_path());
    EXPECT_EQ(conn.query("SELECT count(*) FROM trackd.dead_letters").at(0, 0), "1");
    EXPECT_EQ(conn.query("SELECT string_agg(vehicle_id || ' ' || kafka_offset, ',') FROM "
                         "trackd.vehicle_telemetry_history")
                  .at(0, 0),
              "lag-2 1");
    EXPECT_EQ(front.count("schema not found 404"), 3U) << front.text();
    EXPECT_EQ(front.count("forwarded GET"), 1U) << front.text();
}

}  // namespace
}  // namespace trackd::test
