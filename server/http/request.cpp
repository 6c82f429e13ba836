#include "request.hpp"

#include <algorithm>
#include <cctype>

#include "trackd/core/hex.hpp"

#include "problem.hpp"

namespace trackd::http {
namespace {

// Decoded text must be valid UTF-8 without NUL: PostgreSQL refuses both, and a refusal there
// would be a 500 instead of the 400 it deserves.
std::string checked(std::string_view raw, bool plus_is_space, const std::string& what) {
    auto decoded = percent_decode(raw, plus_is_space);
    if (!decoded) {
        throw ProblemError(ProblemKind::bad_parameter, what + ": malformed percent-encoding", what);
    }
    if (decoded->find('\0') != std::string::npos) {
        throw ProblemError(ProblemKind::bad_parameter, what + ": must not contain NUL", what);
    }
    if (!valid_utf8(*decoded)) {
        throw ProblemError(ProblemKind::bad_parameter, what + ": not valid UTF-8", what);
    }
    return *decoded;
}

}  // namespace

std::optional<std::string> QueryParams::get(std::string_view name) const {
    for (const auto& [k, v] : items_) {
        if (k == name) return v;
    }
    return std::nullopt;
}

void QueryParams::only(std::initializer_list<std::string_view> allowed) const {
    for (const auto& [k, v] : items_) {
        if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
            std::string list;
            for (const auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
            bad_parameter(k, "unknown parameter (this endpoint takes: " +
                                 (list.empty() ? std::string("none") : list) + ")");
        }
    }
}

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '%') {
            if (i + 2 >= s.size()) return std::nullopt;
            const int hi = core::hex_digit_value(s[i + 1]);
            const int lo = core::hex_digit_value(s[i + 2]);
            if (hi < 0 || lo < 0) return std::nullopt;
            out += static_cast<char>(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            out += ' ';
        } else {
            out += c;
        }
    }
    return out;
}

std::string percent_encode(std::string_view s) {
    static constexpr std::string_view hex = "0123456789ABCDEF";
    std::string out;
    for (const char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') ||
            u == '-' || u == '.' || u == '_' || u == '~') {
            out += c;
        } else {
            out += '%';
            out += hex[u >> 4];
            out += hex[u & 0xf];
        }
    }
    return out;
}

bool valid_utf8(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        int extra = 0;
        std::uint32_t cp = 0;
        if (c < 0x80) {
            ++i;
            continue;
        }
        if ((c & 0xe0) == 0xc0) {
            extra = 1;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            extra = 2;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            extra = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (i + static_cast<std::size_t>(extra) >= s.size()) return false;
        for (int k = 1; k <= extra; ++k) {
            const auto cc = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
            if ((cc & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3f);
        }
        // Overlong forms, surrogates and code points above U+10FFFF are not UTF-8.
        if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) ||
            (extra == 3 && cp < 0x10000) || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            return false;
        }
        i += static_cast<std::size_t>(extra) + 1;
    }
    return true;
}

std::string quotable(std::string_view header_value) {
    return valid_utf8(header_value) ? std::string(header_value) : percent_encode(header_value);
}

// "http://" or "https://" (any case) at the start of `target`: its length, else 0.
std::size_t absolute_form_scheme(std::string_view target) {
    for (const std::string_view scheme : {"http://", "https://"}) {
        if (target.size() >= scheme.size() &&
            std::equal(scheme.begin(), scheme.end(), target.begin(), [](char a, char b) {
                return a == std::tolower(static_cast<unsigned char>(b));
            })) {
            return scheme.size();
        }
    }
    return 0;
}

Target parse_target(std::string_view target) {
    Target t;
    std::string rooted;  // an absolute-form target with no path: "/" and its query
    if (const auto scheme = absolute_form_scheme(target); scheme > 0) {
        const auto path_at = target.find_first_of("/?", scheme);
        t.authority = std::string(target.substr(scheme, path_at - scheme));
        if (t.authority.empty()) {
            throw ProblemError(ProblemKind::bad_request,
                               "an absolute request target must name a host");
        }
        target = path_at == std::string_view::npos ? std::string_view() : target.substr(path_at);
        if (target.empty() || target[0] == '?') {
            // No path: the origin's "/" (RFC 9110 4.2.3).
            rooted = "/" + std::string(target);
            target = rooted;
        }
    }
    const auto q = target.find('?');
    const std::string_view path = target.substr(0, q);
    t.path = std::string(path);
    if (path.empty() || path[0] != '/') {
        throw ProblemError(ProblemKind::bad_request, "the request target must start with '/'");
    }
    std::size_t start = 1;
    while (start <= path.size()) {
        auto end = path.find('/', start);
        if (end == std::string_view::npos) end = path.size();
        t.segments.push_back(checked(path.substr(start, end - start), false, "path"));
        start = end + 1;
    }
    if (!t.segments.empty() && t.segments.back().empty()) t.segments.pop_back();

    std::vector<std::pair<std::string, std::string>> items;
    if (q != std::string_view::npos) {
        std::string_view rest = target.substr(q + 1);
        while (!rest.empty()) {
            const auto amp = rest.find('&');
            const std::string_view pair = rest.substr(0, amp);
            rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
            if (pair.empty()) continue;
            const auto eq = pair.find('=');
            if (eq == 0) {
                throw ProblemError(
                    ProblemKind::bad_request,
                    "a query parameter has no name before its '=': '" + quotable(pair) + "'");
            }
            std::string name = checked(pair.substr(0, eq), true, "query");
            std::string value =
                eq == std::string_view::npos ? "" : checked(pair.substr(eq + 1), true, name);
            for (const auto& [k, v] : items) {
                if (k == name) bad_parameter(name, "given more than once");
            }
            items.emplace_back(std::move(name), std::move(value));
        }
    }
    t.query = QueryParams(std::move(items));
    return t;
}

Response json_response(std::string body, int status) {
    Response r;
    r.status = status;
    r.content_type = "application/json";
    r.body = std::move(body);
    return r;
}

Response geojson_response(std::string body, int status) {
    Response r = json_response(std::move(body), status);
    r.content_type = "application/geo+json";
    return r;
}

}  // namespace trackd::http
