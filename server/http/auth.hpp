// Bearer-token access control (RFC 6750).
//
// Contract: tokens come from http.tokens; a request presents one as "Authorization: Bearer
// <token>". Tokens are compared in constant time (against every configured token, so timing
// says nothing about which or how much matched) and are never logged: callers get the token's
// configured *name* to log instead. Thread-safe (immutable after construction).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trackd/config/config.hpp"

namespace trackd::http {

enum class Scope { read, write };

struct Caller {
    std::string token_name;  // "" for an anonymous caller
    std::optional<Scope> scope;
};

class Authenticator {
  public:
    explicit Authenticator(const std::map<std::string, config::HttpToken>& tokens);

    // The caller an Authorization header identifies; throws ProblemError 401 for a malformed
    // header or an unknown token. An empty header is an anonymous caller.
    [[nodiscard]] Caller identify(std::string_view header) const;

    // Throws 401 (anonymous) or 403 (scope too small) unless `caller` may act with `needed`.
    static void require(const Caller& caller, Scope needed);

  private:
    struct Entry {
        std::string name;
        std::string secret;
        Scope scope;
    };
    std::vector<Entry> entries_;
};

// Constant-time equality: the time depends only on the lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace trackd::http
