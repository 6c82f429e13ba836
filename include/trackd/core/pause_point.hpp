// Test hook for the crash and fault tests: with <variable>=<name>[@<file>] in the environment,
// at(name) stops the calling thread there (once per process), logs "<what> paused at <name>" and
// waits until the process is killed, or until <file> exists and then goes on (at most ten
// minutes, so that a forgotten variable cannot hang a process forever). Unset (always, in
// production) it costs one comparison.
#pragma once

#include <atomic>
#include <string>

namespace trackd::core {

class PausePoint {
  public:
    PausePoint(const char* variable, std::string what);
    void at(const char* name);

  private:
    std::string variable_;
    std::string what_;
    const char* spec_;  // the variable's value, nullptr when unset
    std::atomic<bool> paused_{false};
};

}  // namespace trackd::core
