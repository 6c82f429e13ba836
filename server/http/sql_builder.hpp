// SQL text assembled from constant fragments, with every value bound as a parameter.
//
// Contract: fragments appended with += are trusted constant SQL (never request text); values go
// through bind(), which records them in params() and returns their placeholder, so that no
// request text ever reaches the SQL. Not thread-safe (one per query).
#pragma once

#include <string>
#include <utility>

#include "trackd/db/connection.hpp"

namespace trackd::http {

class SqlBuilder {
  public:
    explicit SqlBuilder(std::string sql) : sql_(std::move(sql)) {}
    SqlBuilder& operator+=(const std::string& fragment) {
        sql_ += fragment;
        return *this;
    }
    // Binds `value` and returns its placeholder ("$3").
    std::string bind(std::string value);
    [[nodiscard]] const std::string& sql() const { return sql_; }
    [[nodiscard]] const db::Params& params() const { return params_; }

  private:
    std::string sql_;
    db::Params params_;
};

}  // namespace trackd::http
