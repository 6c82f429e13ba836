// The S3 requests trackd signs itself (ListMultipartUploads, AbortMultipartUpload): their
// Signature Version 4 headers, checked against what botocore (the AWS SDK for Python, an
// implementation of its own) computes for the same requests, and the reading of S3's answers.
// The requests themselves run against a real S3 server in tests/integration/archive_test.cpp.
#include "s3_requests.hpp"

#include <gtest/gtest.h>

namespace trackd::archive {
namespace {

S3Settings example_credentials() {
    S3Settings s;
    s.access_key_id = "AKIDEXAMPLE";
    s.secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    s.region = "eu-central-1";
    return s;
}

// 2026-12-07T13:43:30Z
const auto kAt = std::chrono::system_clock::from_time_t(1796651010);

TEST(SignV4, ListingUploadsByPathSignsAsBotocore) {
    // botocore 1.44.8, S3SigV4Auth("s3", "eu-central-1"), GET
    // http://127.0.0.1:55900/my-bucket?uploads&prefix=warehouse%2Ftrackd%2Fvehicle%20positions%2F&key-marker=a%2Bb
    const auto h = sign_v4(
        example_credentials(), "s3", "GET", "127.0.0.1:55900", "/my-bucket",
        {{"uploads", ""}, {"prefix", "warehouse/trackd/vehicle positions/"}, {"key-marker", "a+b"}},
        "", kAt);
    EXPECT_EQ(h.at("x-amz-date"), "20261207T134330Z");
    EXPECT_EQ(h.at("x-amz-content-sha256"),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(h.count("x-amz-security-token"), 0U);
    EXPECT_EQ(h.at("authorization"),
              "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261207/eu-central-1/s3/aws4_request, "
              "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
              "Signature=01c0f33242e1ed125b15278ddf92614bb5f50e414cdc5b653e4f6ac8c78fa068");
    EXPECT_EQ(h.count("host"), 0U) << "the HTTP client writes the Host header";
}

TEST(SignV4, AbortingByVirtualHostWithASessionTokenSignsAsBotocore) {
    // The same, DELETE https://my-bucket.s3.eu-central-1.amazonaws.com/warehouse/data/
    // x%20y.parquet?uploadId=2~abc.def-_Z with the session token "session/token+1".
    auto c = example_credentials();
    c.session_token = "session/token+1";
    const auto h =
        sign_v4(c, "s3", "DELETE", "my-bucket.s3.eu-central-1.amazonaws.com",
                "/warehouse/data/x%20y.parquet", {{"uploadId", "2~abc.def-_Z"}}, "", kAt);
    EXPECT_EQ(h.at("x-amz-security-token"), "session/token+1");
    EXPECT_EQ(h.at("authorization"),
              "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261207/eu-central-1/s3/aws4_request, "
              "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, "
              "Signature=aa19d66b08936f61425c79db01990cde56e0e16240ea7dbf9e3364583f186ca7");
}

TEST(SignV4, AnotherSecretOrTimeGivesAnotherSignature) {
    const std::map<std::string, std::string> q = {{"uploads", ""}};
    const auto base = sign_v4(example_credentials(), "s3", "GET", "h", "/b", q, "", kAt);
    auto other = example_credentials();
    other.secret_access_key += "x";
    EXPECT_NE(sign_v4(other, "s3", "GET", "h", "/b", q, "", kAt).at("authorization"),
              base.at("authorization"));
    EXPECT_NE(
        sign_v4(example_credentials(), "s3", "GET", "h", "/b", q, "", kAt + std::chrono::seconds(1))
            .at("authorization"),
        base.at("authorization"));
}

TEST(S3Query, SentSortedAndEncodedWithBareNames) {
    EXPECT_EQ(encode_query({{"uploads", ""}, {"prefix", "a b/c+"}, {"key-marker", "k~1"}}),
              "key-marker=k~1&prefix=a%20b%2Fc%2B&uploads");
}

TEST(S3Time, ReadsS3sFormatToTheMicrosecond) {
    using namespace std::chrono;
    EXPECT_EQ(parse_s3_time("2026-12-07T13:43:30.000Z"), kAt);
    EXPECT_EQ(parse_s3_time("2026-12-07T13:43:30Z"), kAt);
    EXPECT_EQ(parse_s3_time("2026-12-07T13:43:30.5Z") - kAt, milliseconds(500));
    EXPECT_EQ(parse_s3_time("2026-12-07T13:43:30.1234567Z") - kAt, microseconds(123456));
    EXPECT_THROW(parse_s3_time("2026-12-07 13:43"), std::runtime_error);
    EXPECT_THROW(parse_s3_time("2026-12-07T13:43:30+01:00"), std::runtime_error);
}

TEST(S3UploadPage, ReadsEachUploadAndTheNextMarkers) {
    const std::string xml = R"(<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
  <Bucket>b</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker>
  <NextKeyMarker>w/data/b&amp;c.parquet</NextKeyMarker><NextUploadIdMarker>id-2</NextUploadIdMarker>
  <MaxUploads>2</MaxUploads><IsTruncated>true</IsTruncated>
  <Upload><Key>w/data/a.parquet</Key><UploadId>id-1</UploadId>
    <Initiator><ID>x</ID></Initiator><StorageClass>STANDARD</StorageClass>
    <Initiated>2026-12-07T13:43:30.000Z</Initiated></Upload>
  <Upload><Key>w/data/b&amp;c&#x20AC;.parquet</Key><UploadId>id-2</UploadId>
    <Initiated>2026-12-07T13:43:31.000Z</Initiated></Upload>
</ListMultipartUploadsResult>)";
    const auto page = parse_upload_page("b", xml);
    ASSERT_EQ(page.uploads.size(), 2U);
    EXPECT_EQ(page.uploads[0].bucket, "b");
    EXPECT_EQ(page.uploads[0].key, "w/data/a.parquet");
    EXPECT_EQ(page.uploads[0].upload_id, "id-1");
    EXPECT_EQ(page.uploads[0].initiated, kAt);
    EXPECT_EQ(page.uploads[1].key, "w/data/b&c\xE2\x82\xAC.parquet");
    EXPECT_EQ(page.uploads[1].initiated - kAt, std::chrono::seconds(1));
    EXPECT_EQ(page.next_key_marker, "w/data/b&c.parquet");
    EXPECT_EQ(page.next_upload_id_marker, "id-2");

    const auto last =
        parse_upload_page("b",
                          "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>"
                          "<NextKeyMarker>x</NextKeyMarker></ListMultipartUploadsResult>");
    EXPECT_TRUE(last.uploads.empty());
    EXPECT_TRUE(last.next_key_marker.empty()) << "not truncated: no next page";
    EXPECT_THROW(parse_upload_page("b", "<IsTruncated>true</IsTruncated>"), std::runtime_error);
    EXPECT_THROW(parse_upload_page("b", "<Upload><Key>k</Key></Upload>"), std::runtime_error);
}

}  // namespace
}  // namespace trackd::archive
