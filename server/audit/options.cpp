// The arguments of `trackd audit`.
#include <charconv>
#include <limits>

#include "trackd/audit/audit.hpp"
#include "trackd/core/error.hpp"

namespace trackd::audit {

std::optional<std::int64_t> parse_duration(std::string_view text) {
    if (text.size() < 2) return std::nullopt;
    std::int64_t unit = 0;
    switch (text.back()) {
        case 's':
            unit = 1;
            break;
        case 'm':
            unit = 60;
            break;
        case 'h':
            unit = 3600;
            break;
        case 'd':
            unit = 24LL * 3600;
            break;
        case 'w':
            unit = 7LL * 24 * 3600;
            break;
        default:
            return std::nullopt;
    }
    const std::string_view digits = text.substr(0, text.size() - 1);
    std::int64_t n = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() || n <= 0) return std::nullopt;
    // About 10,000 years at most: PostgreSQL intervals and timestamps stay in range.
    if (n > 315'000'000'000LL / unit) return std::nullopt;
    return n * unit;
}

namespace {

// `--flag value` or `--flag=value`; advances i past the value.
std::optional<std::string> flag_value(const std::vector<std::string>& args, size_t& i,
                                      const std::string& flag) {
    const std::string& a = args[i];
    if (a == flag) {
        if (i + 1 >= args.size()) throw core::ConfigError(flag, "needs a value");
        return args[++i];
    }
    if (a.rfind(flag + "=", 0) == 0) return a.substr(flag.size() + 1);
    return std::nullopt;
}

}  // namespace

Options parse_options(const std::vector<std::string>& args) {
    Options o;
    for (size_t i = 0; i < args.size(); ++i) {
        if (auto v = flag_value(args, i, "--since")) {
            o.since_s = parse_duration(*v);
            if (!o.since_s) {
                throw core::ConfigError(
                    "--since", "'" + *v +
                                   "' is not a duration: a positive whole number and one unit "
                                   "of s, m, h, d, w (e.g. 90m, 1h, 7d)");
            }
        } else if (auto f = flag_value(args, i, "--format")) {
            if (*f != "text" && *f != "json") {
                throw core::ConfigError("--format", "'" + *f + "' is not text or json");
            }
            o.format = *f;
        } else if (auto l = flag_value(args, i, "--limit")) {
            int n = 0;
            const auto [end, ec] = std::from_chars(l->data(), l->data() + l->size(), n);
            if (ec != std::errc() || end != l->data() + l->size() || n < 1 || n > 100000) {
                throw core::ConfigError("--limit", "'" + *l + "' is not a number from 1 to 100000");
            }
            o.limit = n;
        } else {
            throw core::ConfigError(args[i], "unknown argument of audit (see trackd --help)");
        }
    }
    return o;
}

}  // namespace trackd::audit
