#include "eagle/exec/trace.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "eagle/core/error.hpp"
#include "exec/cupti_library.hpp"
#include "util/json.hpp"

namespace eagle {

namespace {

std::string micros(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1000.0);
  return buf;
}

}  // namespace

std::string chrome_trace_json(const std::vector<TraceEvent>& events, const std::string& process) {
  int64_t origin = 0;
  if (!events.empty())
    origin = std::min_element(events.begin(), events.end(), [](const auto& a, const auto& b) {
               return a.begin_ns < b.begin_ns;
             })->begin_ns;
  std::string out = "{\"traceEvents\": [";
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    out += i ? ",\n" : "\n";
    out +=
        "{\"name\": " + detail::json_quote(e.label) + ", \"cat\": " + detail::json_quote(e.kernel) +
        ", \"ph\": \"X\", \"pid\": " + detail::json_quote(process) +
        ", \"tid\": " + std::to_string(e.thread) + ", \"ts\": " + micros(e.begin_ns - origin) +
        ", \"dur\": " + micros(e.end_ns - e.begin_ns) +
        ", \"args\": {\"node\": " + std::to_string(e.node) +
        ", \"scope\": " + detail::json_quote(e.scope) +
        ", \"launch\": " + std::to_string(e.launch) +
        (e.device_kernel.empty() ? ""
                                 : ", \"device_kernel\": " + detail::json_quote(e.device_kernel)) +
        "}}";
  }
  return out + "\n], \"displayTimeUnit\": \"ns\"}\n";
}

void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events,
                        const std::string& process) {
  std::ofstream out(path);
  out << chrome_trace_json(events, process);
  if (!out) throw InvalidArgument("write_chrome_trace: cannot write '" + path + "'");
}

std::string cupti_status() {
#ifdef EAGLE_HAVE_CUDA
  return detail::cupti_library().status;
#else
  return "CUPTI not used: this build of eagle has no CUDA (GPU traces need it)";
#endif
}

}  // namespace eagle
