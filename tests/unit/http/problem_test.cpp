// Problem documents (RFC 7807) and the status of each problem kind.
#include "problem.hpp"

#include <gtest/gtest.h>

namespace trackd::http {
namespace {

TEST(Problem, DocumentIsRfc7807) {
    const std::string json =
        problem_json({ProblemKind::bad_parameter, "bbox: bad \"x\"", "bbox"}, "/v1/vehicles");
    EXPECT_EQ(json, R"({"type":"urn:trackd:problem:bad-parameter","title":"Invalid parameter",)"
                    R"("status":400,"detail":"bbox: bad \"x\"","parameter":"bbox",)"
                    R"("instance":"/v1/vehicles"})");
    EXPECT_EQ(info(ProblemKind::invalid_geometry).status, 422);
    EXPECT_EQ(info(ProblemKind::unavailable).status, 503);
}

}  // namespace
}  // namespace trackd::http
