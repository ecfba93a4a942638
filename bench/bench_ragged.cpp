// Section 12: what the ragged layer's device-side checks cost. A graph replaying a ragged kernel
// (active_rows over T rows) with and without ragged::validate recorded before it, per launch,
// for N = 64, 256 and 4096 sequence slots; the difference is the validation kernel's cost (one
// thread walks the N + 1 entries of cu_seqlens). On the CPU host schedule always, on cuda:0 when
// there is one (and not --cpu-only).
#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace eagle::bench {

namespace {

constexpr int64_t kTokens = 16384;
constexpr int kLaunches = 64;  // launches between two waits

// cu_seqlens of `slots` equal sequences filling kTokens (a valid batch: the check passes).
Array even_batch(int64_t slots, Device device) {
  std::vector<int32_t> cu(static_cast<std::size_t>(slots + 1));
  for (int64_t s = 0; s <= slots; ++s) cu[s] = static_cast<int32_t>(s * kTokens / slots);
  return Array::from(cu, {slots + 1}, device);
}

Graph ragged_graph(const Array& cu0, bool validate) {
  Graph g = Graph::record([&](Recorder& r) {
    const Value cu = r.param("cu_seqlens", cu0);
    if (validate) ragged::validate(r, cu, kTokens);
    r.result(r.call(ragged::active_rows(), {cu, kTokens}));
  });
  return g;
}

void on_device(const Options& o, Report& report, Device device) {
  for (int64_t slots : {64, 256, 4096}) {
    const Array cu = even_batch(slots, device);
    Graph plain = ragged_graph(cu, false), checked = ragged_graph(cu, true);
    plain.build(device);
    checked.build(device);
    checked();  // the check passes on this batch
    auto batch = [](Graph& g) {
      return [&g] {
        g.launch(kLaunches);
        g.synchronize();
      };
    };
    const int reps = calibrate_reps(o.batch_seconds(), batch(plain));
    const std::vector<Stats> s =
        measure(o, {[&] { return time_batch(reps, kLaunches, batch(checked)); },
                    [&] { return time_batch(reps, kLaunches, batch(plain)); }});
    char extra[96];
    std::snprintf(extra, sizeof extra, "validation adds %.0f ns per launch",
                  s[0].median_ns - s[1].median_ns);
    report.compare(device.str() + ": N " + std::to_string(slots) + ", launch with validate", s[0],
                   "without", s[1], std::nullopt, extra);
  }
}

}  // namespace

void run_ragged_sections(const Options& o, Report& report) {
  report.section("12. ragged: the cost of ragged::validate per launch (T = " +
                 std::to_string(kTokens) + ", active_rows replayed after it), on " +
                 (o.cpu_only || !cuda_available() ? std::string("the CPU")
                                                  : std::string("the CPU and cuda:0")));
  on_device(o, report, Device::cpu());
  if (!o.cpu_only && cuda_available()) on_device(o, report, Device::cuda(0));
}

}  // namespace eagle::bench
