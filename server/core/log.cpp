#include "trackd/core/log.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "trackd/core/json.hpp"

namespace trackd::core::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::info)};
std::atomic<bool> g_json{false};
std::mutex g_mutex;

constexpr std::string_view name(Level l) {
    switch (l) {
        case Level::debug:
            return "debug";
        case Level::info:
            return "info";
        case Level::warn:
            return "warn";
        case Level::error:
            return "error";
    }
    return "info";
}

}  // namespace

void configure(std::string_view level, std::string_view format) {
    for (const auto l : {Level::debug, Level::info, Level::warn, Level::error}) {
        if (name(l) == level) g_level = static_cast<int>(l);
    }
    g_json = format == "json";
}

void write(Level level, std::string_view message, Fields fields) {
    if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
    const auto now =
        std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
    std::string line;
    if (g_json) {
        line = fmt::format(R"({{"ts":"{:%FT%TZ}","level":"{}","msg":")", now, name(level));
        core::append_json_escaped(line, message);
        line += '"';
        for (const auto& [k, v] : fields) {
            line += ",\"";
            core::append_json_escaped(line, k);
            line += "\":\"";
            core::append_json_escaped(line, v);
            line += '"';
        }
        line += "}\n";
    } else {
        line = fmt::format("{:%FT%TZ} {:5} {}", now, name(level), message);
        for (const auto& [k, v] : fields) {
            const bool quote = v.find_first_of(" \"=") != std::string::npos || v.empty();
            line += quote ? fmt::format(" {}=\"{}\"", k, v) : fmt::format(" {}={}", k, v);
        }
        line += '\n';
    }
    const std::lock_guard lock(g_mutex);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
}

}  // namespace trackd::core::log
