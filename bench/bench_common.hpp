// Shared by the benchmark's sections: options, batch timing, the report and the chain graph.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"

namespace eagle::bench {

struct Options {
  bool quick = false;
  bool cpu_only = false;
  std::vector<int> only;  // sections to run (empty: all)
  // Lettered parts asked for by section (--only 14a): a section not here runs every part.
  std::map<int, std::string> parts;
  std::string peers;  // --peers FILE: peer timings measured in the same device call

  bool runs(int section) const {
    return only.empty() || std::find(only.begin(), only.end(), section) != only.end();
  }
  bool runs_part(int section, char part) const {
    const auto it = parts.find(section);
    return it == parts.end() || it->second.find(part) != std::string::npos;
  }

  int batches() const { return quick ? 11 : 31; }  // odd, so the median is one sample
  int warmup() const { return quick ? 2 : 5; }
  double batch_seconds() const { return quick ? 0.002 : 0.005; }
  int64_t chain_nodes_per_batch() const { return quick ? 5000 : 20000; }
};

// Nanoseconds per operation over the batches of one variant.
struct Stats {
  double median_ns = 0;
  double min_ns = 0;
};

using Clock = std::chrono::steady_clock;

inline double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

// Times `reps` calls of fn as one batch; returns nanoseconds per op (`ops_per_call` per call).
template <class Fn>
double time_batch(int reps, double ops_per_call, Fn&& fn) {
  const Clock::time_point t0 = Clock::now();
  for (int i = 0; i < reps; ++i) fn();
  return ns_since(t0) / (reps * ops_per_call);
}

// Calls of fn that take about `seconds`: batches long enough that reading the clock vanishes.
template <class Fn>
int calibrate_reps(double seconds, Fn&& fn) {
  fn();
  for (int reps = 1;; reps *= 2) {
    const Clock::time_point t0 = Clock::now();
    for (int i = 0; i < reps; ++i) fn();
    const double s = ns_since(t0) * 1e-9;
    if (s >= seconds / 4 || reps >= (1 << 20))
      return std::max(1, static_cast<int>(reps * seconds / std::max(s, 1e-9)));
  }
}

// One batch of a variant: runs it and returns nanoseconds per op.
using Batch = std::function<double()>;

// Runs the variants' batches in turn, rotating which goes first, so drift (clocks, caches,
// other load) hits all of them alike. Warm-up batches are run and dropped.
std::vector<Stats> measure(int warmup, int batches, const std::vector<Batch>& variants);
inline std::vector<Stats> measure(const Options& o, const std::vector<Batch>& variants) {
  return measure(o.warmup(), o.batches(), variants);
}

// Plain-text results, one line per measurement; counts goals met and missed.
class Report {
 public:
  void section(const std::string& title);
  void note(const std::string& text);
  // eagle against its peer measured in the same run; ratio = eagle median / peer median.
  void compare(const std::string& what, const Stats& eagle, const std::string& peer,
               const Stats& raw, std::optional<double> goal = std::nullopt,
               const std::string& extra = "");
  // A yes/no property (no timing).
  void check(const std::string& what, bool ok, const std::string& detail);
  void summary() const;

 private:
  void tally(bool ok);
  int passed_ = 0;
  int missed_ = 0;
};

std::string format_ns(double ns);

// Timings of a peer library measured by another program in the same device call
// (bench/peers/torch_ops.py --table FILE): one line per case, "name median_ms min_ms", or
// "name error: reason" for a case the peer cannot run here.
class Peers {
 public:
  Peers() = default;
  // Reads `path`; empty path: no peers. Throws std::runtime_error when the file cannot be read.
  explicit Peers(const std::string& path);
  // The peer's time for `name`, or none; `why` then says why (not measured, or its error).
  std::optional<Stats> find(const std::string& name, std::string& why) const;

 private:
  std::vector<std::pair<std::string, std::string>> lines_;  // name, rest of the line
  std::string path_;
};

// eagle against the peer's case `name` (ratio = eagle / peer, goal as in Report::compare). A case
// the peer did not run is reported as a note naming the reason, never as a pass.
void compare_with_peer(Report& report, const Peers& peers, const std::string& what,
                       const Stats& eagle, const std::string& peer_label, const std::string& name,
                       std::optional<double> goal = std::nullopt, const std::string& extra = "");

// The chain every section uses: v_0 = x, v_k = alpha * v_{k-1} + x (axpy), so each node reads
// the previous node's output and values stay bounded (they tend to 2x).
inline constexpr double kAlpha = 0.5;
Graph record_chain(const Array& x0, int length);
std::vector<float> chain_reference(const std::vector<float>& x, int length);

// Uniform in [-1, 1], never all zeros: zeros would hide unwritten outputs.
std::vector<float> random_floats(int64_t n, uint32_t seed);
// Throws when ||got - want|| / ||want|| exceeds 1e-5 or got holds a NaN.
void expect_close(const std::string& what, const std::vector<float>& got,
                  const std::vector<float>& want);

// Sections 1-4 (bench_gpu.cpp, or the stub in a build without CUDA).
void run_gpu_sections(const Options& options, Report& report);
// Sections 6-7, device control flow (bench_control.cpp): their graphs checked on the CPU in every
// build, timed on the GPU in a CUDA build with a device unless options.cpu_only.
void run_control_sections(const Options& options, Report& report);
// Section 8, planned operations against the raw launch (bench_plans.cpp; needs a device).
void run_plan_sections(const Options& options, Report& report);
// Section 10, bf16 GEMMs through the cuBLASLt plan against a raw cublasLtMatmul (bench_gemm.cpp;
// needs a device and cuBLASLt).
void run_gemm_sections(const Options& options, Report& report);
// Section 11, the native structured engines' achieved bandwidth (bench_structured.cpp; needs
// a device).
void run_structured_sections(const Options& options, Report& report);
// Section 13 (bench_attention.cpp, or the stub without CUDA): varlen attention.
void run_attention_sections(const Options& o, Report& report);
// Section 14 (bench_linear.cpp, or the stub without CUDA): chunked linear attention.
void run_linear_sections(const Options& o, Report& report);
// Section 9, recording and building at scale on the CPU (bench_scale.cpp).
void run_scale_sections(const Options& options, Report& report);
void run_ragged_sections(const Options& options, Report& report);

}  // namespace eagle::bench
