#include "links.hpp"

#include <algorithm>
#include <cctype>

namespace trackd::http {

std::string base_url(const Request& req, const std::string& fallback_host) {
    const auto& h = req.host;
    const bool plausible =
        !h.empty() && h.size() <= 255 && std::all_of(h.begin(), h.end(), [](unsigned char c) {
            return std::isalnum(c) != 0 || c == '.' || c == '-' || c == ':' || c == '[' ||
                   c == ']' || c == '_';
        });
    return "http://" + (plausible ? h : fallback_host);
}

std::string url_with(const Request& req, const std::string& fallback_host,
                     const std::vector<std::pair<std::string, std::string>>& changes) {
    std::vector<std::pair<std::string, std::string>> items = req.query.items();
    for (const auto& change : changes) {
        // Not a structured binding: clang 14 cannot capture those in a lambda.
        const std::string& name = change.first;
        std::erase_if(items, [&](const auto& kv) { return kv.first == name; });
        if (!change.second.empty()) items.emplace_back(name, change.second);
    }
    std::string url = base_url(req, fallback_host);
    for (const auto& seg : req.segments) url += "/" + percent_encode(seg);
    if (req.segments.empty()) url += "/";
    char sep = '?';
    for (const auto& [k, v] : items) {
        url += sep + percent_encode(k) + "=" + percent_encode(v);
        sep = '&';
    }
    return url;
}

void write_link(JsonWriter& w, const std::string& rel, const std::string& type,
                const std::string& href, const std::string& title) {
    w.begin_object();
    w.key("href").value(href);
    w.key("rel").value(rel);
    w.key("type").value(type);
    if (!title.empty()) w.key("title").value(title);
    w.end_object();
}

}  // namespace trackd::http
