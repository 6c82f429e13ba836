// A client of a Confluent-compatible schema registry: fetches GET <url>/schemas/ids/<id> for the
// ingest, in its own thread, so that a slow or absent registry never blocks the poll loop.
//
// Contract: request() asks for a schema id (asking for an id not answered yet is a no-op; once
// answered, it may be asked again) and returns at once; take_answers() hands over what has come
// back: the body of a 200, or a "not found" for a 404 (Confluent error 40403) given twice, 1 s
// apart (a registry of several nodes may answer from one that has not read a new schema yet;
// the ids behind wait meanwhile). Anything else (refused, timeout, 5xx, 401/403,
// a body over 4 MiB) is not an answer: it is logged, counted in
// trackd_schema_registry_requests_total{outcome="error"} and retried with backoff (0.1 s
// doubling to 5 s) until it is answered or the client is destroyed. The body is not interpreted
// here (decode/ reads it). Auth: kafka.schema_registry_user/_password (basic, or user:password
// in the URL) or kafka.schema_registry_token (bearer); secrets are never logged. An https URL
// is verified against kafka.schema_registry_ca_file or the system's trust store (a certificate
// refused is an error like any other: logged, retried). The constructor throws when the CA
// file cannot be loaded.
//
// Threading: request() and take_answers() may be called from any thread; the destructor stops
// the fetch thread within about two kafka.schema_registry_timeout_ms (one to connect, one for
// the answer).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trackd/config/config.hpp"

namespace trackd::registry {

struct SchemaAnswer {
    std::uint32_t schema_id = 0;
    bool found = false;
    std::string body;  // found: the registry's JSON; not found: what it answered, for details
};

// Where the registry is, parsed from kafka.schema_registry_url
// (http[s]://[user:pw@]host[:port][/path]), and kafka.schema_registry_ca_file.
struct Endpoint {
    std::string scheme = "http";  // or "https": verified (trackd/net/http_client.hpp)
    std::string host;
    std::string port = "80";    // 443 for https when the URL names none
    std::string base_path;      // "" or "/apis/ccompat/v7" (no trailing slash)
    std::string authorization;  // the Authorization header's value, or ""
    std::string ca_file;        // the CAs an https registry is checked against; "": the system's
};
Endpoint endpoint_of(const config::KafkaConfig& kafka);

// One GET of <base_path>/schemas/ids/<id>: the status and body, or throws
// std::runtime_error (connection refused, timeout, cut short, a certificate not trusted)
// saying what happened, as "host:port: step: what".
struct HttpAnswer {
    int status = 0;
    std::string body;
};
HttpAnswer get_schema(const Endpoint& endpoint, std::uint32_t schema_id,
                      std::chrono::milliseconds timeout);

class SchemaRegistry {
  public:
    explicit SchemaRegistry(const config::KafkaConfig& kafka);
    ~SchemaRegistry();
    SchemaRegistry(const SchemaRegistry&) = delete;
    SchemaRegistry& operator=(const SchemaRegistry&) = delete;

    void request(std::uint32_t schema_id);
    std::vector<SchemaAnswer> take_answers();

  private:
    struct State;
    std::shared_ptr<State> state_;
};

}  // namespace trackd::registry
