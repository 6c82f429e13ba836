#include "trackd/registry/schema_registry.hpp"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "trackd/core/log.hpp"
#include "trackd/core/metrics.hpp"
#include "trackd/net/http_client.hpp"

namespace trackd::registry {
namespace {

constexpr std::size_t kMaxBody = 4U << 20U;
constexpr std::chrono::seconds kNotFoundRecheck{1};

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
    const auto uri = net::parse_uri(kafka.schema_registry_url);
    Endpoint e;
    e.scheme = uri.scheme;
    e.host = uri.host;
    e.port = uri.port;
    e.base_path = uri.path;
    e.ca_file = kafka.schema_registry_ca_file;
    if (!kafka.schema_registry_token.empty()) {
        e.authorization = "Bearer " + kafka.schema_registry_token;
    } else if (!kafka.schema_registry_user.empty()) {
        e.authorization =
            "Basic " + base64(kafka.schema_registry_user + ":" + kafka.schema_registry_password);
    } else if (!uri.userinfo.empty()) {
        e.authorization = "Basic " + base64(uri.userinfo);
    }
    return e;
}

namespace {

net::HttpClient client_for(const Endpoint& endpoint, std::chrono::milliseconds timeout) {
    net::HttpOptions o;
    o.connect_timeout = timeout;
    o.read_timeout = timeout;
    o.body_limit = kMaxBody;
    o.tls = {endpoint.ca_file, "kafka.schema_registry_ca_file"};
    return net::HttpClient(std::move(o));
}

HttpAnswer get_schema(const net::HttpClient& client, const Endpoint& endpoint,
                      std::uint32_t schema_id) {
    std::map<std::string, std::string> headers = {
        {"Accept", "application/vnd.schemaregistry.v1+json, application/json"}};
    if (!endpoint.authorization.empty()) headers["Authorization"] = endpoint.authorization;
    const net::Uri uri{endpoint.scheme, {}, endpoint.host, endpoint.port, endpoint.base_path};
    try {
        auto r =
            client.send(uri, "GET", fmt::format("{}/schemas/ids/{}", endpoint.base_path, schema_id),
                        {}, {}, headers);
        return HttpAnswer{r.status, std::move(r.body)};
    } catch (const net::HttpRequestError& e) {
        throw TransientError(
            fmt::format("{}:{}: {}: {}", endpoint.host, endpoint.port, e.step(), e.detail()));
    }
}

}  // namespace

HttpAnswer get_schema(const Endpoint& endpoint, std::uint32_t schema_id,
                      std::chrono::milliseconds timeout) {
    return get_schema(client_for(endpoint, timeout), endpoint, schema_id);
}

struct SchemaRegistry::State {
    Endpoint endpoint;
    std::optional<net::HttpClient> client;
    std::string url_for_logs;  // without credentials
    std::chrono::milliseconds timeout{5000};
    std::mutex mutex;
    std::condition_variable cv;
    bool stop = false;
    std::set<std::uint32_t> requested;  // the ids asked for and not answered yet
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
        // The id at the front has had one 404: a registry of several nodes may answer from one
        // that has not read a just-registered schema yet, so it is asked once more, 1 s later.
        bool once_not_found = false;
        std::unique_lock lock(mutex);
        for (;;) {
            cv.wait(lock, [&] { return stop || !pending.empty(); });
            if (stop) return;
            const std::uint32_t id = pending.front();
            lock.unlock();
            std::optional<SchemaAnswer> answer;
            std::string problem;
            try {
                auto res = get_schema(*client, endpoint, id);
                if (res.status == 200) {
                    answer = SchemaAnswer{id, true, std::move(res.body)};
                } else if (res.status == 404 && !once_not_found) {
                    lock.lock();
                    once_not_found = true;
                    cv.wait_for(lock, kNotFoundRecheck, [&] { return stop; });
                    if (stop) return;
                    continue;
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
                requested.erase(id);
                once_not_found = false;
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
    state_->url_for_logs = state_->endpoint.scheme + "://" + state_->endpoint.host + ":" +
                           state_->endpoint.port + state_->endpoint.base_path;
    state_->timeout = std::chrono::milliseconds(kafka.schema_registry_timeout_ms);
    state_->client.emplace(client_for(state_->endpoint, state_->timeout));
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
