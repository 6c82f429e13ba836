#include "support/held_lookup.hpp"

#include <condition_variable>
#include <mutex>

#include <dlfcn.h>
#include <netdb.h>

namespace trackd::test {
namespace {

struct State {
    std::mutex mutex;
    std::condition_variable changed;
    std::string name;  // armed when not empty
    bool released = false;
    int held = 0;
};

// Never destroyed: a lookup may come from a thread still running while the process exits.
State& state() {
    static auto* s = new State;
    return *s;
}

// True when `node` is the armed name: returns once it is released (or after a minute).
bool hold(const char* node) {
    auto& s = state();
    std::unique_lock lock(s.mutex);
    if (s.name.empty() || s.name != node) return false;
    ++s.held;
    s.changed.notify_all();
    s.changed.wait_for(lock, std::chrono::minutes(1), [&] { return s.released; });
    --s.held;
    return true;
}

}  // namespace

HeldLookup::HeldLookup(std::string name) {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    s.name = std::move(name);
    s.released = false;
}

HeldLookup::~HeldLookup() {
    release();
    auto& s = state();
    std::unique_lock lock(s.mutex);
    s.changed.wait(lock, [&] { return s.held == 0; });
    s.name.clear();
}

int HeldLookup::wait_held(int n, std::chrono::seconds timeout) const {
    auto& s = state();
    std::unique_lock lock(s.mutex);
    s.changed.wait_for(lock, timeout, [&] { return s.held >= n; });
    return s.held;
}

void HeldLookup::release() {
    auto& s = state();
    const std::lock_guard lock(s.mutex);
    s.released = true;
    s.changed.notify_all();
}

}  // namespace trackd::test

// Interposes the C library's: the executable's definition comes first for every library.
extern "C" int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                           struct addrinfo** res) {
    using Real = int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
    static const auto real = reinterpret_cast<Real>(::dlsym(RTLD_NEXT, "getaddrinfo"));
    if (node != nullptr && trackd::test::hold(node)) node = "127.0.0.1";
    return real(node, service, hints, res);
}
