// Starts a program in the background with extra environment variables, its output going to a
// log file, and stops it with a chosen signal (tests only).
#pragma once

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace trackd::test {

class ChildProcess {
  public:
    ChildProcess(const std::vector<std::string>& argv,
                 const std::map<std::string, std::string>& env, const std::string& log_path) {
        std::vector<std::string> env_strings;
        for (char** e = environ; *e != nullptr; ++e) {
            const std::string entry(*e);
            if (env.count(entry.substr(0, entry.find('='))) == 0) env_strings.push_back(entry);
        }
        for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
        std::vector<char*> envp;
        for (auto& s : env_strings) envp.push_back(s.data());
        envp.push_back(nullptr);
        std::vector<std::string> args = argv;
        std::vector<char*> argp;
        for (auto& s : args) argp.push_back(s.data());
        argp.push_back(nullptr);

        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(),
                                         O_WRONLY | O_CREAT | O_APPEND, 0644);
        posix_spawn_file_actions_adddup2(&actions, 1, 2);
        const int rc = posix_spawn(&pid_, argp[0], &actions, nullptr, argp.data(), envp.data());
        posix_spawn_file_actions_destroy(&actions);
        if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
    }
    ~ChildProcess() {
        if (running()) {
            ::kill(pid_, SIGKILL);
            wait();
        }
    }
    ChildProcess(const ChildProcess&) = delete;
    ChildProcess& operator=(const ChildProcess&) = delete;

    [[nodiscard]] bool running() {
        if (exited_) return false;
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            record(status);
            return false;
        }
        return true;
    }
    void kill(int sig) { ::kill(pid_, sig); }
    // Waits for exit; returns the exit code, or 128+signal.
    int wait() {
        if (!exited_) {
            int status = 0;
            waitpid(pid_, &status, 0);
            record(status);
        }
        return code_;
    }
    // Waits up to `timeout`; returns false if it is still running.
    bool wait_for(std::chrono::milliseconds timeout) {
        const auto until = std::chrono::steady_clock::now() + timeout;
        while (running()) {
            if (std::chrono::steady_clock::now() >= until) return false;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return true;
    }
    [[nodiscard]] int exit_code() const { return code_; }
    [[nodiscard]] pid_t pid() const { return pid_; }

  private:
    void record(int status) {
        exited_ = true;
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }

    pid_t pid_ = -1;
    bool exited_ = false;
    int code_ = -1;
};

}  // namespace trackd::test
