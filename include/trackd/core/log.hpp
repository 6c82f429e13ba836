// One line per event on stderr, as text or JSON.
//
// Contract: thread-safe; configure() once at start-up before other threads run. Callers pass
// the event as a short message plus key/value fields; never pass secrets (DSN passwords,
// tokens) as fields. Every event is exactly one line: in text, a value holding a space, '"',
// '=', a backslash or a control character is quoted with those escaped (\n, \", \\); in JSON
// every string is JSON-escaped.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trackd::core::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };

using Field = std::pair<std::string_view, std::string>;
using Fields = std::initializer_list<Field>;

// level: debug|info|warn|error; format: text|json (validated by config).
void configure(std::string_view level, std::string_view format);

void write(Level level, std::string_view message, Fields fields = {});

// The line write() would print (with its newline), in the given format; `timestamp` is
// RFC 3339 UTC. Exposed for tests.
std::string format_line(Level level, std::string_view message, Fields fields, bool json,
                        std::string_view timestamp);

void write(Level level, std::string_view message, const std::vector<Field>& fields);

inline void debug(std::string_view m, Fields f = {}) { write(Level::debug, m, f); }
inline void info(std::string_view m, Fields f = {}) { write(Level::info, m, f); }
inline void warn(std::string_view m, Fields f = {}) { write(Level::warn, m, f); }
inline void error(std::string_view m, Fields f = {}) { write(Level::error, m, f); }

// A condition that recurs for as long as it lasts, such as the database being unreachable for
// a loop that retries every few seconds. The first occurrence is logged; after that, at most
// one line per `every`, with `repeats` (occurrences since the last line) and `for_s` (seconds
// since the first). over() logs once, at info, that the condition ended, and resets.
// Thread-safe: one instance may serve several threads (the API's connection pool).
class Recurring {
  public:
    using Clock = std::chrono::steady_clock;

    Recurring(Level level, std::string message, Clock::duration every = std::chrono::seconds(60));

    void occurred(Fields fields, Clock::time_point now = Clock::now());
    // Logs `message` with `fields`, `for_s` and `times` if anything occurred since the last
    // over(); otherwise nothing.
    void over(std::string_view message, Fields fields = {}, Clock::time_point now = Clock::now());

  private:
    Level level_;
    std::string message_;
    Clock::duration every_;
    std::mutex mutex_;
    std::int64_t times_ = 0;     // since the first occurrence
    std::int64_t unlogged_ = 0;  // since the last line
    Clock::time_point first_{};
    Clock::time_point last_line_{};
};

}  // namespace trackd::core::log
