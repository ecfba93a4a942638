// The reference engine: a CPU engine for every op of the tables, computing in float64 through
// the reference math. Its results are the semantics every other engine is tested against.
#pragma once

#include <memory>
#include <string>

#include "eagle/plan/engine.hpp"

namespace eagle::reference {

std::unique_ptr<plan::Engine> make_reference_engine(int64_t id, const std::string& name);

}  // namespace eagle::reference
