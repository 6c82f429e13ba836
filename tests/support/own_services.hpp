// Services of a test's own: a PostgreSQL cluster, a Kafka broker or an Iceberg REST catalog
// server started by the project's scripts (scripts/pg.sh, scripts/kafka.sh,
// scripts/iceberg-rest.sh) in a private folder on free ports, for tests that stop, kill or
// restart a service, so that they never disturb the tests that share the local services.
// Each object points the test process's environment (TEST_PG_ADMIN_DSN, TEST_KAFKA_BROKERS and
// the scripts' variables) at its service while it lives.
#pragma once

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include "support/free_port.hpp"
#include "support/process.hpp"

namespace trackd::test {

inline std::string temp_dir(const std::string& tag) {
    const auto dir = ::testing::TempDir() + "trackd-own-" + tag + "-" + std::to_string(getpid());
    run_command("rm -rf " + shell_quote(dir) + " && mkdir -p " + shell_quote(dir));
    return dir;
}

// Sets an environment variable for the lifetime of the object (the test's own process and the
// scripts and programs it starts read it).
class ScopedEnv {
  public:
    ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
        if (const char* old = std::getenv(name_.c_str())) old_ = old;
        ::setenv(name_.c_str(), value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (old_) {
            ::setenv(name_.c_str(), old_->c_str(), 1);
        } else {
            ::unsetenv(name_.c_str());
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

  private:
    std::string name_;
    std::optional<std::string> old_;
};

// A PostgreSQL cluster of the test's own (scripts/pg.sh in a private folder, on a free port);
// the test databases of this process are created on it while it lives.
class OwnPostgres {
  public:
    explicit OwnPostgres(const std::string& tag)
        : dir_(temp_dir(tag + "-pg")),
          port_(free_port()),
          admin_("TEST_PG_ADMIN_DSN",
                 "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres") {
        const auto r = ctl("start");
        if (r.exit_code != 0) throw std::runtime_error("pg.sh start failed:\n" + r.output);
    }
    ~OwnPostgres() {
        ctl("stop");
        run_command("rm -rf " + shell_quote(dir_));
    }
    OwnPostgres(const OwnPostgres&) = delete;
    OwnPostgres& operator=(const OwnPostgres&) = delete;

    CommandResult ctl(const std::string& args) const {
        return run_command("TRACKD_LOCAL_DIR=" + shell_quote(dir_) +
                           " LOCAL_PG_PORT=" + std::to_string(port_) + " " +
                           std::string(TRACKD_SOURCE_DIR) + "/scripts/pg.sh " + args);
    }

  private:
    std::string dir_;
    unsigned short port_;
    ScopedEnv admin_;
};

// A Kafka broker of the test's own (scripts/kafka.sh in a private folder, on free ports); the
// harness's topics and trackd-fleet use it while it lives.
class OwnKafka {
  public:
    explicit OwnKafka(const std::string& tag)
        : dir_(temp_dir(tag + "-kafka")),
          port_(free_port()),
          controller_port_(free_port()),
          port_env_("LOCAL_KAFKA_PORT", std::to_string(port_)),
          controller_env_("LOCAL_KAFKA_CONTROLLER_PORT", std::to_string(controller_port_)),
          dir_env_("TRACKD_LOCAL_DIR", dir_),
          brokers_env_("TEST_KAFKA_BROKERS", "127.0.0.1:" + std::to_string(port_)) {
        const auto r = ctl("start");
        if (r.exit_code != 0) throw std::runtime_error("kafka.sh start failed:\n" + r.output);
    }
    ~OwnKafka() {
        ctl("stop");
        run_command("rm -rf " + shell_quote(dir_));
    }
    OwnKafka(const OwnKafka&) = delete;
    OwnKafka& operator=(const OwnKafka&) = delete;

    // The environment above is this process's own, so the script finds this broker.
    static CommandResult ctl(const std::string& args) {
        return run_command(std::string(TRACKD_SOURCE_DIR) + "/scripts/kafka.sh " + args);
    }

  private:
    std::string dir_;
    unsigned short port_;
    unsigned short controller_port_;
    ScopedEnv port_env_;
    ScopedEnv controller_env_;
    ScopedEnv dir_env_;
    ScopedEnv brokers_env_;
};

// Apache Iceberg's REST catalog server of the test's own (scripts/iceberg-rest.sh in a private
// folder, on a free port), its catalog in a SQLite file there, so that it keeps its tables when
// it is killed and started again. Tables are created with the test's own location.
class OwnIcebergRest {
  public:
    // `env`: more of the server's environment (TRACKD_TEST_REST_PAUSE_ARM, CATALOG_*).
    explicit OwnIcebergRest(const std::string& tag, std::map<std::string, std::string> env = {})
        : dir_(temp_dir(tag + "-rest")), port_(free_port()), env_(std::move(env)) {
        start();
    }
    ~OwnIcebergRest() {
        ctl("stop");
        run_command("rm -rf " + shell_quote(dir_));
    }
    OwnIcebergRest(const OwnIcebergRest&) = delete;
    OwnIcebergRest& operator=(const OwnIcebergRest&) = delete;

    [[nodiscard]] std::string uri() const { return "http://127.0.0.1:" + std::to_string(port_); }
    [[nodiscard]] std::string log() const { return dir_ + "/logs/iceberg-rest.log"; }

    void start() const {
        const auto r = ctl("start");
        if (r.exit_code != 0)
            throw std::runtime_error("iceberg-rest.sh start failed:\n" + r.output);
    }

    // SIGKILL, as a crash or the OOM killer would, and waits until it is gone.
    void kill() const {
        std::ifstream in(dir_ + "/iceberg-rest/server.pid");
        pid_t pid = 0;
        in >> pid;
        if (pid <= 0 || ::kill(pid, SIGKILL) != 0)
            throw std::runtime_error("no REST server to kill");
        // Gone, or a zombie (an empty command line) until its parent reaps it.
        const auto cmdline = "/proc/" + std::to_string(pid) + "/cmdline";
        for (int i = 0; i < 200; ++i) {
            std::ifstream c(cmdline);
            if (!c || c.peek() == std::ifstream::traits_type::eof()) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        throw std::runtime_error("the REST server outlived SIGKILL");
    }

    CommandResult ctl(const std::string& args) const {
        std::string env;
        for (const auto& [k, v] : env_) env += k + "=" + shell_quote(v) + " ";
        return run_command(env + "TRACKD_LOCAL_DIR=" + shell_quote(dir_) +
                           " LOCAL_ICEBERG_REST_PORT=" + std::to_string(port_) + " " +
                           std::string(TRACKD_SOURCE_DIR) + "/scripts/iceberg-rest.sh " + args);
    }

  private:
    std::string dir_;
    unsigned short port_;
    std::map<std::string, std::string> env_;
};

}  // namespace trackd::test
