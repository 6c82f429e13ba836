// Which S3 credentials trackd takes from a REST catalog's LoadTableResult when it asks for
// vended credentials (archive.rest_access_delegation): `storage-credentials` before `config`,
// and of those the entry with the longest prefix of the table's location. The whole path, a
// catalog vending credentials and a bucket refusing any other key, runs in
// tests/integration/archive_test.cpp (ArchiveRestS3).
#include <gtest/gtest.h>

#include "catalog.hpp"

namespace trackd::archive {
namespace {

using json = nlohmann::ordered_json;

json loaded(json extra) {
    json j = {{"metadata-location", "s3://b/wh/ns/t/metadata/00001.metadata.json"},
              {"metadata", {{"location", "s3://b/wh/ns/t"}}}};
    for (auto& [k, v] : extra.items()) j[k] = v;
    return j;
}

json s3(const std::string& key, const std::string& token = {}) {
    json c = {{"s3.access-key-id", key}, {"s3.secret-access-key", key + "-secret"}};
    if (!token.empty()) c["s3.session-token"] = token;
    return c;
}

TEST(VendedCredentials, StorageCredentialsWithTheLongestMatchingPrefixWinOverConfig) {
    const auto c = vended_s3_credentials(
        loaded({{"config", s3("from-config")},
                {"storage-credentials",
                 json::array(
                     {{{"prefix", "s3://b/"}, {"config", s3("bucket")}},
                      {{"prefix", "s3a://b/wh/ns/t"}, {"config", s3("table", "tok")}},
                      {{"prefix", "s3://b/wh/ns/t/data/longer-but-elsewhere"}, {"config", s3("x")}},
                      {{"prefix", "s3://other/wh/ns/t"}, {"config", s3("other")}}})}}));
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->access_key_id, "table");
    EXPECT_EQ(c->secret_access_key, "table-secret");
    EXPECT_EQ(c->session_token, "tok");
}

TEST(VendedCredentials, ConfigWhenNoStorageCredentialMatches) {
    const auto c = vended_s3_credentials(
        loaded({{"config", s3("from-config", "t")},
                {"storage-credentials",
                 json::array({{{"prefix", "s3://other/"}, {"config", s3("o")}}})}}));
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->access_key_id, "from-config");
    EXPECT_EQ(c->session_token, "t");
}

TEST(VendedCredentials, NoneWithoutAKeyPair) {
    EXPECT_FALSE(vended_s3_credentials(loaded(json::object())).has_value());
    EXPECT_FALSE(
        vended_s3_credentials(loaded({{"config", {{"s3.access-key-id", "k"}}}})).has_value())
        << "a key without its secret";
    EXPECT_FALSE(
        vended_s3_credentials(loaded({{"config", {{"token", "catalog-token"}}}})).has_value());
}

}  // namespace
}  // namespace trackd::archive
