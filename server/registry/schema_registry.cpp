#include "trackd/registry/schema_registry.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>

#include "trackd/core/log.hpp"
#include "trackd/core/metrics.hpp"

namespace trackd::registry {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr std::size_t kMaxBody = 4U << 20U;

std::string base64(std::string_view in) {
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    const auto byte = [&](std::size_t k) {
        return k < in.size() ? static_cast<std::uint32_t>(static_cast<unsigned char>(in[k])) : 0U;
    };
    for (; i < in.size(); i += 3) {
        const std::uint32_t n = (byte(i) << 16) | (byte(i + 1) << 8) | byte(i + 2);
        out += kAlphabet[(n >> 18) & 63];
        out += kAlphabet[(n >> 12) & 63];
        out += i + 1 < in.size() ? kAlphabet[(n >> 6) & 63] : '=';
        out += i + 2 < in.size() ? kAlphabet[n & 63] : '=';
    }
    return out;
}

// What an answer's body says, short, for a dead letter's detail.
std::string excerpt(std::string_view body) {
    std::string out(body.substr(0, 160));
    for (char& c : out) {
        if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    }
    return out;
}

class TransientError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

}  // namespace

Endpoint endpoint_of(const config::KafkaConfig& kafka) {
    Endpoint e;
    std::string_view rest = kafka.schema_registry_url;
    if (rest.rfind("http://", 0) == 0) rest.remove_prefix(7);
    const auto slash = rest.find('/');
    std::string_view authority = rest.substr(0, slash);
    if (slash != std::string_view::npos) e.base_path = std::string(rest.substr(slash));
    while (!e.base_path.empty() && e.base_path.back() == '/') e.base_path.pop_back();
    std::string userinfo;
    if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
        userinfo = std::string(authority.substr(0, at));
        authority.remove_prefix(at + 1);
    }
    const auto colon = authority.rfind(':');
    e.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) e.port = std::string(authority.substr(colon + 1));
    if (!kafka.schema_registry_token.empty()) {
        e.authorization = "Bearer " + kafka.schema_registry_token;
    } else if (!kafka.schema_registry_user.empty()) {
        e.authorization =
            "Basic " + base64(kafka.schema_registry_user + ":" + kafka.schema_registry_password);
    } else if (!userinfo.empty()) {
        e.authorization = "Basic " + base64(userinfo);
    }
    return e;
}

HttpAnswer get_schema(const Endpoint& endpoint, std::uint32_t schema_id,
                      std::chrono::milliseconds timeout) {
    asio::io_context ioc;
    tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    http::request<http::empty_body> req{
        http::verb::get, fmt::format("{}/schemas/ids/{}", endpoint.base_path, schema_id), 11};
    req.set(http::field::host, endpoint.host + ":" + endpoint.port);
    req.set(http::field::user_agent, "trackd");
    req.set(http::field::accept, "application/vnd.schemaregistry.v1+json, application/json");
    if (!endpoint.authorization.empty())
        req.set(http::field::authorization, endpoint.authorization);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxBody);
    beast::error_code failure;
    const char* step = "resolve";
    // One deadline for the whole exchange; asynchronous operations honour it.
    stream.expires_after(timeout);
    resolver.async_resolve(
        endpoint.host, endpoint.port,
        [&](beast::error_code ec, const tcp::resolver::results_type& r) {
            if (ec) {
                failure = ec;
                return;
            }
            step = "connect";
            stream.async_connect(r, [&](beast::error_code ec2, const tcp::endpoint&) {
                if (ec2) {
                    failure = ec2;
                    return;
                }
                step = "send";
                http::async_write(stream, req, [&](beast::error_code ec3, std::size_t) {
                    if (ec3) {
                        failure = ec3;
                        return;
                    }
                    step = "read the answer";
                    http::async_read(stream, buffer, parser,
                                     [&](beast::error_code ec4, std::size_t) { failure = ec4; });
                });
            });
        });
    ioc.run_for(timeout + std::chrono::seconds(1));
    if (!ioc.stopped()) failure = beast::error::timeout;  // resolve has no deadline of its own
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    if (failure) {
        throw TransientError(
            fmt::format("{}:{}: {}: {}", endpoint.host, endpoint.port, step,
                        failure == beast::error::timeout
                            ? fmt::format("no answer within {} ms", timeout.count())
                            : failure.message()));
    }
    auto res = parser.release();
    return HttpAnswer{static_cast<int>(res.result_int()), std::move(res.body())};
}

struct SchemaRegistry::State {
    Endpoint endpoint;
    std::string url_for_logs;  // without credentials
    std::chrono::milliseconds timeout{5000};
    std::mutex mutex;
    std::condition_variable cv;
    bool stop = false;
    std::set<std::uint32_t> requested;  // every id ever asked for
    std::deque<std::uint32_t> pending;
    std::vector<SchemaAnswer> answers;
    std::thread thread;

    core::metrics::Counter& found = core::metrics::counter(
        "trackd_schema_registry_requests_total",
        "Schema registry lookups by outcome (error: retried)", {{"outcome", "found"}});
    core::metrics::Counter& not_found = core::metrics::counter(
        "trackd_schema_registry_requests_total",
        "Schema registry lookups by outcome (error: retried)", {{"outcome", "not_found"}});
    core::metrics::Counter& errors = core::metrics::counter(
        "trackd_schema_registry_requests_total",
        "Schema registry lookups by outcome (error: retried)", {{"outcome", "error"}});

    void run() {
        auto delay = std::chrono::milliseconds(100);
        std::unique_lock lock(mutex);
        for (;;) {
            cv.wait(lock, [&] { return stop || !pending.empty(); });
            if (stop) return;
            const std::uint32_t id = pending.front();
            lock.unlock();
            std::optional<SchemaAnswer> answer;
            std::string problem;
            try {
                auto res = get_schema(endpoint, id, timeout);
                if (res.status == 200) {
                    answer = SchemaAnswer{id, true, std::move(res.body)};
                } else if (res.status == 404) {
                    answer = SchemaAnswer{id, false,
                                          fmt::format("schema id {}: the registry answered 404: {}",
                                                      id, excerpt(res.body))};
                } else {
                    problem = fmt::format("HTTP {}: {}", res.status, excerpt(res.body));
                }
            } catch (const std::exception& e) {
                problem = e.what();
            }
            lock.lock();
            if (answer) {
                (answer->found ? found : not_found).inc();
                core::log::info("schema registry answered",
                                {{"schema_id", std::to_string(id)},
                                 {"found", answer->found ? "true" : "false"}});
                pending.pop_front();
                answers.push_back(std::move(*answer));
                delay = std::chrono::milliseconds(100);
                continue;
            }
            errors.inc();
            core::log::warn("schema registry unavailable, retrying",
                            {{"url", url_for_logs},
                             {"schema_id", std::to_string(id)},
                             {"error", problem},
                             {"retry_in_ms", std::to_string(delay.count())}});
            cv.wait_for(lock, delay, [&] { return stop; });
            if (stop) return;
            delay = std::min(delay * 2, std::chrono::milliseconds(5000));
        }
    }
};

SchemaRegistry::SchemaRegistry(const config::KafkaConfig& kafka)
    : state_(std::make_shared<State>()) {
    state_->endpoint = endpoint_of(kafka);
    state_->url_for_logs = "http://" + state_->endpoint.host + ":" + state_->endpoint.port +
                           state_->endpoint.base_path;
    state_->timeout = std::chrono::milliseconds(kafka.schema_registry_timeout_ms);
    state_->thread = std::thread([s = state_.get()] { s->run(); });
}

SchemaRegistry::~SchemaRegistry() {
    {
        const std::lock_guard lock(state_->mutex);
        state_->stop = true;
    }
    state_->cv.notify_all();
    state_->thread.join();
}

void SchemaRegistry::request(std::uint32_t schema_id) {
    {
        const std::lock_guard lock(state_->mutex);
        if (!state_->requested.insert(schema_id).second) return;
        state_->pending.push_back(schema_id);
    }
    state_->cv.notify_all();
}

std::vector<SchemaAnswer> SchemaRegistry::take_answers() {
    const std::lock_guard lock(state_->mutex);
    return std::exchange(state_->answers, {});
}

}  // namespace trackd::registry
