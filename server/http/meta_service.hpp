// The endpoints about the service itself: /healthz (the process answers), /readyz (the
// database answers with the schema version this build needs) and /api (the OpenAPI document).
#pragma once

#include "router.hpp"
#include "service_context.hpp"

namespace trackd::http {

class MetaService {
  public:
    explicit MetaService(ServiceContext& ctx) : ctx_(ctx) {}
    void add_routes(Router& router);

    static Response healthz(const Request& req);
    Response readyz(const Request& req);
    static Response api(const Request& req);

  private:
    ServiceContext& ctx_;
};

// server/http/openapi.json, embedded at build time (cmake/EmbedText.cmake).
extern const char* const kOpenApiDocument;

}  // namespace trackd::http
