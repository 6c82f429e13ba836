#include "tally.hpp"

#include <map>
#include <numeric>

#include <fmt/format.h>

#include "protobuf_payload.hpp"

namespace trackd::fleet {

Tally::Tally(bool protobuf)
    : protobuf_(protobuf), delivered_(kinds().size(), 0), failed_(kinds().size(), 0) {}

std::string_view Tally::reason_of(std::size_t kind) const {
    const auto& spec = kinds()[kind];
    return protobuf_ ? expected_protobuf_reason_code(spec) : expected_reason_code(spec);
}

std::uint64_t Tally::delivered() const {
    return std::accumulate(delivered_.begin(), delivered_.end(), std::uint64_t{0});
}

std::uint64_t Tally::failed() const {
    return std::accumulate(failed_.begin(), failed_.end(), std::uint64_t{0});
}

void Tally::print_text(std::FILE* out, double elapsed_s, const std::string& topic) const {
    const std::uint64_t sent = delivered();
    const double rate = elapsed_s > 0 ? static_cast<double>(sent) / elapsed_s : 0;
    fmt::print(out,
               "trackd-fleet: sent {} messages to '{}' in {:.2f} s ({:.0f} msg/s), {} failed\n",
               sent, topic, elapsed_s, rate, failed());
    fmt::print(out, "  {:<20} {:<20} {:>12}\n", "kind", "expected", "sent");
    std::uint64_t accepted = 0;
    const auto all = kinds();
    for (std::size_t i = 0; i < all.size(); ++i) {
        const std::string_view reason = reason_of(i);
        fmt::print(out, "  {:<20} {:<20} {:>12}{}\n", all[i].name,
                   reason.empty() ? "accepted" : reason, delivered_[i],
                   failed_[i] > 0 ? fmt::format("  ({} failed)", failed_[i]) : "");
        if (reason.empty()) accepted += delivered_[i];
    }
    fmt::print(out, "  expected: {} accepted, {} rejected\n", accepted, sent - accepted);
}

std::string Tally::json(double elapsed_s) const {
    std::string by_kind;
    std::map<std::string_view, std::uint64_t> by_reason;
    std::uint64_t accepted = 0;
    const auto all = kinds();
    for (std::size_t i = 0; i < all.size(); ++i) {
        if (!by_kind.empty()) by_kind += ',';
        by_kind += fmt::format(R"("{}":{})", all[i].name, delivered_[i]);
        const std::string_view reason = reason_of(i);
        if (reason.empty()) {
            accepted += delivered_[i];
        } else {
            by_reason[reason] += delivered_[i];
        }
    }
    std::string reasons;
    for (const auto& [code, n] : by_reason) {
        if (!reasons.empty()) reasons += ',';
        reasons += fmt::format(R"("{}":{})", code, n);
    }
    const std::uint64_t sent = delivered();
    return fmt::format(R"({{"sent":{},"failed":{},"accepted":{},"rejected":{},"elapsed_s":{:.3f},)"
                       R"("by_kind":{{{}}},"by_expected_reason":{{{}}}}})",
                       sent, failed(), accepted, sent - accepted, elapsed_s, by_kind, reasons);
}

}  // namespace trackd::fleet
