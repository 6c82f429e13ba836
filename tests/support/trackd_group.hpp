// Several trackd instances in one consumer group, by name, each with its own log file (kept
// across restarts): start, SIGKILL, restart with the same settings (the same kafka.instance_id
// for a static member), freeze with SIGSTOP and thaw, and stop them all cleanly. Plus the
// kill-and-freeze loop of the fault suite.
#pragma once

#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/ingest_harness.hpp"
#include "support/log_wait.hpp"

namespace trackd::test {

class TrackdGroup {
  public:
    // `env`: settings every instance gets on top of the harness's.
    TrackdGroup(IngestHarness& h, std::map<std::string, std::string> env)
        : h_(h), env_(std::move(env)) {}

    // Starts instance `name` (log: <dir>/trackd-<name>.log). `static_member`: it joins with
    // kafka.instance_id = inst-<name>. `extra`: its own settings, kept for restarts.
    void start(const std::string& name, bool static_member,
               std::map<std::string, std::string> extra = {}) {
        auto env = env_;
        for (auto& [k, v] : extra) env[k] = v;
        if (static_member) env["TRACKD_KAFKA_INSTANCE_ID"] = "inst-" + name;
        auto& i = instances_[name];
        i.env = std::move(env);
        i.process = h_.start_trackd(i.env, log(name));
        i.frozen = false;
    }
    // Starts it again with the same settings (same instance id); it must not be running.
    void restart(const std::string& name) {
        auto& i = instances_.at(name);
        i.process = h_.start_trackd(i.env, log(name));
        i.frozen = false;
    }
    void sigkill(const std::string& name) {
        auto& p = *instances_.at(name).process;
        p.kill(SIGKILL);
        p.wait();
        instances_.at(name).frozen = false;
    }
    void freeze(const std::string& name) {
        instances_.at(name).process->kill(SIGSTOP);
        instances_.at(name).frozen = true;
    }
    void thaw(const std::string& name) {
        instances_.at(name).process->kill(SIGCONT);
        instances_.at(name).frozen = false;
    }
    [[nodiscard]] bool running(const std::string& name) {
        return instances_.at(name).process->running();
    }
    ChildProcess& process(const std::string& name) { return *instances_.at(name).process; }

    [[nodiscard]] std::string log(const std::string& name) const {
        return h_.dir() + "/trackd-" + name + ".log";
    }
    [[nodiscard]] std::size_t count(const std::string& name, const std::string& needle) const {
        return count_in_file(log(name), needle);
    }
    // Every instance's log (the tail of each), headed by its name: what a failure prints.
    [[nodiscard]] std::string logs() const {
        std::string out;
        for (const auto& [n, i] : instances_) {
            out += "==== trackd-" + n + ".log\n" + IngestHarness::read_file(log(n));
        }
        return out;
    }
    [[nodiscard]] std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (const auto& [n, i] : instances_) out.push_back(n);
        return out;
    }

    // Thaws the frozen, then SIGTERM to every running instance: each must exit 0 within 30 s.
    void stop_all() {
        for (auto& [name, i] : instances_) {
            if (i.frozen) thaw(name);
        }
        for (auto& [name, i] : instances_) {
            if (!i.process->running()) continue;
            i.process->kill(SIGTERM);
            EXPECT_TRUE(i.process->wait_for(std::chrono::seconds(30))) << name;
            EXPECT_EQ(i.process->exit_code(), 0) << name << "\n"
                                                 << IngestHarness::read_file(log(name));
        }
    }

  private:
    struct Instance {
        std::map<std::string, std::string> env;
        std::unique_ptr<ChildProcess> process;
        bool frozen = false;
    };
    IngestHarness& h_;
    std::map<std::string, std::string> env_;
    std::map<std::string, Instance> instances_;
};

// The kill-and-freeze loop: rounds of "freeze one instance for `freeze_for`, meanwhile SIGKILL
// another and restart it at once; thaw; then SIGKILL the third, restart it after
// `down_for`", rotating the roles each round, until `duration` has passed. Every action is
// printed with its time, so that a stall can be matched to what caused it.
struct ChaosPlan {
    std::chrono::seconds duration{60};
    std::chrono::seconds freeze_for{10};
    std::chrono::seconds down_for{2};
    std::chrono::seconds settle{3};  // after each round
};

inline int run_chaos(TrackdGroup& group, const ChaosPlan& plan) {
    using Clock = std::chrono::steady_clock;
    const auto names = group.names();
    const auto start = Clock::now();
    auto say = [&](const std::string& what) {
        std::printf("[ chaos    ] %5.1f s %s\n",
                    std::chrono::duration<double>(Clock::now() - start).count(), what.c_str());
        std::fflush(stdout);
    };
    auto sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
    int round = 0;
    while (Clock::now() - start < plan.duration) {
        const auto& frozen = names[round % names.size()];
        const auto& killed = names[(round + 1) % names.size()];
        const auto& bounced = names[(round + 2) % names.size()];
        say("SIGSTOP " + frozen);
        group.freeze(frozen);
        sleep(std::chrono::seconds(2));
        say("SIGKILL " + killed + ", restarted at once with the same instance id");
        group.sigkill(killed);
        group.restart(killed);
        sleep(plan.freeze_for - std::chrono::seconds(2));
        say("SIGCONT " + frozen);
        group.thaw(frozen);
        sleep(plan.settle);
        say("SIGKILL " + bounced + ", restarted in " + std::to_string(plan.down_for.count()) +
            " s");
        group.sigkill(bounced);
        sleep(plan.down_for);
        group.restart(bounced);
        sleep(plan.settle);
        ++round;
    }
    say("chaos over");
    return round;
}

}  // namespace trackd::test
