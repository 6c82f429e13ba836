// Runs a shell command and captures its combined output and exit status (tests only).
#pragma once

#include <array>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <sys/wait.h>

namespace trackd::test {

struct CommandResult {
    int exit_code = -1;
    std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
    CommandResult r;
    FILE* pipe = popen((command + " 2>&1").c_str(), "r");
    if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
    std::array<char, 4096> buf{};
    size_t n = 0;
    while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

// Single-quotes a value for the shell.
inline std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (const char c : s) {
        if (c == '\'') {
            out += "'\\''";
        } else {
            out += c;
        }
    }
    return out + "'";
}

inline std::string trackd_binary() { return std::string(TRACKD_BINARY_DIR) + "/server/trackd"; }

}  // namespace trackd::test
