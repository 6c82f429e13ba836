#include "trackd/core/rejection.hpp"

#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace trackd::core {
namespace {

TEST(Reasons, CodesAreUniqueAndFindable) {
    std::set<std::string_view> seen;
    for (const auto& info : reasons()) {
        EXPECT_TRUE(seen.insert(info.code).second) << info.code;
        ASSERT_NE(find_reason(info.code), nullptr) << info.code;
        EXPECT_EQ(find_reason(info.code)->reason, info.reason);
        EXPECT_EQ(code(info.reason), info.code);
        EXPECT_FALSE(info.description.empty()) << info.code;
    }
    EXPECT_EQ(find_reason("no_such_reason"), nullptr);
}

// docs/ingest.md is what users read: every code must be in its table.
TEST(Reasons, EveryCodeIsDocumented) {
    std::ifstream in(std::string(TRACKD_SOURCE_DIR) + "/docs/ingest.md");
    ASSERT_TRUE(in.good());
    std::ostringstream text;
    text << in.rdbuf();
    for (const auto& info : reasons()) {
        EXPECT_NE(text.str().find("`" + std::string(info.code) + "`"), std::string::npos)
            << info.code << " is missing from docs/ingest.md";
    }
}

}  // namespace
}  // namespace trackd::core
