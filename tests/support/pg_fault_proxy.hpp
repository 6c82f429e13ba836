// A TCP proxy in front of PostgreSQL that can swallow the reply to a COMMIT (tests only).
//
// It listens on 127.0.0.1 (a free port) and relays each client connection to the real server,
// framing the PostgreSQL wire protocol in both directions: it answers SSLRequest and
// GSSENCRequest itself with 'N' (libpq with sslmode=prefer then goes on in clear), forwards the
// StartupMessage (remembering its application_name), then splits every later message into
// type + int32 length + body.
//
// Armed with cut_commit_replies(n, prefix), on connections whose application_name starts with
// prefix it forwards the next n COMMITs (simple Query "COMMIT"/"END", or an Execute of a
// statement parsed from such a text), waits for the server's CommandComplete "COMMIT", and
// instead of forwarding it closes both sockets: the server has committed, the client never
// hears so. A COMMIT answered otherwise (an aborted transaction's "ROLLBACK", an error) is not
// counted and its cut stays armed.
#pragma once

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "support/pg_dsn.hpp"

namespace trackd::test {

class PgFaultProxy {
  public:
    PgFaultProxy(std::string target_host, unsigned short target_port)
        : target_host_(std::move(target_host)), target_port_(target_port) {
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (listen_fd_ < 0) throw std::runtime_error("pg fault proxy: socket() failed");
        const int one = 1;
        ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = 0;
        socklen_t len = sizeof addr;
        if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(listen_fd_, 128) != 0 ||
            ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            ::close(listen_fd_);
            throw std::runtime_error("pg fault proxy: cannot listen on 127.0.0.1");
        }
        port_ = ntohs(addr.sin_port);
        acceptor_ = std::thread([this] { accept_loop(); });
    }
    ~PgFaultProxy() {
        stop_ = true;
        if (acceptor_.joinable()) acceptor_.join();
        ::close(listen_fd_);
        std::vector<std::thread> threads;
        {
            const std::lock_guard lock(mutex_);
            threads.swap(threads_);
        }
        for (auto& t : threads) t.join();
    }
    PgFaultProxy(const PgFaultProxy&) = delete;
    PgFaultProxy& operator=(const PgFaultProxy&) = delete;

    [[nodiscard]] unsigned short port() const { return port_; }

    // The DSN (URI form postgresql://user@host:port/db?...) with host:port replaced by the
    // proxy's.
    [[nodiscard]] std::string through(const std::string& dsn) const {
        return pg_dsn_at(dsn, port_);
    }

    // Cut the reply of the next n COMMITs on connections whose application_name starts with
    // prefix (replaces what was armed before).
    void cut_commit_replies(int n, std::string application_name_prefix = "") {
        const std::lock_guard lock(mutex_);
        armed_ = std::max(n, 0);
        prefix_ = std::move(application_name_prefix);
        ++generation_;
    }
    [[nodiscard]] int cuts() const { return cuts_.load(); }                // replies swallowed
    [[nodiscard]] int connections() const { return connections_.load(); }  // clients accepted

  private:
    static constexpr std::uint32_t kSslRequest = 80877103;
    static constexpr std::uint32_t kGssEncRequest = 80877104;
    static constexpr std::uint32_t kCancelRequest = 80877102;
    static constexpr std::size_t kHighWater = std::size_t{4} << 20;  // stop reading the source
    static constexpr int kPollMs = 100;

    // A cut taken from the armed count for one COMMIT, given back if no "COMMIT" reply came.
    struct Claim {
        std::uint64_t generation = 0;
    };
    // What one ReadyForQuery will close: a simple Query, or the extended messages up to a Sync.
    struct Unit {
        std::vector<Claim> claims;
    };

    class Fd {
      public:
        explicit Fd(int fd = -1) : fd_(fd) {}
        ~Fd() { reset(); }
        Fd(const Fd&) = delete;
        Fd& operator=(const Fd&) = delete;
        [[nodiscard]] int get() const { return fd_; }
        void reset() {
            if (fd_ >= 0) ::close(fd_);
            fd_ = -1;
        }

      private:
        int fd_;
    };

    static std::uint32_t be32(const char* p) {
        std::uint32_t v = 0;
        std::memcpy(&v, p, 4);
        return ntohl(v);
    }

    // Query text is COMMIT or END (optionally WORK/TRANSACTION), any case, optional ';' and
    // whitespace.
    static bool is_commit_text(std::string_view sql) {
        std::string words;
        for (const char c : sql) {
            if (c == ';') continue;
            words += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        std::vector<std::string> parts;
        std::string part;
        for (const char c : words) {
            if (std::isspace(static_cast<unsigned char>(c)) != 0) {
                if (!part.empty()) parts.push_back(std::move(part));
                part.clear();
            } else {
                part += c;
            }
        }
        if (!part.empty()) parts.push_back(std::move(part));
        if (parts.empty() || parts.size() > 2) return false;
        if (parts[0] != "commit" && parts[0] != "end") return false;
        return parts.size() == 1 || parts[1] == "work" || parts[1] == "transaction";
    }

    // A C string at offset `pos` of `body`; advances pos past its NUL.
    static std::string cstring(const std::string& body, std::size_t& pos) {
        const auto nul = body.find('\0', pos);
        if (nul == std::string::npos) {
            pos = body.size();
            return {};
        }
        std::string s = body.substr(pos, nul - pos);
        pos = nul + 1;
        return s;
    }

    bool claim(const std::string& application_name, Claim& out) {
        const std::lock_guard lock(mutex_);
        if (armed_ <= 0 || application_name.rfind(prefix_, 0) != 0) return false;
        --armed_;
        out.generation = generation_;
        return true;
    }
    void release(const Claim& c) {
        const std::lock_guard lock(mutex_);
        if (c.generation == generation_) ++armed_;
    }

    void accept_loop() {
        while (!stop_) {
            pollfd p{listen_fd_, POLLIN, 0};
            if (::poll(&p, 1, kPollMs) <= 0) continue;
            const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) continue;
            ++connections_;
            const std::lock_guard lock(mutex_);
            threads_.emplace_back([this, fd] { serve(fd); });
        }
    }

    // Reads exactly n bytes (blocking socket, polled so that stop_ is seen).
    bool read_exact(int fd, char* buf, std::size_t n) {
        std::size_t got = 0;
        while (got < n) {
            if (stop_) return false;
            pollfd p{fd, POLLIN, 0};
            const int r = ::poll(&p, 1, kPollMs);
            if (r < 0 && errno != EINTR) return false;
            if (r <= 0) continue;
            const ssize_t k = ::recv(fd, buf + got, n - got, 0);
            if (k <= 0) {
                if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
                return false;
            }
            got += static_cast<std::size_t>(k);
        }
        return true;
    }
    static bool send_all(int fd, const std::string& data) {
        std::size_t sent = 0;
        while (sent < data.size()) {
            const ssize_t k = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) return false;
            sent += static_cast<std::size_t>(k);
        }
        return true;
    }

    int connect_upstream() const {
        addrinfo hints{};
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* res = nullptr;
        if (::getaddrinfo(target_host_.c_str(), std::to_string(target_port_).c_str(), &hints,
                          &res) != 0) {
            return -1;
        }
        int fd = -1;
        for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
            fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) continue;
            if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
            ::close(fd);
            fd = -1;
        }
        ::freeaddrinfo(res);
        return fd;
    }

    // One client connection: the startup phase, then the framed relay.
    void serve(int client_raw) {
        Fd client(client_raw);
        std::string application_name;
        std::string startup;
        for (;;) {  // untyped messages until the StartupMessage
            char head[8];
            if (!read_exact(client.get(), head, 8)) return;
            const std::uint32_t len = be32(head);
            if (len < 8 || len > 100000) return;
            std::string msg(head, 8);
            msg.resize(len);
            if (!read_exact(client.get(), msg.data() + 8, len - 8)) return;
            const std::uint32_t code = be32(head + 4);
            if (code == kSslRequest || code == kGssEncRequest) {
                if (!send_all(client.get(), "N")) return;
                continue;
            }
            if (code == kCancelRequest) {  // forwarded as is; the server closes after it
                const Fd server(connect_upstream());
                if (server.get() >= 0) send_all(server.get(), msg);
                return;
            }
            std::size_t pos = 8;
            while (pos < msg.size() && msg[pos] != '\0') {
                const std::string key = cstring(msg, pos);
                const std::string value = cstring(msg, pos);
                if (key == "application_name") application_name = value;
            }
            startup = std::move(msg);
            break;
        }
        Fd server(connect_upstream());
        if (server.get() < 0) return;
        if (!send_all(server.get(), startup)) return;
        relay(client, server, application_name);
    }

    struct Conversation {
        std::string application_name;
        std::map<std::string, bool> statements;  // prepared statement -> its text is a COMMIT
        std::map<std::string, bool> portals;     // portal -> bound to a COMMIT statement
        std::deque<Unit> units;                  // sent, awaiting their ReadyForQuery
        Unit open;                               // extended messages not yet closed by Sync
    };

    // A frontend message on its way to the server.
    void on_frontend(Conversation& c, char type, const std::string& body) {
        std::size_t pos = 0;
        switch (type) {
            case 'Q': {
                Unit u;
                Claim cl;
                if (is_commit_text(cstring(body, pos)) && claim(c.application_name, cl)) {
                    u.claims.push_back(cl);
                }
                c.units.push_back(std::move(u));
                break;
            }
            case 'P': {
                const std::string name = cstring(body, pos);
                c.statements[name] = is_commit_text(cstring(body, pos));
                break;
            }
            case 'B': {
                const std::string portal = cstring(body, pos);
                const std::string statement = cstring(body, pos);
                auto it = c.statements.find(statement);
                c.portals[portal] = it != c.statements.end() && it->second;
                break;
            }
            case 'E': {
                auto it = c.portals.find(cstring(body, pos));
                Claim cl;
                if (it != c.portals.end() && it->second && claim(c.application_name, cl)) {
                    c.open.claims.push_back(cl);
                }
                break;
            }
            case 'S':
            case 'F':  // FunctionCall: answered by one ReadyForQuery too
                c.units.push_back(std::move(c.open));
                c.open = Unit{};
                break;
            default:
                break;
        }
    }

    // A backend message on its way to the client; true: cut the connection here.
    bool on_backend(Conversation& c, char type, const std::string& body) {
        Unit& current = c.units.empty() ? c.open : c.units.front();
        if (type == 'C' && !current.claims.empty()) {
            std::size_t pos = 0;
            if (cstring(body, pos) == "COMMIT") {
                current.claims.erase(current.claims.begin());
                return true;
            }
        }
        if (type == 'Z' && !c.units.empty()) {
            for (const auto& cl : c.units.front().claims) release(cl);
            c.units.pop_front();
        }
        return false;
    }

    void release_all(Conversation& c) {
        for (const auto& u : c.units) {
            for (const auto& cl : u.claims) release(cl);
        }
        for (const auto& cl : c.open.claims) release(cl);
        c.units.clear();
        c.open = Unit{};
    }

    // Splits complete messages off the front of `in` into `out`, calling `inspect` on each;
    // false when inspect asked for a cut or the stream is not the protocol.
    template <class Inspect>
    static bool frame(std::string& in, std::string& out, Inspect&& inspect) {
        std::size_t pos = 0;
        bool ok = true;
        while (in.size() - pos >= 5) {
            const std::uint32_t len = be32(in.data() + pos + 1);
            if (len < 4) {
                ok = false;
                break;
            }
            if (in.size() - pos < 1 + static_cast<std::size_t>(len)) break;
            const std::string body = in.substr(pos + 5, len - 4);
            if (!inspect(in[pos], body)) {
                ok = false;
                break;
            }
            out.append(in, pos, 1 + static_cast<std::size_t>(len));
            pos += 1 + static_cast<std::size_t>(len);
        }
        in.erase(0, pos);
        return ok;
    }

    void relay(Fd& client, Fd& server, const std::string& application_name) {
        Conversation c;
        c.application_name = application_name;
        for (const int fd : {client.get(), server.get()}) {
            ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
            const int one = 1;
            ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        std::string from_client;
        std::string to_server;
        std::string from_server;
        std::string to_client;
        bool client_eof = false;
        bool server_eof = false;
        char buf[65536];
        while (!stop_) {
            // One side gone: deliver what is left for the other, then close both.
            if ((client_eof && to_server.empty()) || (server_eof && to_client.empty())) break;
            pollfd p[2] = {{client.get(), 0, 0}, {server.get(), 0, 0}};
            if (!client_eof && !server_eof && to_server.size() < kHighWater) p[0].events |= POLLIN;
            if (!to_client.empty()) p[0].events |= POLLOUT;
            if (!server_eof && !client_eof && to_client.size() < kHighWater) {
                p[1].events |= POLLIN;
            }
            if (!to_server.empty()) p[1].events |= POLLOUT;
            for (auto& q : p) {
                if (q.events == 0) q.fd = -1;  // nothing to wait for on that side
            }
            const int r = ::poll(p, 2, kPollMs);
            if (r < 0 && errno != EINTR) break;
            if (r <= 0) continue;
            if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !client_eof) {
                const ssize_t k = ::recv(client.get(), buf, sizeof buf, 0);
                if (k > 0) {
                    from_client.append(buf, static_cast<std::size_t>(k));
                    frame(from_client, to_server, [&](char type, const std::string& body) {
                        on_frontend(c, type, body);
                        return true;
                    });
                } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
                    client_eof = true;
                }
            }
            if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !server_eof) {
                const ssize_t k = ::recv(server.get(), buf, sizeof buf, 0);
                if (k > 0) {
                    from_server.append(buf, static_cast<std::size_t>(k));
                    bool cut = false;
                    const bool ok =
                        frame(from_server, to_client, [&](char type, const std::string& body) {
                            cut = on_backend(c, type, body);
                            return !cut;
                        });
                    if (cut) {
                        // The server has committed; the client never hears so.
                        ++cuts_;
                        release_all(c);
                        server.reset();
                        client.reset();
                        return;
                    }
                    if (!ok) break;
                } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
                    server_eof = true;
                }
            }
            if (!flush(client.get(), to_client)) client_eof = server_eof = true;
            if (!flush(server.get(), to_server)) client_eof = server_eof = true;
        }
        release_all(c);
    }

    // Sends what the socket takes now; false on a broken connection.
    static bool flush(int fd, std::string& out) {
        while (!out.empty()) {
            const ssize_t k = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL);
            if (k > 0) {
                out.erase(0, static_cast<std::size_t>(k));
                continue;
            }
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
            out.clear();
            return false;
        }
        return true;
    }

    std::string target_host_;
    unsigned short target_port_;
    int listen_fd_ = -1;
    unsigned short port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> cuts_{0};
    std::atomic<int> connections_{0};
    mutable std::mutex mutex_;
    int armed_ = 0;
    std::string prefix_;
    std::uint64_t generation_ = 0;
    std::vector<std::thread> threads_;
    std::thread acceptor_;
};

}  // namespace trackd::test
