// Links in responses: absolute URLs built from the request, and the link objects of OGC API -
// Features ({"href", "rel", "type", "title"}).
//
// Contract: URLs are absolute ("http://host/..."), using the request's Host header when it is
// plausible and the listen address otherwise; path segments and query values are
// percent-encoded again, so a link never carries text that was not in a valid request.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "json_writer.hpp"
#include "request.hpp"

namespace trackd::http {

// "http://host" for absolute links; the Host header when it is plausible, else the listen
// address.
std::string base_url(const Request& req, const std::string& fallback_host);

// The request's URL with some query parameters replaced (or removed when the value is empty).
std::string url_with(const Request& req, const std::string& fallback_host,
                     const std::vector<std::pair<std::string, std::string>>& changes);

void write_link(JsonWriter& w, const std::string& rel, const std::string& type,
                const std::string& href, const std::string& title = {});

}  // namespace trackd::http
