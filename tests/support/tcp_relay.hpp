// A plain TCP relay on 127.0.0.1 in front of a server (tests only), that can be cut: while cut,
// every open connection is closed and each new one is accepted and closed at once (the client
// sees a reset or an empty answer, as when a server goes away). Used to take the S3 server away
// from trackd for a while without stopping it (moto keeps its objects in memory only).
// Or frozen: connections stay open and new ones are accepted, but nothing is relayed either way
// until it thaws, as with a server process stopped (SIGSTOP) or a network that drops packets.
#pragma once

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/pg_dsn.hpp"

namespace trackd::test {

class TcpRelay {
  public:
    // `receive_buffer` (bytes, 0: the system's): the receive buffer of the relay's client side,
    // so that a frozen relay holds back what a client sends after that much, as a slow or distant
    // server would, instead of the megabytes loopback buffers take.
    TcpRelay(std::string host, unsigned short port, int receive_buffer = 0)
        : host_(std::move(host)), port_(port) {
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        int one = 1;
        ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (receive_buffer > 0) {  // inherited by the accepted sockets
            ::setsockopt(listen_fd_, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
        }
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = 0;
        if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
            ::listen(listen_fd_, 64) != 0) {
            throw std::runtime_error("tcp relay: cannot listen");
        }
        socklen_t len = sizeof a;
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
        listen_port_ = ntohs(a.sin_port);
        acceptor_ = std::thread([this] { accept_loop(); });
    }
    ~TcpRelay() {
        stop_ = true;
        ::shutdown(listen_fd_, SHUT_RDWR);
        acceptor_.join();
        ::close(listen_fd_);
        for (auto& t : pipes_) t.join();
    }
    TcpRelay(const TcpRelay&) = delete;
    TcpRelay& operator=(const TcpRelay&) = delete;

    [[nodiscard]] unsigned short port() const { return listen_port_; }
    // A PostgreSQL DSN (URI form) with its host:port replaced by the relay's.
    [[nodiscard]] std::string through(const std::string& dsn) const {
        return pg_dsn_at(dsn, listen_port_);
    }
    // Cut: open connections end, new ones are closed at once. Restore: relayed again.
    void cut(bool on) { cut_ = on; }
    // Frozen: bytes wait, in both directions, until it thaws.
    void freeze(bool on) { frozen_ = on; }
    // Connections whose client has sent bytes the freeze holds back: a request in flight.
    [[nodiscard]] int holding() const { return holding_.load(); }
    // Waits until holding() reaches `n` (at most a minute, so that a failure ends); returns it.
    int wait_holding(int n) const {
        for (int i = 0; i < 3000 && holding() < n; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return holding();
    }
    [[nodiscard]] int refused() const { return refused_.load(); }
    // Connections accepted and relayed (not refused) so far.
    [[nodiscard]] int accepted() const { return accepted_.load(); }

  private:
    void accept_loop() {
        while (!stop_) {
            pollfd p{listen_fd_, POLLIN, 0};
            if (::poll(&p, 1, 100) <= 0) continue;
            const int client = ::accept(listen_fd_, nullptr, nullptr);
            if (client < 0) continue;
            if (cut_) {
                ++refused_;
                ::close(client);
                continue;
            }
            const int server = ::socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_port = htons(port_);
            ::inet_pton(AF_INET, host_.c_str(), &a.sin_addr);
            if (::connect(server, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
                ::close(server);
                ::close(client);
                continue;
            }
            ++accepted_;
            const std::lock_guard lock(mutex_);
            pipes_.emplace_back([this, client, server] { pipe(client, server); });
        }
    }

    static bool write_all(int fd, const char* data, std::size_t size) {
        while (size > 0) {
            const auto n = ::write(fd, data, size);
            if (n <= 0) return false;
            data += n;
            size -= static_cast<std::size_t>(n);
        }
        return true;
    }

    // Both directions on one thread until either side closes, the relay is cut or stops.
    void pipe(int a, int b) {
        char buf[16384];
        bool holding = false;
        while (!stop_ && !cut_) {
            if (frozen_) {
                // Bytes from the client that the freeze holds back (nothing is read).
                pollfd c{a, POLLIN, 0};
                const bool waiting = ::poll(&c, 1, 0) > 0 && (c.revents & POLLIN) != 0;
                if (waiting != holding) holding_ += waiting ? 1 : -1;
                holding = waiting;
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                continue;
            }
            if (holding) {
                --holding_;
                holding = false;
            }
            pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
            // Frozen while waiting: the bytes that woke it wait too.
            if (::poll(p, 2, 100) <= 0 || frozen_) continue;
            bool done = false;
            for (int i = 0; i < 2 && !done; ++i) {
                if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
                const auto n = ::read(p[i].fd, buf, sizeof buf);
                done = n <= 0 || !write_all(p[1 - i].fd, buf, static_cast<std::size_t>(n));
            }
            if (done) break;
        }
        if (holding) --holding_;
        ::close(a);
        ::close(b);
    }

    std::string host_;
    unsigned short port_;
    int listen_fd_ = -1;
    unsigned short listen_port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<bool> cut_{false};
    std::atomic<bool> frozen_{false};
    std::atomic<int> refused_{0};
    std::atomic<int> accepted_{0};
    std::atomic<int> holding_{0};
    std::mutex mutex_;
    std::vector<std::thread> pipes_;
    std::thread acceptor_;
};

}  // namespace trackd::test
