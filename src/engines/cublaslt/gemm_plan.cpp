#include "engines/cublaslt/gemm_plan.hpp"

#include <algorithm>
#include <cstdint>

#include "eagle/core/error.hpp"
#include "eagle/plan/operand_rules.hpp"
#include "util/cuda_check.hpp"

namespace eagle::cublaslt {

int32_t sm_count_target(int64_t m, int64_t n, int64_t batch, int multiprocessors, int64_t share) {
  if (multiprocessors <= 0 || share >= 100) return 0;
  if (share > 0) return static_cast<int32_t>(std::max<int64_t>(1, multiprocessors * share / 100));
  const int64_t tiles = batch * ((m + 127) / 128) * ((n + 127) / 128);
  return 4 * tiles <= multiprocessors ? static_cast<int32_t>(multiprocessors * 3 / 4) : 0;
}

void require_cublaslt_epilogue(const GemmProblem& p, const std::string& engine) {
  if (p.epilogue == GemmEpilogue::gelu)
    throw NotSupported(engine +
                       ": no epilogue for gelu (erf form): cuBLASLt's GELU epilogue is the tanh "
                       "approximation, served as gelu_tanh");
  if (p.epilogue == GemmEpilogue::gelu_backward)
    throw NotSupported(engine + ": no cuBLASLt epilogue for gelu_backward (erf form)");
}

#ifdef EAGLE_HAVE_CUDA

namespace {

// Row-major eagle tensors against column-major cuBLASLt, by the standard swap: a row-major
// [R, C] slice with leading dimension ld is the column-major [C, R] matrix with the same ld, so
// row-major c = a b is column-major c^T = b^T a^T. cuBLASLt's A is eagle's b, its B is eagle's
// a, its D (and C) is eagle's result: N rows, M columns, ld N. A column-major eagle operand (a
// transposed layout) is the untransposed column-major matrix, so cuBLASLt transposes it back.
// The BIAS epilogue adds a vector along D's rows, which is eagle's N: a bias [N] broadcast over
// eagle's rows, as the graph means.

cudaDataType_t cuda_type(DType d) {
  return d == DType::f16 ? CUDA_R_16F : d == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
}

// The layout cuBLASLt reads `m` through (eagle operand as described above), batched.
bool init_layout(const Api& api, cublasLtMatrixLayoutOpaque_t& out, DType dtype, const Matrix& m,
                 int64_t batch) {
  // Row-major [R, C] = column-major [C, R]; column-major [R, C] as it is.
  const uint64_t rows = static_cast<uint64_t>(m.col_major ? m.rows : m.cols);
  const uint64_t cols = static_cast<uint64_t>(m.col_major ? m.cols : m.rows);
  auto* l = reinterpret_cast<cublasLtMatrixLayout_t>(&out);
  if (api.layout_init(l, sizeof(out), cuda_type(dtype), rows, cols, m.ld) != CUBLAS_STATUS_SUCCESS)
    return false;
  if (batch == 1) return true;
  const auto count = static_cast<int32_t>(batch);
  const int64_t stride = m.batch_stride;
  return api.layout_set(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)) ==
             CUBLAS_STATUS_SUCCESS &&
         api.layout_set(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)) ==
             CUBLAS_STATUS_SUCCESS;
}

// What the matmul descriptor holds; the bias address changes per call, so the descriptor is
// initialized per call in caller memory (no allocation, and two threads running one plan never
// share it).
struct DescTable {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  int32_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  bool bias_vector = false;
  int64_t bias_batch_stride = 0;
  int32_t sm_target = 0;  // 0: every SM
};

cublasStatus_t init_desc(const Api& api, cublasLtMatmulDescOpaque_t& mem, const DescTable& t,
                         const void* bias) {
  auto* d = reinterpret_cast<cublasLtMatmulDesc_t>(&mem);
  cublasStatus_t s = api.matmul_desc_init(d, sizeof(mem), t.compute, CUDA_R_32F);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = api.matmul_desc_set(d, CUBLASLT_MATMUL_DESC_TRANSA, &t.trans_a, sizeof(t.trans_a));
  if (s == CUBLAS_STATUS_SUCCESS)
    s = api.matmul_desc_set(d, CUBLASLT_MATMUL_DESC_TRANSB, &t.trans_b, sizeof(t.trans_b));
  if (s == CUBLAS_STATUS_SUCCESS && t.epilogue != CUBLASLT_EPILOGUE_DEFAULT)
    s = api.matmul_desc_set(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &t.epilogue, sizeof(t.epilogue));
  if (s == CUBLAS_STATUS_SUCCESS && t.bias_vector)
    s = api.matmul_desc_set(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  if (s == CUBLAS_STATUS_SUCCESS && t.bias_vector && t.bias_batch_stride != 0)
    s = api.matmul_desc_set(d, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &t.bias_batch_stride,
                            sizeof(t.bias_batch_stride));
  if (s == CUBLAS_STATUS_SUCCESS && t.sm_target > 0)
    s = api.matmul_desc_set(d, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &t.sm_target,
                            sizeof(t.sm_target));
  return s;
}

// The last cuBLASLt failure of run() on this thread: what explain() reports (run_or_explain
// calls it right after, on the same thread).
thread_local cublasStatus_t t_last_status = CUBLAS_STATUS_SUCCESS;

class GemmPlan : public plan::CompiledPlan {
 public:
  GemmPlan(const Api& api, std::string engine) : api_(api), engine_(std::move(engine)) {}

  std::size_t workspace_bytes() const override { return workspace_; }
  const Library* library() const override { return &handle_library(); }

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    return enqueue(ops, ctx, static_cast<cudaStream_t>(ctx.stream));
  }

  // Its own nodes: the cublasLtMatmul captured straight into `graph` on a side stream, so its
  // kernels keep the launch attributes cuBLASLt gives them (thread-block clusters on Hopper),
  // which a kernel node re-made from a captured kernel's parameters would drop. bind() populates
  // a fresh graph (update_cuda_graph declines) and the executor swaps it in.
  bool populate_cuda_graph(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx,
                           void* graph) const override {
    if (!graph) return false;
    detail::DeviceGuard guard(device_.ordinal());
    cudaStream_t side = nullptr;
    if (cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) != cudaSuccess) return false;
    bool ok = cudaStreamBeginCaptureToGraph(side, static_cast<cudaGraph_t>(graph), nullptr, nullptr,
                                            0, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    if (ok) {
      const bool issued = enqueue(ops, ctx, side);
      cudaGraph_t captured = nullptr;
      ok = cudaStreamEndCapture(side, &captured) == cudaSuccess && issued;
    }
    cudaStreamDestroy(side);
    return ok;  // false: the executor drops `graph` and captures run(), which explains a refusal
  }

  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    rules_.explain(ops);
    for (const engines::StrideRule& r : strides_) r.explain(ops[r.position], engine_);
    if (!algo_for(ops)) {
      // With a fallback, only an address off its element's alignment is refused.
      const uintptr_t need = has_fallback_ ? element_bytes_ : kAlignedBytes;
      for (int p : pointers_)
        if (p >= 0 && reinterpret_cast<uintptr_t>(ops[p].data) % need != 0)
          throw InvalidArgument(engine_ + ": operand at position " + std::to_string(p) + " (" +
                                plan::describe(ops[p]) + ") is not " + std::to_string(need) +
                                "-byte aligned" +
                                (has_fallback_ ? ", not even aligned to its element size"
                                               : ", and cuBLASLt lists no algorithm for less "
                                                 "aligned addresses for this problem"));
    }
    if (!ctx.handle)
      throw InvalidArgument(engine_ +
                            ": no cuBLASLt handle in the call context (the plan "
                            "declares Library cublasLt)");
    if (ctx.workspace_bytes < workspace_ || (workspace_ && !ctx.workspace))
      throw InvalidArgument(engine_ + ": the algorithm needs " + std::to_string(workspace_) +
                            " bytes of workspace, the context has " +
                            std::to_string(ctx.workspace_bytes));
    throw CudaError(engine_ + ": cublasLtMatmul failed: " + api_.name(t_last_status));
  }

  // Filled by build_gemm_plan.
  plan::OperandRules rules_;
  std::vector<engines::StrideRule> strides_;
  int a_ = -1, b_ = -1, bias_ = -1, out_ = -1;
  int pointers_[4] = {-1, -1, -1, -1};  // a, b, bias, out: the addresses algorithms align on
  bool bias_matrix_ = false;
  DescTable table_;
  cublasLtMatrixLayoutOpaque_t a_layout_{}, b_layout_{}, c_layout_{}, d_layout_{};
  cublasLtMatmulAlgo_t algo_{};      // the knob's entry, for kAlignedBytes-aligned addresses
  cublasLtMatmulAlgo_t fallback_{};  // the best entry for addresses aligned to the element only
  bool has_fallback_ = false;
  uintptr_t element_bytes_ = 1;
  std::size_t workspace_ = 0;  // what either algorithm needs
  Device device_ = Device::cpu();

 private:
  // The per-call path: the table's checks, then one cublasLtMatmul on `stream`.
  bool enqueue(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx,
               cudaStream_t stream) const noexcept {
    if (!rules_.match(ops)) return false;
    for (const engines::StrideRule& r : strides_)
      if (!r.match(ops[r.position])) return false;
    const cublasLtMatmulAlgo_t* algo = algo_for(ops);
    if (!algo) return false;
    if (!ctx.handle || ctx.workspace_bytes < workspace_ || (workspace_ && !ctx.workspace))
      return false;
    const void* bias = bias_ >= 0 ? ops[bias_].data : nullptr;
    cublasLtMatmulDescOpaque_t desc;
    cublasStatus_t s = init_desc(api_, desc, table_, bias);
    if (s == CUBLAS_STATUS_SUCCESS) {
      const float alpha = 1.0f, beta = bias_matrix_ ? 1.0f : 0.0f;
      void* d = ops[out_].data;
      const void* c = bias_matrix_ ? bias : d;
      s = api_.matmul(
          static_cast<cublasLtHandle_t>(ctx.handle), reinterpret_cast<cublasLtMatmulDesc_t>(&desc),
          &alpha, ops[b_].data, layout(a_layout_), ops[a_].data, layout(b_layout_), &beta, c,
          layout(c_layout_), d, layout(d_layout_), algo, ctx.workspace, workspace_, stream);
    }
    t_last_status = s;
    return s == CUBLAS_STATUS_SUCCESS;
  }

  // The algorithm the call's addresses allow: the knob's when every one is kAlignedBytes-aligned
  // (allocations are), else the fallback; null when none does.
  const cublasLtMatmulAlgo_t* algo_for(const plan::OperandBuffer* ops) const noexcept {
    uintptr_t any = 0;
    for (int p : pointers_)
      if (p >= 0) any |= reinterpret_cast<uintptr_t>(ops[p].data);
    if (any % kAlignedBytes == 0) return &algo_;
    return has_fallback_ && any % element_bytes_ == 0 ? &fallback_ : nullptr;
  }
  static cublasLtMatrixLayout_t layout(const cublasLtMatrixLayoutOpaque_t& l) {
    return reinterpret_cast<cublasLtMatrixLayout_t>(const_cast<cublasLtMatrixLayoutOpaque_t*>(&l));
  }
  const Api& api_;
  std::string engine_;
};

// A handle on `device` for one heuristic query.
class QueryHandle {
 public:
  QueryHandle(const Api& api, Device device) : api_(api) {
    detail::DeviceGuard guard(device.ordinal());
    const cublasStatus_t s = api.create(&h_);
    if (s != CUBLAS_STATUS_SUCCESS)
      throw CudaError("cublaslt: cublasLtCreate on " + device.str() + " failed: " + api.name(s));
  }
  ~QueryHandle() { api_.destroy(h_); }
  QueryHandle(const QueryHandle&) = delete;
  QueryHandle& operator=(const QueryHandle&) = delete;
  cublasLtHandle_t get() const { return h_; }

 private:
  const Api& api_;
  cublasLtHandle_t h_ = nullptr;
};

constexpr int kMaxAlgos = 16;

struct Heuristic {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  int count = 0;
  cublasLtMatmulHeuristicResult_t results[kMaxAlgos] = {};
};

// cuBLASLt's heuristic list (its first `want` entries) for the plan's descriptors, within
// `max_workspace` bytes, for addresses aligned to `alignment` bytes.
Heuristic query(const Api& api, cublasLtHandle_t handle, Device device, GemmPlan& plan,
                uint64_t max_workspace, uint32_t alignment, int want) {
  Heuristic h;
  cublasLtMatmulPreferenceOpaque_t pref_mem;
  auto* pref = reinterpret_cast<cublasLtMatmulPreference_t>(&pref_mem);
  h.status = api.preference_init(pref, sizeof(pref_mem));
  if (h.status == CUBLAS_STATUS_SUCCESS)
    h.status = api.preference_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                  sizeof(max_workspace));
  for (auto attr :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (h.status == CUBLAS_STATUS_SUCCESS)
      h.status = api.preference_set(pref, attr, &alignment, sizeof(alignment));
  // The heuristic reads the bias address only for its alignment: an address aligned exactly so
  // stands for the call's.
  const void* bias_stand_in = reinterpret_cast<const void*>(uintptr_t{alignment});
  cublasLtMatmulDescOpaque_t desc;
  if (h.status == CUBLAS_STATUS_SUCCESS)
    h.status = init_desc(api, desc, plan.table_, bias_stand_in);
  if (h.status != CUBLAS_STATUS_SUCCESS) return h;
  detail::DeviceGuard guard(device.ordinal());
  auto L = [](cublasLtMatrixLayoutOpaque_t& l) {
    return reinterpret_cast<cublasLtMatrixLayout_t>(&l);
  };
  h.status = api.get_heuristic(handle, reinterpret_cast<cublasLtMatmulDesc_t>(&desc),
                               L(plan.a_layout_), L(plan.b_layout_), L(plan.c_layout_),
                               L(plan.d_layout_), pref, want, h.results, &h.count);
  return h;
}

void* create_handle(Device device, void* /*stream: cuBLASLt takes it per call*/) {
  const Loaded& lib = process();
  if (!lib.ok) throw NotSupported("cublaslt: " + lib.status);
  detail::DeviceGuard guard(device.ordinal());
  cublasLtHandle_t h = nullptr;
  const cublasStatus_t s = lib.api.create(&h);
  if (s != CUBLAS_STATUS_SUCCESS)
    throw CudaError("cublaslt: cublasLtCreate on " + device.str() + " failed: " + lib.api.name(s));
  return h;
}

void destroy_handle(void* handle) noexcept {
  process().api.destroy(static_cast<cublasLtHandle_t>(handle));
}

// cuBLASLt takes the stream per matmul: any stream may share a handle.
void keep_stream(void*, void*) {}

}  // namespace

const Library& handle_library() {
  static const Library library{"cublasLt", &create_handle, &destroy_handle, &keep_stream};
  return library;
}

const cublasLtMatmulAlgo_t* algo_of(const plan::CompiledPlan& plan) {
  const auto* p = dynamic_cast<const GemmPlan*>(&plan);
  return p ? &p->algo_ : nullptr;
}

std::shared_ptr<const plan::CompiledPlan> build_gemm_plan(const Loaded& lib, const GemmProblem& p,
                                                          const GemmKnobs& knobs, Device device,
                                                          int multiprocessors,
                                                          const plan::OperandLayout& layout,
                                                          const std::string& engine) {
  const Api& api = lib.api;
  auto decline = [&](const std::string& why) {
    throw NotSupported(engine + ": " + why + " (" + p.describe() + ")");
  };
  auto plan = std::make_shared<GemmPlan>(api, engine);

  // ---- the per-call table: operands, their strides and alignment ----
  plan->rules_.add(layout, p.ta, device, /*row_major=*/false);
  plan->rules_.add(layout, p.tb, device, /*row_major=*/false);
  if (p.tbias.defined()) plan->rules_.add(layout, p.tbias, device, /*row_major=*/false);
  plan->rules_.add(layout, p.out, device, /*row_major=*/true);
  plan->strides_.push_back(engines::stride_rule(layout, p.ta, engine));
  plan->strides_.push_back(engines::stride_rule(layout, p.tb, engine));
  if (p.tbias.defined()) plan->strides_.push_back(engines::stride_rule(layout, p.tbias, engine));
  plan->a_ = layout.index_of(p.ta);
  plan->b_ = layout.index_of(p.tb);
  plan->bias_ = p.tbias.defined() ? layout.index_of(p.tbias) : -1;
  plan->out_ = layout.index_of(p.out);
  plan->pointers_[0] = plan->a_;
  plan->pointers_[1] = plan->b_;
  plan->pointers_[2] = plan->bias_;
  plan->pointers_[3] = plan->out_;
  plan->bias_matrix_ = p.bias_form == BiasForm::matrix;
  plan->device_ = device;

  // ---- descriptors (see the comment at the top for the swap) ----
  DescTable& t = plan->table_;
  t.compute =
      p.dtype == DType::f32 && knobs.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  t.trans_a = p.b.col_major ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is eagle's b
  t.trans_b = p.a.col_major ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B is eagle's a
  const bool vec = p.bias_form == BiasForm::vector;
  switch (p.epilogue) {
    case GemmEpilogue::none:
      t.epilogue = vec ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      break;
    case GemmEpilogue::relu:
      t.epilogue = vec ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
      break;
    case GemmEpilogue::gelu_tanh:
      t.epilogue = vec ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      break;
    case GemmEpilogue::gelu:
    case GemmEpilogue::gelu_backward:
      decline("no cuBLASLt epilogue for " + p.describe());  // require_cublaslt_epilogue's
  }
  t.bias_vector = vec;
  t.bias_batch_stride = vec ? p.bias.batch_stride : 0;
  t.sm_target = sm_count_target(p.m, p.n, p.batch, multiprocessors, knobs.sm_share);
  const Matrix d{p.m, p.n, false, p.n, p.m * p.n};
  if (!init_layout(api, plan->a_layout_, p.dtype, p.b, p.batch) ||
      !init_layout(api, plan->b_layout_, p.dtype, p.a, p.batch) ||
      !init_layout(api, plan->c_layout_, p.dtype, plan->bias_matrix_ ? p.bias : d, p.batch) ||
      !init_layout(api, plan->d_layout_, p.dtype, d, p.batch))
    decline("cuBLASLt refused a matrix layout");

  // ---- the algorithms: entry `algo` of the heuristic list on the target device for aligned
  // addresses, and the best entry for addresses aligned to the element only ----
  const uint64_t max_workspace = static_cast<uint64_t>(knobs.workspace_mb) << 20;
  const QueryHandle handle(api, device);
  const int want = static_cast<int>(std::min<int64_t>(knobs.algo + 1, kMaxAlgos));
  Heuristic aligned = query(api, handle.get(), device, *plan, max_workspace, kAlignedBytes, want);
  if (aligned.status != CUBLAS_STATUS_SUCCESS)
    decline("cuBLASLt's heuristic has no algorithm for this problem: " + api.name(aligned.status));
  if (knobs.algo >= aligned.count)
    decline("cuBLASLt's heuristic lists " + std::to_string(aligned.count) +
            " algorithm(s) for this problem within " + std::to_string(knobs.workspace_mb) +
            " MiB of workspace; algo " + std::to_string(knobs.algo) + " is past its end");
  const cublasLtMatmulHeuristicResult_t& r = aligned.results[knobs.algo];
  if (r.state != CUBLAS_STATUS_SUCCESS)
    decline("cuBLASLt's heuristic entry " + std::to_string(knobs.algo) +
            " is not usable: " + api.name(r.state));
  plan->algo_ = r.algo;
  plan->workspace_ = r.workspaceSize;
  plan->element_bytes_ = itemsize(p.dtype);
  const Heuristic loose = query(api, handle.get(), device, *plan, max_workspace,
                                static_cast<uint32_t>(itemsize(p.dtype)), 1);
  if (loose.status == CUBLAS_STATUS_SUCCESS && loose.count > 0 &&
      loose.results[0].state == CUBLAS_STATUS_SUCCESS) {
    plan->fallback_ = loose.results[0].algo;
    plan->has_fallback_ = true;
    plan->workspace_ = std::max(plan->workspace_, loose.results[0].workspaceSize);
  }
  return plan;
}

#else

const Library& handle_library() {
  static const Library library{
      "cublasLt", [](Device, void*) -> void* { throw NotSupported("cublaslt: no CUDA"); },
      [](void*) noexcept {}};
  return library;
}

std::shared_ptr<const plan::CompiledPlan> build_gemm_plan(const Loaded&, const GemmProblem&,
                                                          const GemmKnobs&, Device, int,
                                                          const plan::OperandLayout&,
                                                          const std::string& engine) {
  throw NotSupported(engine + ": this build of eagle has no CUDA");
}

#endif

}  // namespace eagle::cublaslt
