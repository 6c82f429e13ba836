#include "trackd/registry/schema_registry.hpp"

#include <chrono>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

namespace trackd::registry {
namespace {

config::KafkaConfig kafka(const std::string& url) {
    config::KafkaConfig k;
    k.format = "protobuf";
    k.schema_registry_url = url;
    return k;
}

TEST(SchemaRegistryEndpoint, HostPortAndBasePathFromTheUrl) {
    auto e = endpoint_of(kafka("http://127.0.0.1:58081/apis/ccompat/v7/"));
    EXPECT_EQ(e.host, "127.0.0.1");
    EXPECT_EQ(e.port, "58081");
    EXPECT_EQ(e.base_path, "/apis/ccompat/v7");
    EXPECT_EQ(e.authorization, "");
    e = endpoint_of(kafka("http://registry.internal"));
    EXPECT_EQ(e.host, "registry.internal");
    EXPECT_EQ(e.port, "80");
    EXPECT_EQ(e.base_path, "");
}

TEST(SchemaRegistryEndpoint, BasicOrBearerAuthorization) {
    auto k = kafka("http://r:8081");
    k.schema_registry_user = "Aladdin";
    k.schema_registry_password = "open sesame";
    EXPECT_EQ(endpoint_of(k).authorization, "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");  // RFC 7617
    k = kafka("http://Aladdin:open sesame@r:8081/x");
    const auto e = endpoint_of(k);
    EXPECT_EQ(e.authorization, "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
    EXPECT_EQ(e.host, "r");
    EXPECT_EQ(e.base_path, "/x");
    k = kafka("http://r:8081");
    k.schema_registry_token = "abc.def";
    EXPECT_EQ(endpoint_of(k).authorization, "Bearer abc.def");
}

// Nothing listens on loopback port 9 (discard) here: the connection is refused, which is not an
// answer (the caller retries), and says where and what.
TEST(SchemaRegistry, ARefusedConnectionIsAnErrorNotAnAnswer) {
    const auto e = endpoint_of(kafka("http://127.0.0.1:9/apis/ccompat/v7"));
    try {
        get_schema(e, 1, std::chrono::milliseconds(500));
        ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& err) {
        EXPECT_NE(std::string(err.what()).find("127.0.0.1:9: connect:"), std::string::npos)
            << err.what();
    }
    // The client keeps retrying and hands over no answer; destroying it stops it.
    SchemaRegistry client(kafka("http://127.0.0.1:9"));
    client.request(1);
    client.request(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(client.take_answers().empty());
}

}  // namespace
}  // namespace trackd::registry
