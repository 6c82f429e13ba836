#include "trackd/core/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include <dirent.h>
#include <fmt/format.h>
#include <unistd.h>

namespace trackd::core::metrics {
namespace {

enum Type { kCounter = 0, kGauge = 1, kHistogram = 2 };

constexpr std::string_view type_name(int t) {
    switch (t) {
        case kCounter:
            return "counter";
        case kGauge:
            return "gauge";
        default:
            return "histogram";
    }
}

bool valid_name(std::string_view s, bool metric) {
    if (s.empty()) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        const bool letter =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
        if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
}

// A float as Prometheus reads it: shortest round-trip form, +Inf/-Inf/NaN spelled its way.
std::string number(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return fmt::format("{}", v);
}

void append_escaped(std::string& out, std::string_view s, bool quotes) {
    for (const char c : s) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '"' && quotes) {
            out += "\\\"";
        } else {
            out += c;
        }
    }
}

// {a="x",b="y"} with an optional extra label (le) at the end; empty when there are none.
std::string label_text(const Labels& labels, std::string_view extra_name = {},
                       std::string_view extra_value = {}) {
    if (labels.empty() && extra_name.empty()) return {};
    std::string out = "{";
    bool first = true;
    const auto add = [&](std::string_view k, std::string_view v) {
        if (!first) out += ',';
        first = false;
        out += k;
        out += "=\"";
        append_escaped(out, v, true);
        out += '"';
    };
    for (const auto& [k, v] : labels) add(k, v);
    if (!extra_name.empty()) add(extra_name, extra_value);
    out += '}';
    return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)),
      counts_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {
    for (std::size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0);
}

std::vector<std::uint64_t> Histogram::bucket_counts() const {
    std::vector<std::uint64_t> out(bounds_.size() + 1);
    for (std::size_t i = 0; i < out.size(); ++i) {
        out[i] = counts_[i].load(std::memory_order_relaxed);
    }
    return out;
}

std::uint64_t Histogram::count() const {
    std::uint64_t n = 0;
    for (const auto c : bucket_counts()) n += c;
    return n;
}

std::vector<double> exponential_buckets(double start, double factor, std::size_t count) {
    std::vector<double> out;
    out.reserve(count);
    double v = start;
    for (std::size_t i = 0; i < count; ++i, v *= factor) out.push_back(v);
    return out;
}

struct Registry::Series {
    Labels labels;
    std::atomic<bool> hidden{false};
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
};

struct Registry::Family {
    std::string name;
    std::string help;
    int type = kCounter;
    std::vector<double> bounds;
    std::map<Labels, std::unique_ptr<Series>> series;
};

Registry::Registry() = default;
Registry::~Registry() = default;

Registry::Series& Registry::find_or_add(std::string_view name, std::string_view help, int type,
                                        const std::vector<double>* bounds, const Labels& labels) {
    const std::lock_guard lock(mutex_);
    auto fam = std::find_if(families_.begin(), families_.end(),
                            [&](const auto& f) { return f->name == name; });
    if (fam == families_.end()) {
        if (!valid_name(name, true) || name.rfind("trackd_", 0) != 0) {
            throw std::logic_error(fmt::format("metric name '{}' is not trackd_[a-z0-9_]+", name));
        }
        if (bounds != nullptr) {
            if (bounds->empty() || !std::is_sorted(bounds->begin(), bounds->end()) ||
                std::adjacent_find(bounds->begin(), bounds->end()) != bounds->end() ||
                !std::all_of(bounds->begin(), bounds->end(),
                             [](double b) { return std::isfinite(b); })) {
                throw std::logic_error(
                    fmt::format("metric {}: buckets must be finite and ascending", name));
            }
        }
        auto f = std::make_unique<Family>();
        f->name = std::string(name);
        f->help = std::string(help);
        f->type = type;
        if (bounds != nullptr) f->bounds = *bounds;
        families_.push_back(std::move(f));
        fam = std::prev(families_.end());
    }
    Family& f = **fam;
    if (f.type != type || f.help != help || (bounds != nullptr && f.bounds != *bounds)) {
        throw std::logic_error(fmt::format(
            "metric {} is registered already with another type, help text or buckets", name));
    }
    auto it = f.series.find(labels);
    if (it == f.series.end()) {
        if (f.series.size() >= kMaxSeries) {
            throw std::logic_error(fmt::format(
                "metric {}: more than {} label sets; labels must be bounded", name, kMaxSeries));
        }
        for (const auto& [k, v] : labels) {
            if (!valid_name(k, false) || k.rfind("__", 0) == 0 ||
                (type == kHistogram && k == "le")) {
                throw std::logic_error(fmt::format("metric {}: bad label name '{}'", name, k));
            }
        }
        for (std::size_t i = 0; i < labels.size(); ++i) {
            for (std::size_t j = i + 1; j < labels.size(); ++j) {
                if (labels[i].first == labels[j].first) {
                    throw std::logic_error(
                        fmt::format("metric {}: label '{}' given twice", name, labels[i].first));
                }
            }
        }
        auto s = std::make_unique<Series>();
        s->labels = labels;
        if (type == kCounter) s->counter = std::make_unique<Counter>();
        if (type == kGauge) s->gauge = std::make_unique<Gauge>();
        if (type == kHistogram) s->histogram = std::make_unique<Histogram>(f.bounds);
        it = f.series.emplace(labels, std::move(s)).first;
    }
    it->second->hidden.store(false);
    return *it->second;
}

Counter& Registry::counter(std::string_view name, std::string_view help, const Labels& labels) {
    return *find_or_add(name, help, kCounter, nullptr, labels).counter;
}

Gauge& Registry::gauge(std::string_view name, std::string_view help, const Labels& labels) {
    return *find_or_add(name, help, kGauge, nullptr, labels).gauge;
}

Histogram& Registry::histogram(std::string_view name, std::string_view help,
                               const std::vector<double>& bounds, const Labels& labels) {
    return *find_or_add(name, help, kHistogram, &bounds, labels).histogram;
}

void Registry::remove(std::string_view name, const Labels& labels) {
    const std::lock_guard lock(mutex_);
    for (const auto& f : families_) {
        if (f->name != name) continue;
        auto it = f->series.find(labels);
        if (it != f->series.end()) it->second->hidden.store(true);
    }
}

std::string Registry::render() const {
    const std::lock_guard lock(mutex_);
    std::vector<const Family*> sorted;
    sorted.reserve(families_.size());
    for (const auto& f : families_) sorted.push_back(f.get());
    std::sort(sorted.begin(), sorted.end(),
              [](const Family* a, const Family* b) { return a->name < b->name; });
    std::string out;
    for (const Family* f : sorted) {
        out += "# HELP " + f->name + ' ';
        append_escaped(out, f->help, false);
        out += "\n# TYPE " + f->name + ' ' + std::string(type_name(f->type)) + '\n';
        for (const auto& [labels, s] : f->series) {
            if (s->hidden.load()) continue;
            if (s->counter) {
                out += f->name + label_text(labels) + ' ' + number(s->counter->value()) + '\n';
            } else if (s->gauge) {
                out += f->name + label_text(labels) + ' ' + number(s->gauge->value()) + '\n';
            } else {
                const auto& h = *s->histogram;
                const auto counts = h.bucket_counts();
                std::uint64_t cumulative = 0;
                for (std::size_t i = 0; i < counts.size(); ++i) {
                    cumulative += counts[i];
                    const std::string le = i < h.bounds().size() ? number(h.bounds()[i]) : "+Inf";
                    out += f->name + "_bucket" + label_text(labels, "le", le) + ' ' +
                           std::to_string(cumulative) + '\n';
                }
                out += f->name + "_sum" + label_text(labels) + ' ' + number(h.sum()) + '\n';
                out += f->name + "_count" + label_text(labels) + ' ' + std::to_string(cumulative) +
                       '\n';
            }
        }
    }
    return out;
}

Registry& registry() {
    static Registry r;
    return r;
}

namespace {

struct ProcessStat {
    double cpu_seconds = 0;
    double start_time_seconds = 0;
};

// Fields 14, 15 (utime, stime) and 22 (starttime) of /proc/self/stat, in clock ticks; the
// second field (comm) may hold spaces, so counting starts after its closing parenthesis.
ProcessStat read_stat() {
    ProcessStat out;
    std::ifstream in("/proc/self/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos) return out;
    std::istringstream fields(text.substr(close + 2));
    std::vector<std::string> f;
    for (std::string s; fields >> s;) f.push_back(s);
    // f[0] is field 3 (state).
    if (f.size() < 20) return out;
    const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
    out.cpu_seconds = (std::stod(f[11]) + std::stod(f[12])) / tick;
    double boot = 0;
    std::ifstream sys("/proc/stat");
    for (std::string line; std::getline(sys, line);) {
        if (line.rfind("btime ", 0) == 0) boot = std::stod(line.substr(6));
    }
    out.start_time_seconds = boot + std::stod(f[19]) / tick;
    return out;
}

double resident_bytes() {
    std::ifstream in("/proc/self/statm");
    double size = 0;
    double resident = 0;
    in >> size >> resident;
    return resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double open_fds() {
    double n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (const dirent* e = readdir(d)) {
            if (e->d_name[0] != '.') ++n;
        }
        closedir(d);
    }
    return n - 1;  // the directory stream's own descriptor
}

}  // namespace

std::string render_process_metrics() {
    static std::mutex mutex;
    auto& cpu = counter("trackd_process_cpu_seconds_total",
                        "User and system CPU time spent by the trackd process");
    auto& rss = gauge("trackd_process_resident_memory_bytes", "Resident memory of the process");
    auto& fds = gauge("trackd_process_open_fds", "Open file descriptors of the process");
    auto& start = gauge("trackd_process_start_time_seconds",
                        "Start time of the process since the Unix epoch");
    {
        const std::lock_guard lock(mutex);
        const auto stat = read_stat();
        if (stat.cpu_seconds > cpu.value()) cpu.add(stat.cpu_seconds - cpu.value());
        start.set(stat.start_time_seconds);
        rss.set(resident_bytes());
        fds.set(open_fds());
    }
    return registry().render();
}

}  // namespace trackd::core::metrics
