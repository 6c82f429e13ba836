// Counts of delivered and failed messages by kind, and the end-of-run summary.
//
// Contract: count_* are called from the delivery-report callback, which runs on the thread that
// polls the producer (the main thread); not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "message_kinds.hpp"

namespace trackd::fleet {

class Tally {
  public:
    // `protobuf`: the messages are Protobuf (expected reasons as protobuf_payload.hpp says).
    explicit Tally(bool protobuf = false);

    void count_delivered(KindId kind) { ++delivered_[kind]; }
    void count_failed(KindId kind) { ++failed_[kind]; }

    [[nodiscard]] std::uint64_t delivered() const;
    [[nodiscard]] std::uint64_t failed() const;
    [[nodiscard]] std::uint64_t delivered(KindId kind) const { return delivered_[kind]; }

    // A human-readable table: one line per kind with its expected reason and count.
    void print_text(std::FILE* out, double elapsed_s, const std::string& topic) const;

    // {"sent":N,"failed":F,"accepted":A,"rejected":R,"elapsed_s":S,
    //  "by_kind":{kind:n,...},"by_expected_reason":{code:n,...}} — counts of delivered messages;
    // every kind and every reason the fleet produces is present, zeros included.
    [[nodiscard]] std::string json(double elapsed_s) const;

  private:
    [[nodiscard]] std::string_view reason_of(std::size_t kind) const;
    bool protobuf_ = false;
    std::vector<std::uint64_t> delivered_;
    std::vector<std::uint64_t> failed_;
};

}  // namespace trackd::fleet
