#include "trackd/core/string_table.hpp"

#include <random>
#include <string>
#include <unordered_map>

#include <gtest/gtest.h>

namespace {

using trackd::core::StringTable;

TEST(StringTable, FindsWhatWasInsertedAndNothingElse) {
    StringTable<int> t;
    EXPECT_EQ(t.find("veh-1"), nullptr);
    t.insert_or_assign("veh-1", 1);
    t.insert_or_assign("veh-2", 2);
    t.insert_or_assign("", 3);  // the empty key is a key like any other
    ASSERT_NE(t.find("veh-1"), nullptr);
    EXPECT_EQ(*t.find("veh-1"), 1);
    EXPECT_EQ(*t.find("veh-2"), 2);
    EXPECT_EQ(*t.find(""), 3);
    EXPECT_EQ(t.find("veh-3"), nullptr);
    EXPECT_EQ(t.find("veh-"), nullptr);
    EXPECT_EQ(t.size(), 3U);

    EXPECT_EQ(t.insert_or_assign("veh-1", 10), 10);  // an existing key is assigned
    EXPECT_EQ(*t.find("veh-1"), 10);
    EXPECT_EQ(t.size(), 3U);
    *t.find("veh-2") = 20;  // through the pointer
    EXPECT_EQ(*t.find("veh-2"), 20);
}

TEST(StringTable, EraseIfRemovesExactlyTheMatchingEntries) {
    StringTable<int> t;
    for (int i = 0; i < 1000; ++i) t.insert_or_assign("veh-" + std::to_string(i), i);
    EXPECT_EQ(t.erase_if([](const std::string&, int v) { return v % 3 == 0; }), 334U);
    EXPECT_EQ(t.size(), 666U);
    for (int i = 0; i < 1000; ++i) {
        const int* v = t.find("veh-" + std::to_string(i));
        if (i % 3 == 0) {
            EXPECT_EQ(v, nullptr) << i;
        } else {
            ASSERT_NE(v, nullptr) << i;
            EXPECT_EQ(*v, i);
        }
    }
    EXPECT_EQ(t.erase_if([](const std::string&, int) { return true; }), 666U);
    EXPECT_TRUE(t.empty());
    EXPECT_EQ(t.find("veh-1"), nullptr);
    t.insert_or_assign("veh-1", 7);
    EXPECT_EQ(*t.find("veh-1"), 7);
}

// The same random inserts, assignments, lookups and erasures on std::unordered_map and on the
// table, through many growths: the answers agree.
TEST(StringTable, AgreesWithUnorderedMapUnderRandomOperations) {
    std::mt19937_64 rng(42);
    std::unordered_map<std::string, std::uint64_t> want;
    StringTable<std::uint64_t> got;
    for (int round = 0; round < 200'000; ++round) {
        const std::string key = "v" + std::to_string(rng() % 50'000);
        switch (rng() % 8) {
            case 0:
            case 1:
            case 2: {
                const std::uint64_t value = rng();
                want[key] = value;
                got.insert_or_assign(key, value);
                break;
            }
            case 7:
                if (round % 1000 == 7) {  // a rebalance now and then
                    const std::uint64_t r = rng() % 4;
                    const auto pred = [r](const std::string&, std::uint64_t v) {
                        return v % 4 == r;
                    };
                    std::size_t erased = 0;
                    for (auto it = want.begin(); it != want.end();) {
                        if (pred(it->first, it->second)) {
                            it = want.erase(it);
                            ++erased;
                        } else {
                            ++it;
                        }
                    }
                    ASSERT_EQ(got.erase_if(pred), erased) << round;
                }
                break;
            default: {
                const auto it = want.find(key);
                const std::uint64_t* v = got.find(key);
                if (it == want.end()) {
                    ASSERT_EQ(v, nullptr) << round << " " << key;
                } else {
                    ASSERT_NE(v, nullptr) << round << " " << key;
                    ASSERT_EQ(*v, it->second) << round << " " << key;
                }
            }
        }
        ASSERT_EQ(got.size(), want.size()) << round;
    }
    for (const auto& [k, v] : want) {
        ASSERT_NE(got.find(k), nullptr) << k;
        EXPECT_EQ(*got.find(k), v);
    }
}

}  // namespace
