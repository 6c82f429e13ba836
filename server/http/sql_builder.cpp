#include "sql_builder.hpp"

namespace trackd::http {

std::string SqlBuilder::bind(std::string value) {
    params_.emplace_back(std::move(value));
    return "$" + std::to_string(params_.size());
}

}  // namespace trackd::http
