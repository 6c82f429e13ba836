#include "trackd/core/log.hpp"

#include <algorithm>
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

// key=value for text lines: quoted and escaped when the value needs it, so that one event
// stays one line whatever an error message holds.
void append_text_value(std::string& line, std::string_view v) {
    const bool quote = v.empty() || std::any_of(v.begin(), v.end(), [](char c) {
                           return c == ' ' || c == '"' || c == '=' || c == '\\' ||
                                  static_cast<unsigned char>(c) < 0x20;
                       });
    if (!quote) {
        line += v;
        return;
    }
    line += '"';
    for (const char c : v) {
        switch (c) {
            case '"':
                line += "\\\"";
                break;
            case '\\':
                line += "\\\\";
                break;
            case '\n':
                line += "\\n";
                break;
            case '\r':
                line += "\\r";
                break;
            case '\t':
                line += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    line += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
                } else {
                    line += c;
                }
        }
    }
    line += '"';
}

}  // namespace

void configure(std::string_view level, std::string_view format) {
    for (const auto l : {Level::debug, Level::info, Level::warn, Level::error}) {
        if (name(l) == level) g_level = static_cast<int>(l);
    }
    g_json = format == "json";
}

namespace {

template <class Range>
std::string format_fields_line(Level level, std::string_view message, const Range& fields,
                               bool json, std::string_view timestamp) {
    std::string line;
    if (json) {
        line = fmt::format(R"({{"ts":"{}","level":"{}","msg":")", timestamp, name(level));
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
        line = fmt::format("{} {:5} ", timestamp, name(level));
        // The message is a fixed text chosen by the caller; escape it all the same.
        for (const char c : message) line += (c == '\n' || c == '\r') ? ' ' : c;
        for (const auto& [k, v] : fields) {
            line += ' ';
            line += k;
            line += '=';
            append_text_value(line, v);
        }
        line += '\n';
    }
    return line;
}

template <class Range>
void write_fields(Level level, std::string_view message, const Range& fields) {
    if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed)) return;
    const auto now =
        std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
    const std::string line =
        format_fields_line(level, message, fields, g_json.load(), fmt::format("{:%FT%TZ}", now));
    const std::lock_guard lock(g_mutex);
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
}

std::string whole_seconds(std::chrono::steady_clock::duration d) {
    return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

}  // namespace

std::string format_line(Level level, std::string_view message, Fields fields, bool json,
                        std::string_view timestamp) {
    return format_fields_line(level, message, fields, json, timestamp);
}

void write(Level level, std::string_view message, Fields fields) {
    write_fields(level, message, fields);
}

void write(Level level, std::string_view message, const std::vector<Field>& fields) {
    write_fields(level, message, fields);
}

Recurring::Recurring(Level level, std::string message, Clock::duration every)
    : level_(level), message_(std::move(message)), every_(every) {}

void Recurring::occurred(Fields fields, Clock::time_point now) {
    std::vector<Field> line(fields);
    {
        const std::lock_guard lock(mutex_);
        if (times_++ == 0) {
            first_ = now;
        } else {
            ++unlogged_;
            if (now - last_line_ < every_) return;
            line.emplace_back("repeats", std::to_string(unlogged_));
            line.emplace_back("for_s", whole_seconds(now - first_));
        }
        unlogged_ = 0;
        last_line_ = now;
    }
    write(level_, message_, line);
}

void Recurring::over(std::string_view message, Fields fields, Clock::time_point now) {
    std::vector<Field> line(fields);
    {
        const std::lock_guard lock(mutex_);
        if (times_ == 0) return;
        line.emplace_back("for_s", whole_seconds(now - first_));
        line.emplace_back("times", std::to_string(times_));
        times_ = 0;
        unlogged_ = 0;
    }
    write(Level::info, message, line);
}

}  // namespace trackd::core::log
