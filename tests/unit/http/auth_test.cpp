// Bearer tokens: constant-time comparison, scopes, 401 and 403.
#include "auth.hpp"

#include <gtest/gtest.h>

#include "problem.hpp"
#include "problem_of.hpp"

namespace trackd::http {
namespace {

TEST(Auth, ConstantTimeCompareAndScopes) {
    EXPECT_TRUE(constant_time_equal("abc", "abc"));
    EXPECT_FALSE(constant_time_equal("abc", "abd"));
    EXPECT_FALSE(constant_time_equal("abc", "abcd"));
    EXPECT_FALSE(constant_time_equal("", "a"));
    const Authenticator auth({{"dash", {"read", "read-token-0123456789"}},
                              {"ops", {"write", "write-token-0123456789"}}});
    EXPECT_EQ(auth.identify("Bearer read-token-0123456789").token_name, "dash");
    EXPECT_EQ(auth.identify("bearer   write-token-0123456789").scope, Scope::write);
    EXPECT_FALSE(auth.identify("").scope.has_value());
    EXPECT_EQ(problem_of([&] { (void)auth.identify("Bearer nope"); }).kind,
              ProblemKind::unauthorized);
    EXPECT_EQ(problem_of([&] { (void)auth.identify("Basic dXNlcjpwYXNz"); }).parameter,
              "Authorization");
    EXPECT_EQ(problem_of([&] { Authenticator::require(Caller{}, Scope::read); }).kind,
              ProblemKind::unauthorized);
    EXPECT_EQ(problem_of([&] {
                  Authenticator::require(auth.identify("Bearer read-token-0123456789"),
                                         Scope::write);
              }).kind,
              ProblemKind::forbidden);
}

}  // namespace
}  // namespace trackd::http
