#include "trackd/batch/batch.hpp"

#include <algorithm>
#include <string_view>
#include <unordered_map>

namespace trackd::batch {

void Batch::drop_partition(std::int32_t partition) {
    if (next_offsets.erase(partition) == 0) return;
    std::erase_if(rows, [partition](const Row& r) { return r.partition == partition; });
    std::erase_if(dead_letters,
                  [partition](const DeadLetter& d) { return d.partition == partition; });
    // `bytes` is an upper bound for in-flight accounting; the caller releases the whole batch.
}

void BatchBuilder::touch(std::int32_t partition, std::int64_t offset, std::size_t bytes,
                         Clock::time_point now) {
    if (batch_.empty()) first_added_ = now;
    batch_.next_offsets[partition] = offset + 1;
    batch_.bytes += bytes;
}

void BatchBuilder::add_row(Row row, std::size_t payload_bytes, Clock::time_point now) {
    touch(row.partition, row.offset, payload_bytes, now);
    batch_.rows.push_back(std::move(row));
}

void BatchBuilder::add_dead_letter(DeadLetter dead, Clock::time_point now) {
    touch(dead.partition, dead.offset, dead.payload.size(), now);
    batch_.dead_letters.push_back(std::move(dead));
}

bool BatchBuilder::should_flush(Clock::time_point now) const {
    if (batch_.empty()) return false;
    return batch_.messages() >= limits_.max_rows || batch_.bytes >= limits_.max_bytes ||
           now - first_added_ >= limits_.max_age;
}

bool BatchBuilder::may_flush_early(Clock::time_point now) const {
    return !batch_.empty() && now - first_added_ >= std::min(limits_.min_age, limits_.max_age);
}

Batch BatchBuilder::take() {
    Batch out = std::move(batch_);
    batch_ = Batch{};
    batch_.rows.reserve(out.rows.size());
    return out;
}

std::vector<std::size_t> latest_per_vehicle(const Batch& batch) {
    std::unordered_map<std::string_view, std::size_t> best;
    best.reserve(batch.rows.size());
    for (std::size_t i = 0; i < batch.rows.size(); ++i) {
        const auto& row = batch.rows[i];
        auto [it, inserted] = best.try_emplace(row.position.vehicle_id, i);
        if (inserted) continue;
        const auto& current = batch.rows[it->second];
        // Newer timestamp wins; on a tie, the later Kafka message (same vehicle, same
        // partition, since messages are keyed by vehicle) wins.
        if (row.position.recorded_at_us > current.position.recorded_at_us ||
            (row.position.recorded_at_us == current.position.recorded_at_us &&
             row.offset > current.offset)) {
            it->second = i;
        }
    }
    std::vector<std::size_t> out;
    out.reserve(best.size());
    for (const auto& [id, index] : best) out.push_back(index);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace trackd::batch
