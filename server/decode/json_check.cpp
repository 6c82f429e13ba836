#include "json_check.hpp"

#include <charconv>
#include <cstdint>
#include <system_error>

#include "trackd/core/hex.hpp"

namespace trackd::decode {
namespace {

// PostgreSQL numeric keeps at most this many digits after the decimal point (NUMERIC_DSCALE_MAX).
constexpr std::int64_t kMaxNumericScale = 16383;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool is_delimiter(char c) { return is_ws(c) || c == ',' || c == ']' || c == '}' || c == ':'; }

// The parts of a JSON number, as far as the grammar is concerned.
struct NumberParts {
    bool valid = false;
    bool nonzero = false;             // some significant digit is not 0
    std::int64_t magnitude = 0;       // decimal exponent of the leading significant digit
    std::int64_t fraction_scale = 0;  // digits after the point minus the exponent (numeric dscale)
};

NumberParts scan_number(std::string_view t) {
    NumberParts out;
    std::size_t i = 0;
    const std::size_t n = t.size();
    if (i < n && t[i] == '-') ++i;
    if (i >= n || !is_digit(t[i])) return out;
    const std::size_t int_begin = i;
    if (t[i] == '0') {
        ++i;
    } else {
        while (i < n && is_digit(t[i])) ++i;
    }
    const std::size_t int_digits = i - int_begin;
    const bool int_nonzero = t[int_begin] != '0';
    std::int64_t first_fraction_nonzero = -1;
    std::int64_t fraction_digits = 0;
    if (i < n && t[i] == '.') {
        ++i;
        const std::size_t frac_begin = i;
        while (i < n && is_digit(t[i])) {
            if (first_fraction_nonzero < 0 && t[i] != '0') {
                first_fraction_nonzero = static_cast<std::int64_t>(i - frac_begin);
            }
            ++i;
        }
        fraction_digits = static_cast<std::int64_t>(i - frac_begin);
        if (fraction_digits == 0) return out;
    }
    std::int64_t exponent = 0;
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        ++i;
        bool negative = false;
        if (i < n && (t[i] == '+' || t[i] == '-')) negative = t[i++] == '-';
        if (i >= n || !is_digit(t[i])) return out;
        while (i < n && is_digit(t[i])) {
            // Saturate: anything beyond a million is out of every range we care about.
            if (exponent < 1'000'000) exponent = exponent * 10 + (t[i] - '0');
            ++i;
        }
        if (negative) exponent = -exponent;
    }
    if (i != n) return out;
    out.valid = true;
    out.nonzero = int_nonzero || first_fraction_nonzero >= 0;
    out.magnitude = int_nonzero ? static_cast<std::int64_t>(int_digits) - 1 + exponent
                                : -(first_fraction_nonzero + 1) + exponent;
    out.fraction_scale = fraction_digits - exponent;
    return out;
}

NumberClass classify(const NumberParts& parts, std::string_view token) {
    if (!parts.valid) return NumberClass::invalid;
    if (!parts.nonzero || parts.magnitude < 308) return NumberClass::finite;
    if (parts.magnitude > 308) return NumberClass::overflow;
    // Around DBL_MAX (1.797e308): let the library decide.
    double v = 0;
    const auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
    (void)ptr;
    return ec == std::errc::result_out_of_range ? NumberClass::overflow : NumberClass::finite;
}

class Checker {
  public:
    explicit Checker(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

    JsonCheck run() {
        if (value(0)) {
            skip_ws();
            if (p_ != end_) fail(JsonProblem::malformed, rest(), "text after the value");
        }
        return result_;
    }

    JsonCheck run_string_body() {
        string_body('\0');
        return result_;
    }

  private:
    bool fail(JsonProblem problem, std::string_view token, const char* what) {
        if (result_.problem == JsonProblem::none) result_ = JsonCheck{problem, token, what};
        return false;
    }

    std::string_view rest() const { return {p_, static_cast<std::size_t>(end_ - p_)}; }

    void skip_ws() {
        while (p_ != end_ && is_ws(*p_)) ++p_;
    }

    // The scalar token starting at p_ (up to the next delimiter).
    std::string_view token() const {
        const char* q = p_;
        while (q != end_ && !is_delimiter(*q)) ++q;
        return {p_, static_cast<std::size_t>(q - p_)};
    }

    bool value(std::size_t depth) {
        skip_ws();
        if (p_ == end_) return fail(JsonProblem::malformed, rest(), "a value is missing");
        switch (*p_) {
            case '{':
                return object(depth + 1);
            case '[':
                return array(depth + 1);
            case '"':
                return string();
            default:
                return scalar();
        }
    }

    bool object(std::size_t depth) {
        if (depth > kMaxJsonDepth) return fail(JsonProblem::malformed, rest(), "nested too deep");
        ++p_;  // '{'
        skip_ws();
        if (p_ != end_ && *p_ == '}') {
            ++p_;
            return true;
        }
        for (;;) {
            skip_ws();
            if (p_ == end_ || *p_ != '"')
                return fail(JsonProblem::malformed, rest(), "expected a key");
            if (!string()) return false;
            skip_ws();
            if (p_ == end_ || *p_ != ':')
                return fail(JsonProblem::malformed, rest(), "expected ':'");
            ++p_;
            if (!value(depth)) return false;
            skip_ws();
            if (p_ != end_ && *p_ == ',') {
                ++p_;
                continue;
            }
            if (p_ != end_ && *p_ == '}') {
                ++p_;
                return true;
            }
            return fail(JsonProblem::malformed, rest(), "expected ',' or '}'");
        }
    }

    bool array(std::size_t depth) {
        if (depth > kMaxJsonDepth) return fail(JsonProblem::malformed, rest(), "nested too deep");
        ++p_;  // '['
        skip_ws();
        if (p_ != end_ && *p_ == ']') {
            ++p_;
            return true;
        }
        for (;;) {
            if (!value(depth)) return false;
            skip_ws();
            if (p_ != end_ && *p_ == ',') {
                ++p_;
                continue;
            }
            if (p_ != end_ && *p_ == ']') {
                ++p_;
                return true;
            }
            return fail(JsonProblem::malformed, rest(), "expected ',' or ']'");
        }
    }

    bool string() {
        const char* begin = p_;
        ++p_;  // opening quote
        if (!string_body('"')) return false;
        if (p_ == end_) return fail(JsonProblem::malformed, {begin, 1}, "unterminated string");
        ++p_;  // closing quote
        return true;
    }

    // Reads string content up to `close` (left at p_) or, when close is '\0', to the end.
    bool string_body(char close) {
        while (p_ != end_) {
            const char c = *p_;
            if (c == close && close != '\0') return true;
            if (static_cast<unsigned char>(c) < 0x20) {
                return fail(JsonProblem::malformed, {p_, 1}, "control character in a string");
            }
            if (c != '\\') {
                ++p_;
                continue;
            }
            if (!escape()) return false;
        }
        return close == '\0' || fail(JsonProblem::malformed, {}, "unterminated string");
    }

    // At a backslash. Checks the escape and the surrogate pairing of \u escapes.
    bool escape() {
        const char* begin = p_;
        if (end_ - p_ < 2) return fail(JsonProblem::malformed, {begin, 1}, "bad escape");
        switch (p_[1]) {
            case '"':
            case '\\':
            case '/':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't':
                p_ += 2;
                return true;
            case 'u':
                break;
            default:
                return fail(JsonProblem::malformed, {begin, 2}, "bad escape");
        }
        int cp = 0;
        if (!hex4(cp)) return fail(JsonProblem::malformed, {begin, 2}, "bad \\u escape");
        if (cp == 0) {
            return fail(JsonProblem::unstorable, {begin, 6}, "cannot be stored in jsonb");
        }
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return fail(JsonProblem::malformed, {begin, 6}, "unpaired low surrogate");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            int low = 0;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u' || !hex4(low) || low < 0xDC00 ||
                low > 0xDFFF) {
                return fail(JsonProblem::malformed, {begin, 6}, "unpaired high surrogate");
            }
        }
        return true;
    }

    // At "\uXXXX": reads it and moves past it.
    bool hex4(int& out) {
        if (end_ - p_ < 6) return false;
        int v = 0;
        for (int i = 2; i < 6; ++i) {
            const int h = core::hex_digit_value(p_[i]);
            if (h < 0) return false;
            v = v * 16 + h;
        }
        out = v;
        p_ += 6;
        return true;
    }

    bool scalar() {
        const std::string_view t = token();
        if (t.empty()) return fail(JsonProblem::malformed, rest(), "a value is missing");
        p_ += t.size();
        if (t == "true" || t == "false" || t == "null") return true;
        if (is_non_finite_token(t))
            return fail(JsonProblem::not_finite, t, "is not a finite number");
        const NumberParts parts = scan_number(t);
        switch (classify(parts, t)) {
            case NumberClass::invalid:
                return fail(JsonProblem::malformed, t, "not a JSON value");
            case NumberClass::overflow:
                return fail(JsonProblem::not_finite, t, "overflows to infinity");
            case NumberClass::finite:
                break;
        }
        if (parts.fraction_scale > kMaxNumericScale) {
            return fail(JsonProblem::unstorable, t, "too many decimal places for jsonb");
        }
        return true;
    }

    const char* p_;
    const char* end_;
    JsonCheck result_;
};

}  // namespace

JsonCheck check_json_value(std::string_view text) noexcept { return Checker(text).run(); }

JsonCheck check_json_string_body(std::string_view body) noexcept {
    return Checker(body).run_string_body();
}

bool is_non_finite_token(std::string_view token) noexcept {
    return token == "NaN" || token == "Infinity" || token == "-Infinity";
}

NumberClass classify_number(std::string_view token) noexcept {
    return classify(scan_number(token), token);
}

}  // namespace trackd::decode
