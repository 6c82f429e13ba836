// A hash table from strings to values, for the per-message lookups of the ingest's hot path
// (each vehicle's latest accepted position).
//
// std::unordered_map allocates a node per entry and chains them, so a lookup follows two or
// three pointers to memory the previous message did not touch: 12% of decode + validate
// (bench/decode.sh, docs/benchmarks.md). Here the entries sit in one dense vector and an
// open-addressing index (linear probing, at most 3/4 full) holds, per slot, 32 bits of the
// key's hash and the entry's position. A lookup reads the index, which stays in the cache,
// and then one entry.
//
// Pointers returned by find() and insert_or_assign() stay valid until the next insertion or
// erase_if(). V must be default-constructible and movable.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trackd::core {

template <class V>
class StringTable {
  public:
    struct Entry {
        std::string key;
        V value{};
    };

    std::size_t size() const noexcept { return entries_.size(); }
    bool empty() const noexcept { return entries_.empty(); }

    // Room for n entries without growing.
    void reserve(std::size_t n) {
        entries_.reserve(n);
        std::size_t capacity = 16;
        while (capacity * 3 < n * 4) capacity *= 2;
        if (capacity > slots_.size()) rebuild(capacity);
    }

    V* find(std::string_view key) noexcept {
        if (entries_.empty()) return nullptr;
        const std::uint64_t h = hash_of(key);
        const std::uint32_t tag = tag_of(h);
        for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
            const Slot s = slots_[i];
            if (s.tag == 0) return nullptr;
            if (s.tag == tag && entries_[s.index].key == key) return &entries_[s.index].value;
        }
    }
    const V* find(std::string_view key) const noexcept {
        return const_cast<StringTable*>(this)->find(key);
    }

    V& insert_or_assign(std::string_view key, V value) {
        if ((entries_.size() + 1) * 4 > slots_.size() * 3)
            rebuild(std::max<std::size_t>(16, slots_.size() * 2));
        const std::uint64_t h = hash_of(key);
        const std::uint32_t tag = tag_of(h);
        std::size_t i = h & mask_;
        for (; slots_[i].tag != 0; i = (i + 1) & mask_) {
            const Slot s = slots_[i];
            if (s.tag == tag && entries_[s.index].key == key) {
                return entries_[s.index].value = std::move(value);
            }
        }
        slots_[i] = Slot{tag, static_cast<std::uint32_t>(entries_.size())};
        entries_.push_back(Entry{std::string(key), std::move(value)});
        return entries_.back().value;
    }

    // Removes the entries for which pred(key, value) is true; returns how many.
    template <class Pred>
    std::size_t erase_if(Pred pred) {
        std::vector<Entry> kept;
        kept.reserve(entries_.size());
        for (auto& e : entries_) {
            if (!pred(std::as_const(e.key), std::as_const(e.value))) kept.push_back(std::move(e));
        }
        const std::size_t erased = entries_.size() - kept.size();
        entries_ = std::move(kept);
        rebuild(slots_.size());
        return erased;
    }

  private:
    struct Slot {
        std::uint32_t tag = 0;  // 0: empty
        std::uint32_t index = 0;
    };

    static std::uint64_t hash_of(std::string_view key) noexcept {
        return std::hash<std::string_view>{}(key);
    }
    // The hash's upper half, never 0 (0 marks an empty slot); the lower bits pick the slot.
    static std::uint32_t tag_of(std::uint64_t h) noexcept {
        return static_cast<std::uint32_t>(h >> 32) | 1U;
    }

    // A fresh index of `capacity` slots (a power of two) over the entries.
    void rebuild(std::size_t capacity) {
        if (capacity == 0) {
            slots_.clear();
            mask_ = 0;
            return;
        }
        slots_.assign(capacity, Slot{});
        mask_ = capacity - 1;
        for (std::size_t e = 0; e < entries_.size(); ++e) {
            const std::uint64_t h = hash_of(entries_[e].key);
            std::size_t i = h & mask_;
            while (slots_[i].tag != 0) i = (i + 1) & mask_;
            slots_[i] = Slot{tag_of(h), static_cast<std::uint32_t>(e)};
        }
    }

    std::vector<Entry> entries_;
    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
};

}  // namespace trackd::core
