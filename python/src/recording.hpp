// The recorder as Python sees it: a handle that refuses use once its recording has finished.
#pragma once

#include <memory>

#include "bindings.hpp"
#include "eagle/graph/recording.hpp"

namespace eagle::python {

struct PyRecorder {
  Recorder* recorder = nullptr;
  std::shared_ptr<bool> alive;
  Recorder& get() const;
};

// Runs `fn(recorder)` as a recording body: the Python handle dies with the body.
void run_body(Recorder& r, const nb::handle& fn);

}  // namespace eagle::python
