#include <gtest/gtest.h>

#include "trackd/db/connection.hpp"

namespace trackd::db {
namespace {

bool retryable(const char* sqlstate) { return DbError("test", sqlstate).retryable(); }

TEST(DbError, RetryableWhenTheConnectionIsLost) {
    for (const char* s : {"", "08000", "08006", "08P01", "57P01", "57P02", "57P03"}) {
        EXPECT_TRUE(DbError("test", s).connection_lost()) << s;
        EXPECT_TRUE(retryable(s)) << s;
    }
}

TEST(DbError, RetryableWhenTheServerAsksToTryAgain) {
    // Serialization failure, deadlock, out of resources, lock not available, statement timeout.
    for (const char* s : {"40001", "40P01", "53000", "53100", "53200", "53300", "55P03", "57014"}) {
        EXPECT_TRUE(retryable(s)) << s;
        EXPECT_FALSE(DbError("test", s).connection_lost()) << s;
    }
}

TEST(DbError, NotRetryableForMistakesAndRefusals) {
    // Syntax, undefined table, unique and check violations, permission, invalid statement name,
    // other object states.
    for (const char* s : {"42601", "42P01", "23505", "23514", "42501", "26000", "55000", "57000",
                          "22007", "XX000"}) {
        EXPECT_FALSE(retryable(s)) << s;
    }
}

}  // namespace
}  // namespace trackd::db
