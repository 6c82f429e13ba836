#include "pause_point.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <thread>

#include "trackd/core/log.hpp"

namespace trackd::archive {

void pause_point(const char* name) {
    static const char* wanted = std::getenv("TRACKD_TEST_ARCHIVE_PAUSE_AT");
    if (wanted == nullptr) return;
    const std::string_view spec(wanted);
    const auto at = spec.find('@');
    static std::atomic<bool> paused{false};  // once per process: a retried step goes straight on
    if (spec.substr(0, at) != name || paused.exchange(true)) return;
    core::log::warn("archive paused at " + std::string(name) + " (TRACKD_TEST_ARCHIVE_PAUSE_AT)");
    // Until killed, or until the release file named after '@' exists; bounded, so that a
    // forgotten variable cannot hang a process forever.
    const auto until = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    while (std::chrono::steady_clock::now() < until) {
        if (at != std::string_view::npos &&
            std::filesystem::exists(std::string(spec.substr(at + 1)))) {
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

}  // namespace trackd::archive
