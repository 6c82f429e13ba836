// Waiting for a condition and reading trackd's text logs (fault and crash tests).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

namespace trackd::test {

// Lines of the file that contain `needle`.
inline std::size_t count_in_file(const std::string& path, const std::string& needle) {
    std::ifstream in(path);
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) {
        if (line.find(needle) != std::string::npos) ++n;
    }
    return n;
}

// Polls `pred` every 100 ms until it holds or `timeout` passes; the last answer.
template <class Pred>
bool wait_until(std::chrono::milliseconds timeout, Pred&& pred) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return pred();
}

// The value of `key=` on a text log line ("" when absent): `partition=3` gives "3".
inline std::string log_value(const std::string& line, const std::string& key) {
    const auto at = line.find(" " + key + "=");
    if (at == std::string::npos) return {};
    const auto from = at + key.size() + 2;
    return line.substr(from, line.find(' ', from) - from);
}

// The partitions of the `claimed partition` lines of a trackd log from line `from_line` on.
inline std::set<int> claimed_partitions(const std::string& path, std::size_t from_line = 0) {
    std::ifstream in(path);
    std::set<int> out;
    std::size_t n = 0;
    for (std::string line; std::getline(in, line); ++n) {
        if (n < from_line || line.find("claimed partition") == std::string::npos) continue;
        const auto p = log_value(line, "partition");
        if (!p.empty()) out.insert(std::stoi(p));
    }
    return out;
}

// The highest epoch with which a trackd log says it claimed each partition
// (`claimed partition partition=P epoch=E`).
inline std::map<int, long> claimed_epochs(const std::string& path) {
    std::ifstream in(path);
    std::map<int, long> out;
    for (std::string line; std::getline(in, line);) {
        if (line.find("claimed partition") == std::string::npos) continue;
        const auto p = log_value(line, "partition");
        const auto e = log_value(line, "epoch");
        if (p.empty() || e.empty()) continue;
        auto& epoch = out[std::stoi(p)];
        epoch = std::max(epoch, std::stol(e));
    }
    return out;
}

inline std::size_t line_count(const std::string& path) {
    std::ifstream in(path);
    std::size_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
}

}  // namespace trackd::test
