// Protobuf fixtures (tests/fixtures/protobuf/): trackd.v1.Position in text format, or whole
// payloads in hex, with "#!" directives saying how to frame them.
//
//   *.txtpb   a message in Protobuf text format; "---" lines separate the messages of a sequence
//   *.hex     the payload's bytes in hex (spaces and newlines ignored, "#" starts a comment)
//   #! frame ID [long] [index N]   Confluent framing with schema id ID; the indexes as the short
//                                  form 00 ([0]), the long form 02 00, or [N] (02 2N)
//   #! suffix HEX   bytes appended to the encoded message (fields text format cannot write)
//   #! pad N        an unknown field 99 of N bytes appended
//   #! registry ID FILE|trackd.v1|unknown   the registry's answer for ID: the .proto in
//                   fixtures/protobuf/schemas/, the shipped proto/trackd/v1/position.proto, or 404
//   #! registry-answer ID JSON      the registry's answer for ID, as is
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <google/protobuf/text_format.h>

#include "trackd/v1/position.pb.h"

namespace trackd::test {

struct ProtobufFixture {
    std::vector<std::string> messages;  // encoded, unframed (several for a sequence)
    std::optional<std::uint32_t> frame_id;
    bool long_form = false;
    int index = 0;
    // id -> schema text (.proto) to answer with; "" means the registry does not know the id.
    std::vector<std::pair<std::uint32_t, std::string>> schemas;
    std::vector<std::pair<std::uint32_t, std::string>> answers;  // id -> raw JSON answer
};

inline std::string read_text_file(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + p.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

inline std::string bytes_from_hex(const std::string& text) {
    std::string out;
    int hi = -1;
    bool comment = false;
    for (const char c : text) {
        if (c == '\n') comment = false;
        if (comment || c == ' ' || c == '\n' || c == '\t' || c == '\r') continue;
        if (c == '#') {
            comment = true;
            continue;
        }
        const int v = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
        if (v < 0 || v > 15) throw std::runtime_error(std::string("not hex: ") + c);
        if (hi < 0) {
            hi = v;
        } else {
            out += static_cast<char>(hi * 16 + v);
            hi = -1;
        }
    }
    return out;
}

// The Confluent wire-format header: magic 0, the id big-endian, the message indexes.
inline std::string confluent_header(std::uint32_t id, bool long_form = false, int index = 0) {
    std::string out(1, '\0');
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((id >> shift) & 0xFF);
    if (!long_form && index == 0) {
        out += '\0';
    } else {
        out += '\x02';                        // one index (zigzag 1)
        out += static_cast<char>(index * 2);  // zigzag, indexes below 64
    }
    return out;
}

inline std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (const char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out + "\"";
}

// For sending fixtures to a live trackd: the fixtures' vehicle (truck-0042) renamed, so that each
// fixture has a vehicle of its own, and recorded_at moved by shift_seconds (times in 1970..9999
// only, so that the bad ones stay bad), so that the clock-relative verdicts hold today.
struct FixtureRewrite {
    std::string vehicle_id;  // empty: keep
    std::int64_t shift_seconds = 0;
};

inline ProtobufFixture load_protobuf_fixture(const std::filesystem::path& path,
                                             const FixtureRewrite& rewrite = {}) {
    const std::filesystem::path root = path.parent_path().parent_path();
    const std::string text = read_text_file(path);
    ProtobufFixture f;
    std::string suffix;
    std::size_t pad = 0;
    std::istringstream lines(text);
    std::vector<std::string> bodies(1);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind("#!", 0) == 0) {
            std::istringstream words(line.substr(2));
            std::string verb;
            words >> verb;
            if (verb == "frame") {
                std::uint32_t id = 0;
                words >> id;
                f.frame_id = id;
                for (std::string w; words >> w;) {
                    if (w == "long") f.long_form = true;
                    if (w == "index") words >> f.index;
                }
            } else if (verb == "suffix") {
                std::string rest;
                std::getline(words, rest);
                suffix += bytes_from_hex(rest);
            } else if (verb == "pad") {
                words >> pad;
            } else if (verb == "registry") {
                std::uint32_t id = 0;
                std::string file;
                words >> id >> file;
                if (file == "unknown") {
                    f.schemas.emplace_back(id, "");
                } else if (file == "trackd.v1") {
                    f.schemas.emplace_back(id,
                                           read_text_file(std::filesystem::path(TRACKD_SOURCE_DIR) /
                                                          "proto/trackd/v1/position.proto"));
                } else {
                    f.schemas.emplace_back(id, read_text_file(root / "schemas" / file));
                }
            } else if (verb == "registry-answer") {
                std::uint32_t id = 0;
                words >> id;
                std::string rest;
                std::getline(words, rest);
                f.answers.emplace_back(id, rest.substr(rest.find_first_not_of(' ')));
            } else {
                throw std::runtime_error("unknown directive: " + line);
            }
        } else if (line == "---") {
            bodies.emplace_back();
        } else if (path.extension() == ".txtpb") {
            bodies.back() += line + "\n";
        }
    }
    for (const auto& body : bodies) {
        std::string bytes;
        if (path.extension() == ".hex") {
            bytes = bytes_from_hex(text.substr(0));
        } else {
            trackd::v1::Position m;
            if (!google::protobuf::TextFormat::ParseFromString(body, &m)) {
                throw std::runtime_error("not trackd.v1.Position text: " + path.string());
            }
            if (!rewrite.vehicle_id.empty() && m.vehicle_id() == "truck-0042") {
                m.set_vehicle_id(rewrite.vehicle_id);
            }
            if (m.has_recorded_at() && m.recorded_at().seconds() >= 0 &&
                m.recorded_at().seconds() < 253402300800) {
                m.mutable_recorded_at()->set_seconds(m.recorded_at().seconds() +
                                                     rewrite.shift_seconds);
            }
            bytes = m.SerializeAsString();
        }
        bytes += suffix;
        if (pad > 0) {
            bytes += "\xa2\x06";  // field 100, length-delimited
            std::size_t n = pad;
            while (n >= 0x80) {
                bytes += static_cast<char>((n & 0x7F) | 0x80);
                n >>= 7;
            }
            bytes += static_cast<char>(n);
            bytes.append(pad, 'x');
        }
        f.messages.push_back(std::move(bytes));
    }
    return f;
}

// The registry's JSON answer carrying .proto text.
inline std::string registry_answer(const std::string& proto_text) {
    return R"({"schema":)" + json_string(proto_text) + R"(,"schemaType":"PROTOBUF"})";
}

}  // namespace trackd::test
