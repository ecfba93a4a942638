#include "engines/cublaslt/cublaslt_engine.hpp"

#include "eagle/core/error.hpp"
#include "engines/cublaslt/gemm_plan.hpp"
#include "engines/gemm_problem.hpp"

namespace eagle::cublaslt {

namespace {

class CublasLtEngine : public plan::Engine {
 public:
  CublasLtEngine(int64_t id, const std::string& name, LibrarySource source)
      : Engine(id, name), source_(source) {
    caps_.device = DeviceKind::cuda;
    caps_.sm_lo = 80;  // cuBLASLt's bf16 and TF32 tensor-core paths start at Ampere
    caps_.sm_hi = 1299;
    caps_.dtypes = {DType::f32, DType::f16, DType::bf16};
    // cuBLASLt's first 16 heuristic answers: its first 8 missed the fastest kernel for bf16 4096³
    // on the H200 (bench/RESULTS.md), so autotune gets more to time.
    caps_.knobs["algo"] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    caps_.knobs["workspace_mb"] = {32, 0};
    caps_.knobs["tf32"] = {0, 1};
    caps_.knobs["sm_share"] = {0, 100, 75};  // gemm_plan.hpp: 0 the rule, else percent
  }
  const plan::Capabilities& capabilities() const override { return caps_; }

  // The graph's form first (declines that hold on any machine), then the library.
  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    require_cublaslt_epilogue(engines::gemm_problem(graph, name()), name());
    library();
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig& config,
      const plan::BuildContext& ctx) const override {
    const GemmProblem p = engines::gemm_problem(graph, name());
    require_cublaslt_epilogue(p, name());
    const Loaded& lib = library();
    GemmKnobs k;
    k.algo = config.knobs.at("algo");
    k.workspace_mb = config.knobs.at("workspace_mb");
    k.tf32 = config.knobs.at("tf32") != 0;
    k.sm_share = config.knobs.at("sm_share");
    if (k.tf32 && p.dtype != DType::f32)
      throw NotSupported(name() + ": tf32=1 applies to f32 operands, these are " +
                         std::string(dtype_name(p.dtype)));
    if (!ctx.target || !ctx.target->is_cuda())
      throw NotSupported(name() +
                         ": the algorithm is chosen by cuBLASLt's heuristic on the "
                         "device itself; plan for an attached CUDA device, not a "
                         "descriptor (" +
                         ctx.device.device + ")");
    return build_gemm_plan(lib, p, k, *ctx.target, ctx.device.multiprocessors, *ctx.layout, name());
  }

 private:
  const Loaded& library() const {
    const Loaded& lib = source_();
    if (!lib.ok) throw NotSupported(name() + ": " + lib.status);
    return lib;
  }

  plan::Capabilities caps_;
  LibrarySource source_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_cublaslt_engine(int64_t id, const std::string& name) {
  return make_cublaslt_engine_from(id, name, &process);
}

std::unique_ptr<plan::Engine> make_cublaslt_engine_from(int64_t id, const std::string& name,
                                                        LibrarySource source) {
  return std::make_unique<CublasLtEngine>(id, name, source);
}

}  // namespace eagle::cublaslt
