#include "auth.hpp"

#include <algorithm>
#include <cctype>

#include "problem.hpp"

namespace trackd::http {

bool constant_time_equal(std::string_view a, std::string_view b) {
    // Walk the longer length in full whatever the contents; a length difference alone makes
    // the result false without an early exit.
    const std::size_t n = std::max(a.size(), b.size());
    unsigned diff = a.size() == b.size() ? 0U : 1U;
    for (std::size_t i = 0; i < n; ++i) {
        const auto x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0U;
        const auto y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0U;
        diff |= x ^ y;
    }
    return diff == 0;
}

Authenticator::Authenticator(const std::map<std::string, config::HttpToken>& tokens) {
    for (const auto& [name, t] : tokens) {
        entries_.push_back({name, t.secret, t.scope == "write" ? Scope::write : Scope::read});
    }
}

Caller Authenticator::identify(std::string_view header) const {
    if (header.empty()) return {};
    // The scheme is case-insensitive (RFC 7235); one or more spaces before the token.
    constexpr std::string_view kScheme = "bearer";
    bool is_bearer = header.size() > kScheme.size() && header[kScheme.size()] == ' ';
    for (std::size_t i = 0; is_bearer && i < kScheme.size(); ++i) {
        is_bearer = std::tolower(static_cast<unsigned char>(header[i])) == kScheme[i];
    }
    if (!is_bearer) {
        throw ProblemError(ProblemKind::unauthorized, "Authorization: expected \"Bearer <token>\"",
                           "Authorization");
    }
    std::string_view token = header.substr(kScheme.size());
    while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
    while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
    const Entry* found = nullptr;
    for (const auto& e : entries_) {
        // No break: every configured token is compared, so the time does not reveal which.
        if (constant_time_equal(token, e.secret)) found = &e;
    }
    if (found == nullptr) {
        throw ProblemError(ProblemKind::unauthorized,
                           "Authorization: the bearer token is not one trackd knows",
                           "Authorization");
    }
    return {found->name, found->scope};
}

void Authenticator::require(const Caller& caller, Scope needed) {
    if (!caller.scope) {
        throw ProblemError(ProblemKind::unauthorized,
                           "Authorization: this endpoint needs a bearer token with scope " +
                               std::string(needed == Scope::write ? "write" : "read"),
                           "Authorization");
    }
    if (needed == Scope::write && *caller.scope != Scope::write) {
        throw ProblemError(ProblemKind::forbidden,
                           "Authorization: the token '" + caller.token_name +
                               "' has scope read; this endpoint needs write",
                           "Authorization");
    }
}

}  // namespace trackd::http
