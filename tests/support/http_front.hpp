// tests/integration/rest_proxy.py started by a test: an HTTP front of the test's own in front of
// a real server (the Iceberg REST catalog server, the schema registry, the S3 server), which checks
// tokens, loses, fails or holds commits, throttles or leaves S3 uploads unanswered, and with a
// certificate speaks https (support/test_ca.hpp).
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "support/child_process.hpp"
#include "support/free_port.hpp"
#include "support/log_wait.hpp"

namespace trackd::test {

struct HttpFront {
    std::string log;
    std::string uri;  // http://127.0.0.1:<port>, or https://localhost:<port> with a certificate
    std::unique_ptr<ChildProcess> process;

    HttpFront(const std::string& tag, const std::string& upstream,
              const std::vector<std::string>& options) {
        const auto port = free_port();
        log = ::testing::TempDir() + tag + "-front-" + std::to_string(getpid()) + ".log";
        std::filesystem::remove(log);
        std::vector<std::string> argv = {
            std::string(TRACKD_SOURCE_DIR) + "/.venv/bin/python",
            std::string(TRACKD_SOURCE_DIR) + "/tests/integration/rest_proxy.py",
            "--listen",
            std::to_string(port),
            "--upstream",
            upstream};
        argv.insert(argv.end(), options.begin(), options.end());
        bool tls = false;
        for (const auto& o : options) tls = tls || o == "--tls-cert";
        process = std::make_unique<ChildProcess>(argv, std::map<std::string, std::string>{}, log);
        uri = (tls ? "https://localhost:" : "http://127.0.0.1:") + std::to_string(port);
        EXPECT_TRUE(wait_for("listening on")) << text();
    }
    [[nodiscard]] std::string text() const {
        std::ifstream in(log);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }
    // Lines of its log that contain `what`.
    [[nodiscard]] std::size_t count(const std::string& what) const {
        return count_in_file(log, what);
    }
    [[nodiscard]] bool wait_for(const std::string& what,
                                std::chrono::seconds timeout = std::chrono::seconds(60)) const {
        return wait_until(timeout, [&] { return count(what) > 0; });
    }
};

}  // namespace trackd::test
