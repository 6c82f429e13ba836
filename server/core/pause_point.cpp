#include "trackd/core/pause_point.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <thread>

#include "trackd/core/log.hpp"

namespace trackd::core {

PausePoint::PausePoint(const char* variable, std::string what)
    : variable_(variable), what_(std::move(what)), spec_(std::getenv(variable)) {}

void PausePoint::at(const char* name) {
    if (spec_ == nullptr) return;
    const std::string_view spec(spec_);
    const auto sep = spec.find('@');
    // Once per process: a retried step goes straight on.
    if (spec.substr(0, sep) != name || paused_.exchange(true)) return;
    log::warn(what_ + " paused at " + name + " (" + variable_ + ")");
    const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    while (std::chrono::steady_clock::now() < until) {
        if (sep != std::string_view::npos &&
            std::filesystem::exists(std::string(spec.substr(sep + 1)))) {
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

}  // namespace trackd::core
