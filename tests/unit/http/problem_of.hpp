// For tests of code that refuses input with a ProblemError.
#pragma once

#include <gtest/gtest.h>

#include "problem.hpp"

namespace trackd::http {

// Runs `f`, which must throw a ProblemError; returns its problem.
template <class F>
Problem problem_of(F&& f) {
    try {
        f();
    } catch (const ProblemError& e) {
        return e.problem();
    }
    ADD_FAILURE() << "no ProblemError thrown";
    return {};
}

}  // namespace trackd::http
