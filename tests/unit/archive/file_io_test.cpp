// FileIO's local side and the S3 settings it resolves from archive.s3_* and the AWS environment
// (the S3 side itself runs against a real S3 server in tests/integration/archive_test.cpp).
#include "file_io.hpp"

#include <filesystem>
#include <fstream>

#include <arrow/io/interfaces.h>
#include <gtest/gtest.h>

namespace trackd::archive {
namespace {

namespace fs = std::filesystem;

TEST(S3Settings, ConfigKeysWinOverTheAwsEnvironment) {
    config::ArchiveConfig c;
    const std::map<std::string, std::string> env = {
        {"AWS_ENDPOINT_URL", "http://env-endpoint:9000"},
        {"AWS_ENDPOINT_URL_S3", "https://s3-only.example:443/"},
        {"AWS_DEFAULT_REGION", "eu-west-1"},
        {"AWS_ACCESS_KEY_ID", "ENVKEY"},
        {"AWS_SECRET_ACCESS_KEY", "envsecret"},
        {"AWS_SESSION_TOKEN", "envtoken"}};
    auto s = resolve_s3_settings(c, env);
    EXPECT_EQ(s.scheme, "https");
    EXPECT_EQ(s.endpoint, "s3-only.example:443");
    EXPECT_EQ(s.region, "eu-west-1");
    EXPECT_EQ(s.access_key_id, "ENVKEY");
    EXPECT_EQ(s.secret_access_key, "envsecret");
    EXPECT_EQ(s.session_token, "envtoken");

    c.s3_endpoint = "http://127.0.0.1:55900";
    c.s3_region = "us-west-2";
    c.s3_path_style = true;
    c.s3_access_key_id = "CFGKEY";
    c.s3_secret_access_key = "cfgsecret";
    c.s3_retry_attempts = 2;
    s = resolve_s3_settings(c, env);
    EXPECT_EQ(s.scheme, "http");
    EXPECT_EQ(s.endpoint, "127.0.0.1:55900");
    EXPECT_EQ(s.region, "us-west-2");
    EXPECT_TRUE(s.path_style);
    EXPECT_EQ(s.access_key_id, "CFGKEY");
    EXPECT_EQ(s.secret_access_key, "cfgsecret");
    EXPECT_EQ(s.session_token, "") << "a configured key pair does not take the environment's token";
    EXPECT_EQ(s.retry_attempts, 2);

    s = resolve_s3_settings(config::ArchiveConfig{},
                            {{"AWS_REGION", "ap-south-1"}, {"AWS_DEFAULT_REGION", "eu-west-1"}});
    EXPECT_EQ(s.region, "ap-south-1");
    EXPECT_EQ(s.endpoint, "");
    EXPECT_EQ(s.access_key_id, "");
    EXPECT_EQ(resolve_s3_settings(config::ArchiveConfig{}, {}).region, "us-east-1");
}

TEST(FileIO, UrisSplitAndNormalize) {
    EXPECT_EQ(split_s3_uri("s3://bucket/a/b/"),
              std::make_pair(std::string("bucket"), std::string("a/b")));
    EXPECT_EQ(split_s3_uri("s3://bucket"), std::make_pair(std::string("bucket"), std::string()));
    EXPECT_THROW(split_s3_uri("s3:///key"), std::runtime_error);
    EXPECT_THROW(split_s3_uri("/local"), std::runtime_error);
    EXPECT_EQ(FileIO::normalize("s3a://b/k"), "s3://b/k");
    EXPECT_EQ(FileIO::normalize("file:///x/y"), "/x/y");
    EXPECT_EQ(FileIO::normalize("/x/y"), "/x/y");
}

TEST(FileIO, LocalWriteOnceReadListRemove) {
    const auto dir = ::testing::TempDir() + "fileio-" + std::to_string(getpid());
    fs::remove_all(dir);
    FileIO io{S3Settings{}};
    io.write("file://" + dir + "/metadata/a.json", "{}");
    io.write(dir + "/data/p=1/b.parquet", "bytes");
    EXPECT_THROW(io.write(dir + "/metadata/a.json", "again"), std::runtime_error)
        << "a name is written once";
    EXPECT_EQ(io.read(dir + "/metadata/a.json"), "{}") << "and never replaced";
    EXPECT_FALSE(fs::exists(dir + "/metadata/.a.json.part"));
    EXPECT_TRUE(io.exists("file://" + dir + "/data/p=1/b.parquet"));
    auto files = io.list("file://" + dir + "/data");
    ASSERT_EQ(files.size(), 1U);
    EXPECT_EQ(files[0].uri, dir + "/data/p=1/b.parquet");
    EXPECT_EQ(files[0].size, 5);
    EXPECT_LE(files[0].modified, std::chrono::system_clock::now() + std::chrono::seconds(1));
    EXPECT_GE(files[0].modified, std::chrono::system_clock::now() - std::chrono::minutes(1));
    EXPECT_TRUE(io.list(dir + "/nowhere").empty());
    EXPECT_TRUE(io.remove(dir + "/data/p=1/b.parquet"));
    EXPECT_FALSE(io.remove(dir + "/data/p=1/b.parquet"));
    EXPECT_FALSE(io.exists(dir + "/data/p=1/b.parquet"));
    EXPECT_THROW(io.read(dir + "/data/p=1/b.parquet"), std::runtime_error);
    io.check_warehouse(dir);  // nothing to check for a local folder
    fs::remove_all(dir);
}

// A Parquet file being written (or left by a crash before it was complete) is not under its
// final name, so neither a listing nor a reader following a name finds half a file; once the
// stream is closed and synced it is there whole, and the hidden staging file is gone.
TEST(FileIO, ALocalFileGetsItsNameOnlyWhenComplete) {
    const auto dir = ::testing::TempDir() + "fileio-stage-" + std::to_string(getpid());
    fs::remove_all(dir);
    FileIO io{S3Settings{}};
    const auto uri = dir + "/data/p=1/c.parquet";
    auto out = io.open_output(uri);
    ASSERT_TRUE(out->Write("half", 4).ok());
    ASSERT_TRUE(out->Flush().ok());
    EXPECT_FALSE(io.exists(uri));
    auto listed = io.list(dir + "/data");
    ASSERT_EQ(listed.size(), 1U);
    EXPECT_EQ(listed[0].uri, dir + "/data/p=1/.c.parquet.part");
    ASSERT_TRUE(out->Write(" and whole", 10).ok());
    ASSERT_TRUE(out->Close().ok());
    EXPECT_FALSE(io.exists(uri)) << "named only by sync_size";
    EXPECT_EQ(io.sync_size(uri), 14);
    EXPECT_EQ(io.read(uri), "half and whole");
    listed = io.list(dir + "/data");
    ASSERT_EQ(listed.size(), 1U);
    EXPECT_EQ(listed[0].uri, uri);
    EXPECT_THROW(io.sync_size(dir + "/data/p=1/never-opened.parquet"), std::runtime_error);
    fs::remove_all(dir);
}

// The storage's clock, read from a file it stamps: here the local file system's, which is this
// host's; the marker and its folder are gone afterwards.
TEST(FileIO, StampNowReadsTheStoragesClockAndLeavesNothing) {
    const auto dir = ::testing::TempDir() + "fileio-stamp-" + std::to_string(getpid());
    fs::remove_all(dir);
    FileIO io{S3Settings{}};
    io.write(dir + "/metadata/v1.json", "{}");
    const auto before = std::chrono::system_clock::now();
    const auto stamp = io.stamp_now(dir + "/metadata/.clock-1");
    const auto after = std::chrono::system_clock::now();
    // File systems stamp from the kernel's coarse clock: up to a tick before `before`.
    EXPECT_GE(stamp, before - std::chrono::milliseconds(50));
    EXPECT_LE(stamp, after);
    const auto left = io.list(dir + "/metadata");
    ASSERT_EQ(left.size(), 1U);
    EXPECT_EQ(left[0].uri, dir + "/metadata/v1.json");
    EXPECT_FALSE(fs::exists(dir + "/metadata/.clock-1"));
    fs::remove_all(dir);
}

// Incomplete multipart uploads exist on object storage only, and are listed with requests
// trackd signs: without a key pair (the AWS SDK's default chain) they cannot be listed, which
// maintenance logs instead of failing.
TEST(FileIO, UploadsAreListedOnObjectStorageWithAKeyPairOnly) {
    FileIO io{S3Settings{}};
    const auto local = io.list_uploads(::testing::TempDir() + "no-such-table");
    ASSERT_TRUE(local.has_value());
    EXPECT_TRUE(local->empty());
    EXPECT_FALSE(io.list_uploads("s3://bucket/warehouse/t").has_value());
}

}  // namespace
}  // namespace trackd::archive
