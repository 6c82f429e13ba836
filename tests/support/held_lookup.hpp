// A host name whose lookup does not end until the test says so (tests only), as behind a DNS
// server that does not answer. held_lookup.cpp defines getaddrinfo() in the test executable, so
// that every lookup in the process comes there first, libpq's included; a lookup of the armed
// name waits on the thread that asked, until release(), and then resolves as 127.0.0.1. Every
// other name goes on to the C library's getaddrinfo(). One HeldLookup at a time; it releases
// and disarms when it ends. A held lookup gives up after a minute, so that a failing test ends.
#pragma once

#include <chrono>
#include <string>

namespace trackd::test {

class HeldLookup {
  public:
    explicit HeldLookup(std::string name);
    ~HeldLookup();
    HeldLookup(const HeldLookup&) = delete;
    HeldLookup& operator=(const HeldLookup&) = delete;

    // Waits until `n` lookups of the name are held (at most `timeout`); returns how many are.
    int wait_held(int n, std::chrono::seconds timeout) const;
    // Lets the held lookups (and every later one) answer.
    void release();
};

}  // namespace trackd::test
