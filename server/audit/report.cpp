// The audit report as text (people, cron mail) and as JSON (monitoring).
#include <fmt/format.h>

#include "trackd/audit/audit.hpp"
#include "trackd/core/json.hpp"

namespace trackd::audit {
namespace {

std::string plural(std::int64_t n, const char* one, const char* many) {
    return fmt::format("{} {}", n, n == 1 ? one : many);
}

std::string rows_at(std::int64_t history_rows, std::int64_t dead_letters) {
    return fmt::format("{}, {}", plural(history_rows, "history row", "history rows"),
                       plural(dead_letters, "dead letter", "dead letters"));
}

std::string ref(const RowRef& r) {
    return fmt::format("{} partition {} offset {}", r.recorded_at, r.partition, r.offset);
}

void more(std::string& out, std::int64_t total, size_t listed) {
    if (total > static_cast<std::int64_t>(listed)) {
        out += fmt::format("    and {} more\n", total - static_cast<std::int64_t>(listed));
    }
}

// 3600 -> "1h": the largest unit that divides it, as --since takes it.
std::string duration(std::int64_t s) {
    for (const auto& [unit, name] : {std::pair<std::int64_t, char>{7 * 24 * 3600, 'w'},
                                     {24 * 3600, 'd'},
                                     {3600, 'h'},
                                     {60, 'm'}}) {
        if (s % unit == 0) return fmt::format("{}{}", s / unit, name);
    }
    return fmt::format("{}s", s);
}

std::string quoted(std::string_view s) {
    std::string out = "\"";
    core::append_json_escaped(out, s);
    return out + "\"";
}

std::string opt(const std::optional<std::int64_t>& v) {
    return v ? std::to_string(*v) : std::string("null");
}

std::string ref_json(const std::optional<RowRef>& r) {
    if (!r) return "null";
    return fmt::format(R"({{"recorded_at":{},"partition":{},"offset":{}}})", quoted(r->recorded_at),
                       r->partition, r->offset);
}

}  // namespace

std::string to_text(const Report& r) {
    std::string out = fmt::format("trackd audit of database {}: topic '{}', group '{}', ",
                                  r.database, r.scope.topic, r.scope.group);
    out += r.since_s
               ? fmt::format("rows since {} (--since {})\n\n", r.window_start, duration(*r.since_s))
               : std::string("all rows\n\n");

    // Check 1.
    std::int64_t history = 0;
    std::int64_t dead = 0;
    for (const auto& p : r.partitions) {
        history += p.history_rows;
        dead += p.dead_letters;
    }
    if (r.duplicates_total == 0 && r.beyond_total == 0) {
        out += fmt::format(
            "offsets: OK: {} over {}; no offset stored twice, none at or beyond next_offset\n",
            rows_at(history, dead),
            plural(static_cast<std::int64_t>(r.partitions.size()), "partition", "partitions"));
    } else {
        out += fmt::format(
            "offsets: VIOLATION: {} over {}\n", rows_at(history, dead),
            plural(static_cast<std::int64_t>(r.partitions.size()), "partition", "partitions"));
    }
    for (const auto& p : r.partitions) {
        out += fmt::format(
            "    partition {}: next_offset {}, {}{}\n", p.partition,
            p.next_offset ? std::to_string(*p.next_offset) : "none stored",
            rows_at(p.history_rows, p.dead_letters),
            p.lowest_offset ? fmt::format(", lowest offset {}", *p.lowest_offset) : std::string());
    }
    if (r.duplicates_total > 0) {
        out += fmt::format("  {} stored more than once:\n",
                           plural(r.duplicates_total, "offset", "offsets"));
        for (const auto& d : r.duplicates) {
            out += fmt::format("    partition {} offset {}: {}\n", d.partition, d.offset,
                               rows_at(d.history_rows, d.dead_letters));
        }
        more(out, r.duplicates_total, r.duplicates.size());
    }
    if (r.beyond_total > 0) {
        out += fmt::format("  {} at or beyond the stored next_offset:\n",
                           plural(r.beyond_total, "offset", "offsets"));
        for (const auto& b : r.beyond) {
            out += fmt::format("    partition {} offset {}: {} ({})\n", b.partition, b.offset,
                               rows_at(b.history_rows, b.dead_letters),
                               b.next_offset ? fmt::format("next_offset {}", *b.next_offset)
                                             : std::string("no stored offset"));
        }
        more(out, r.beyond_total, r.beyond.size());
    }
    if (!r.gaps_checked) {
        out += "gaps (information): not looked for with --since\n";
    } else if (r.gap_ranges_total == 0) {
        out += "gaps (information): none\n";
    } else {
        out += fmt::format(
            "gaps (information, not a violation: transaction markers, compaction): {} below "
            "next_offset in neither table, in {}:\n",
            plural(r.gap_offsets_total, "offset", "offsets"),
            plural(r.gap_ranges_total, "range", "ranges"));
        for (const auto& g : r.gaps) {
            out +=
                g.first == g.last
                    ? fmt::format("    partition {} offset {}\n", g.partition, g.first)
                    : fmt::format("    partition {} offsets {}-{}\n", g.partition, g.first, g.last);
        }
        more(out, r.gap_ranges_total, r.gaps.size());
    }

    // Check 2.
    if (r.state_total == 0) {
        out += fmt::format("current state: OK: {} match their latest history row\n",
                           plural(r.vehicles_checked, "vehicle", "vehicles"));
    } else {
        out += fmt::format("current state: VIOLATION: {} ({} with history checked)\n",
                           plural(r.state_total, "vehicle", "vehicles"), r.vehicles_checked);
        for (const auto& v : r.state) {
            if (v.problem == "missing") {
                out += fmt::format("    {}: missing from current state; latest history {}\n",
                                   v.vehicle_id, ref(*v.latest));
            } else if (v.problem == "no_history") {
                out += fmt::format("    {}: in current state without history: current {}\n",
                                   v.vehicle_id, ref(*v.current));
            } else {
                out += fmt::format(
                    "    {}: current state is not the latest history row: current {}, "
                    "latest {}\n",
                    v.vehicle_id, ref(*v.current), ref(*v.latest));
            }
        }
        more(out, r.state_total, r.state.size());
    }
    if (r.vehicles_before_history > 0) {
        out += fmt::format(
            "    ({} older than the oldest history partition ({}) not checked: retention may "
            "have dropped their history)\n",
            plural(r.vehicles_before_history, "current-state row", "current-state rows"),
            r.history_start);
    }

    // Check 3.
    if (!r.archive_checked) {
        out += "archive: not checked: the database has no archive tables\n";
    } else if (r.archive.empty()) {
        out += r.archive_tables == 0
                   ? std::string("archive: OK: no archive table registered\n")
                   : fmt::format("archive: OK: {} not ahead of the history\n",
                                 plural(r.archive_tables, "archive table", "archive tables"));
    } else {
        out += fmt::format("archive: VIOLATION: progress ahead of the history\n");
        for (const auto& a : r.archive) out += fmt::format("    {}: {}\n", a.table, a.problem);
    }

    out += fmt::format("\nresult: {}\n", r.violations() == 0
                                             ? std::string("no violation")
                                             : plural(r.violations(), "violation", "violations"));
    return out;
}

std::string to_json(const Report& r) {
    std::string out = "{";
    out += fmt::format(R"("database":{},"topic":{},"group":{},"since_s":{},"window_start":{},)",
                       quoted(r.database), quoted(r.scope.topic), quoted(r.scope.group),
                       opt(r.since_s), r.since_s ? quoted(r.window_start) : "null");
    out += fmt::format(R"("violations":{},"limit":{},)", r.violations(), r.limit);

    out += R"("offsets":{"partitions":[)";
    for (size_t i = 0; i < r.partitions.size(); ++i) {
        const auto& p = r.partitions[i];
        out += fmt::format(
            R"({}{{"partition":{},"next_offset":{},"history_rows":{},"dead_letters":{},"lowest_offset":{}}})",
            i > 0 ? "," : "", p.partition, opt(p.next_offset), p.history_rows, p.dead_letters,
            opt(p.lowest_offset));
    }
    out += fmt::format(R"(],"duplicates_total":{},"duplicates":[)", r.duplicates_total);
    for (size_t i = 0; i < r.duplicates.size(); ++i) {
        const auto& d = r.duplicates[i];
        out +=
            fmt::format(R"({}{{"partition":{},"offset":{},"history_rows":{},"dead_letters":{}}})",
                        i > 0 ? "," : "", d.partition, d.offset, d.history_rows, d.dead_letters);
    }
    out += fmt::format(R"(],"beyond_next_offset_total":{},"beyond_next_offset":[)", r.beyond_total);
    for (size_t i = 0; i < r.beyond.size(); ++i) {
        const auto& b = r.beyond[i];
        out += fmt::format(
            R"({}{{"partition":{},"offset":{},"history_rows":{},"dead_letters":{},"next_offset":{}}})",
            i > 0 ? "," : "", b.partition, b.offset, b.history_rows, b.dead_letters,
            opt(b.next_offset));
    }
    out += fmt::format(R"(],"gaps_checked":{},"gap_ranges_total":{},"gap_offsets_total":{},)",
                       r.gaps_checked, r.gap_ranges_total, r.gap_offsets_total);
    out += R"("gaps":[)";
    for (size_t i = 0; i < r.gaps.size(); ++i) {
        out += fmt::format(R"({}{{"partition":{},"first":{},"last":{}}})", i > 0 ? "," : "",
                           r.gaps[i].partition, r.gaps[i].first, r.gaps[i].last);
    }
    out += "]},";

    out += fmt::format(
        R"("current_state":{{"vehicles_checked":{},"vehicles_before_history":{},"history_start":{},"violations_total":{},"violations":[)",
        r.vehicles_checked, r.vehicles_before_history,
        r.history_start.empty() ? "null" : quoted(r.history_start), r.state_total);
    for (size_t i = 0; i < r.state.size(); ++i) {
        const auto& v = r.state[i];
        out += fmt::format(R"({}{{"vehicle_id":{},"problem":{},"current":{},"latest":{}}})",
                           i > 0 ? "," : "", quoted(v.vehicle_id), quoted(v.problem),
                           ref_json(v.current), ref_json(v.latest));
    }
    out += "]},";

    out += fmt::format(R"("archive":{{"checked":{},"tables":{},"violations":[)", r.archive_checked,
                       r.archive_tables);
    for (size_t i = 0; i < r.archive.size(); ++i) {
        out += fmt::format(R"({}{{"table":{},"problem":{}}})", i > 0 ? "," : "",
                           quoted(r.archive[i].table), quoted(r.archive[i].problem));
    }
    out += "]}}\n";
    return out;
}

}  // namespace trackd::audit
