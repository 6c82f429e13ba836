// Errors that stop trackd: configuration, start-up and connection failures.
//
// Contract: these are thrown only on paths where trackd cannot go on (loading config,
// connecting, migrating). main() catches them, prints what() on one line and exits non-zero.
// A bad *message* is never an exception: it is a core::Rejection (see rejection.hpp).
#pragma once

#include <stdexcept>
#include <string>

namespace trackd::core {

// A setting is missing or wrong. what() names the key and the problem.
class ConfigError : public std::runtime_error {
  public:
    ConfigError(const std::string& key, const std::string& problem)
        : std::runtime_error(key + ": " + problem), key_(key) {}
    [[nodiscard]] const std::string& key() const noexcept { return key_; }

  private:
    std::string key_;
};

// Start-up cannot proceed (schema version mismatch, unreachable service, ...).
class StartupError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

}  // namespace trackd::core
