// One line per event on stderr, as text or JSON.
//
// Contract: thread-safe; configure() once at start-up before other threads run. Callers pass
// the event as a short message plus key/value fields; never pass secrets (DSN passwords,
// tokens) as fields. Every event is exactly one line: in text, a value holding a space, '"',
// '=', a backslash or a control character is quoted with those escaped (\n, \", \\); in JSON
// every string is JSON-escaped.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace trackd::core::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };

using Fields = std::initializer_list<std::pair<std::string_view, std::string>>;

// level: debug|info|warn|error; format: text|json (validated by config).
void configure(std::string_view level, std::string_view format);

void write(Level level, std::string_view message, Fields fields = {});

// The line write() would print (with its newline), in the given format; `timestamp` is
// RFC 3339 UTC. Exposed for tests.
std::string format_line(Level level, std::string_view message, Fields fields, bool json,
                        std::string_view timestamp);

inline void debug(std::string_view m, Fields f = {}) { write(Level::debug, m, f); }
inline void info(std::string_view m, Fields f = {}) { write(Level::info, m, f); }
inline void warn(std::string_view m, Fields f = {}) { write(Level::warn, m, f); }
inline void error(std::string_view m, Fields f = {}) { write(Level::error, m, f); }

}  // namespace trackd::core::log
