// A build without CUDA: the GPU sections say why they do not run.
#include "bench_common.hpp"

namespace eagle::bench {

void run_gpu_sections(const Options&, Report& report) {
  report.section(
      "1-4. GPU sections skipped: this build of eagle has no CUDA (EAGLE_HAVE_CUDA off)");
}

void run_plan_sections(const Options&, Report& report) {
  report.section("8. planned operations skipped: this build of eagle has no CUDA");
}

void run_gemm_sections(const Options&, Report& report) {
  report.section("10. GEMM skipped: this build of eagle has no CUDA");
}

void run_structured_sections(const Options&, Report& report) {
  report.section("11. native structured engines skipped: this build of eagle has no CUDA");
}

void run_attention_sections(const Options&, Report& report) {
  report.section("13. varlen attention skipped: this build of eagle has no CUDA");
}

void run_linear_sections(const Options&, Report& report) {
  report.section("14. linear attention skipped: this build of eagle has no CUDA");
}

}  // namespace eagle::bench
