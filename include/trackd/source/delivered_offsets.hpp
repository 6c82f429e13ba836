// Per partition, the offset after the last message handed on since the partition was
// assigned. librdkafka 2.0 can fetch a partition again from an earlier position after a
// cooperative rebalance (its issue 4686, fixed in 2.4: a resume of a partition that was not
// paused moves its fetch position back); KafkaSource drops what it has handed on before, so
// that no message reaches the pipeline twice within one assignment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trackd::source {

class DeliveredOffsets {
  public:
    enum class Seen {
        first,       // not handed on before: the partition's position moves past it
        again,       // handed on before in this assignment
        again_first  // the same, and the first of a run of such (what the log says once)
    };

    Seen see(std::int32_t partition, std::int64_t offset) {
        if (partition < 0) return Seen::first;
        const auto index = static_cast<std::size_t>(partition);
        if (index >= partitions_.size()) partitions_.resize(index + 1);
        auto& p = partitions_[index];
        if (offset >= p.next) {
            p.next = offset + 1;
            p.dropping = false;
            return Seen::first;
        }
        const bool first_of_run = !p.dropping;
        p.dropping = true;
        return first_of_run ? Seen::again_first : Seen::again;
    }

    // The offset after the last message handed on (-1: none since the assignment).
    [[nodiscard]] std::int64_t next(std::int32_t partition) const {
        const auto index = static_cast<std::size_t>(partition);
        return partition >= 0 && index < partitions_.size() ? partitions_[index].next : -1;
    }

    // Assigned anew or revoked: whatever it reads next is new.
    void forget(const std::vector<std::int32_t>& partitions) {
        for (const auto p : partitions) {
            if (p >= 0 && static_cast<std::size_t>(p) < partitions_.size()) {
                partitions_[static_cast<std::size_t>(p)] = Partition{};
            }
        }
    }

  private:
    struct Partition {
        std::int64_t next = -1;
        bool dropping = false;
    };
    std::vector<Partition> partitions_;  // by partition number
};

}  // namespace trackd::source
