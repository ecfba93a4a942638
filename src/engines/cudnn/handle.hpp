// The cuDNN handle as an eagle Library: whoever issues calls (a built graph's executor, the
// eager path) creates one per device and stream when a cuDNN plan first needs it, hands it to
// run() in CallContext::handle, and destroys it at the end.
#pragma once

#include <string>

#include "eagle/kernel/call.hpp"

namespace eagle::cudnn {

const Library& handle_library();

// cuDNN's message for a status code (the loaded library's, or the number).
std::string status_string(int status);

}  // namespace eagle::cudnn
