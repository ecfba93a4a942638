#include "engines/cudnn/frontend.hpp"

#include "eagle/core/error.hpp"

#ifdef EAGLE_HAVE_CUDA
#include <cuda_runtime.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "eagle/plan/manifest.hpp"
#include "eagle/plan/operand_rules.hpp"
#include "engines/cudnn/handle.hpp"
#include "engines/cudnn/knobs.hpp"
#include "engines/cudnn/loader.hpp"
#include "engines/cudnn/prep_kernels.hpp"
#include "util/cuda_check.hpp"
#endif

namespace eagle::cudnn {

#ifdef EAGLE_HAVE_CUDA

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

namespace {

[[noreturn]] void decline(const std::string& what, fe::error_t e) {
  throw NotSupported("cudnn: " + what + ": " + e.get_message());
}

fe::DataType_t data_type(DType d) {
  switch (d) {
    case DType::f16:
      return fe::DataType_t::HALF;
    case DType::bf16:
      return fe::DataType_t::BFLOAT16;
    case DType::f32:
      return fe::DataType_t::FLOAT;
    case DType::i32:
      return fe::DataType_t::INT32;
    case DType::i64:
      return fe::DataType_t::INT64;
    default:
      throw NotSupported("cudnn: no cuDNN data type for " + std::string(dtype_name(d)));
  }
}

// Planning (heuristics, plan builds) on one device shares one handle and is serialized:
// cudnn-frontend graphs and handles are not thread-safe. The handles live for the process
// (destroying them from a static destructor would race the driver's own teardown).
struct Planner {
  std::mutex mutex;
  void* handle = nullptr;
};
// One planning handle per device for the life of the process, destroyed at exit (before the CUDA
// runtime tears down: this static is made after it), so no device memory is left behind.
struct Planners {
  std::mutex mutex;
  std::map<int, std::unique_ptr<Planner>> by_device;
  ~Planners() {
    for (auto& [ordinal, p] : by_device)
      if (p && p->handle) handle_library().destroy(p->handle);
  }
};
Planner& planner(Device device) {
  [[maybe_unused]] static const Library& outlives_planners = handle_library();
  static Planners planners;
  std::lock_guard<std::mutex> lock(planners.mutex);
  auto& p = planners.by_device[device.ordinal()];
  if (!p) p = std::make_unique<Planner>();
  return *p;
}

void* planning_handle(Planner& p, Device device) {
  if (!p.handle) {
    try {
      p.handle = handle_library().create(device, nullptr);
    } catch (const Error& e) {
      throw NotSupported(std::string("cudnn: no cuDNN handle on ") + device.str() + ": " +
                         e.what());
    }
  }
  return p.handle;
}

Device device_of(const std::string& name) {
  Device d = Device::cpu();
  try {
    d = Device::parse(name);
  } catch (const InvalidArgument&) {
  }
  if (!d.is_cuda()) throw NotSupported("cudnn: runs on CUDA devices, not " + name);
  return d;
}

// The cudnn-frontend graph of a Lowered description, and every tensor with the uid eagle
// pushed for it (checked after cuDNN built the graph).
struct FeGraph {
  std::shared_ptr<fe::graph::Graph> graph;
  std::vector<std::pair<int64_t, TensorPtr>> pushed;

  void check_uids(const char* when) const {
    for (const auto& [uid, t] : pushed)
      if (t->get_uid() != uid)
        throw std::logic_error("cudnn: " + std::string(when) + ", tensor '" + t->get_name() +
                               "' has uid " + std::to_string(t->get_uid()) + ", eagle pushed " +
                               std::to_string(uid));
  }
};

std::vector<int64_t> first(const std::array<int64_t, 4>& a, int rank) {
  return std::vector<int64_t>(a.begin(), a.begin() + rank);
}

std::shared_ptr<fe::graph::Graph> new_graph(const Lowered& L, int sm) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(data_type(L.io))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // The sm of the device planned for: validation then needs no GPU.
  if (sm > 0) g->set_sm_version(sm);
  return g;
}

void describe(fe::graph::Tensor_attributes& a, const TensorDesc& d) {
  a.set_name(d.name)
      .set_uid(d.uid)
      .set_dim(first(d.dims, d.rank))
      .set_stride(first(d.strides, d.rank))
      .set_data_type(data_type(d.dtype));
}

fe::PointwiseMode_t pointwise_mode(const std::string& op) {
  static const std::map<std::string, fe::PointwiseMode_t> modes = {
      {"identity", fe::PointwiseMode_t::IDENTITY},
      {"neg", fe::PointwiseMode_t::NEG},
      {"abs", fe::PointwiseMode_t::ABS},
      {"exp", fe::PointwiseMode_t::EXP},
      {"log", fe::PointwiseMode_t::LOG},
      {"sqrt", fe::PointwiseMode_t::SQRT},
      {"rsqrt", fe::PointwiseMode_t::RSQRT},
      {"tanh", fe::PointwiseMode_t::TANH_FWD},
      {"sigmoid", fe::PointwiseMode_t::SIGMOID_FWD},
      {"relu", fe::PointwiseMode_t::RELU_FWD},
      {"gelu", fe::PointwiseMode_t::GELU_FWD},
      {"gelu_tanh", fe::PointwiseMode_t::GELU_APPROX_TANH_FWD},
      // cuDNN's activation backward modes read (dy, x), as eagle's gelu_backward reads (a, b).
      {"gelu_backward", fe::PointwiseMode_t::GELU_BWD},
      {"add", fe::PointwiseMode_t::ADD},
      {"sub", fe::PointwiseMode_t::SUB},
      {"mul", fe::PointwiseMode_t::MUL},
      {"div", fe::PointwiseMode_t::DIV}};
  const auto it = modes.find(op);
  if (it == modes.end()) throw NotSupported("cudnn: no pointwise mode for " + op);
  return it->second;
}

// A matmul and its epilogue: intermediates stay virtual (f32) inside the fused graph.
FeGraph make_matmul_graph(const Lowered& L, int sm) {
  FeGraph out;
  auto g = new_graph(L, sm);
  out.graph = g;
  auto operand = [&](int i) {
    fe::graph::Tensor_attributes a;
    describe(a, L.tensors[i]);
    TensorPtr t = g->tensor(a);
    out.pushed.emplace_back(L.tensors[i].uid, t);
    return t;
  };
  auto result = [&](const TensorPtr& t, int i) {
    if (i < 0) return;
    describe(*t, L.tensors[i]);
    t->set_output(true);
    out.pushed.emplace_back(L.tensors[i].uid, t);
  };
  const TensorPtr a = operand(0), b = operand(1);
  TensorPtr value =
      g->matmul(a, b,
                fe::graph::Matmul_attributes().set_name("matmul").set_compute_data_type(
                    fe::DataType_t::FLOAT));
  result(value, L.product);
  int i = 0;
  for (const PointwiseStep& step : L.epilogue) {
    fe::graph::Pointwise_attributes p;
    p.set_name("epilogue" + std::to_string(i++))
        .set_mode(pointwise_mode(step.op))
        .set_compute_data_type(fe::DataType_t::FLOAT);
    if (step.other < 0) {
      value = g->pointwise(value, p);
    } else {
      const TensorPtr other = operand(step.other);
      value = step.chain_first ? g->pointwise(value, other, p) : g->pointwise(other, value, p);
    }
    result(value, step.out);
  }
  return out;
}

// layernorm / rmsnorm forward; epsilon is passed by value.
FeGraph make_norm_graph(const Lowered& L, int sm) {
  FeGraph out;
  auto g = new_graph(L, sm);
  out.graph = g;
  auto operand = [&](const char* name) -> TensorPtr {
    const TensorDesc* d = L.find(name);
    if (!d) return nullptr;
    fe::graph::Tensor_attributes a;
    describe(a, *d);
    TensorPtr t = g->tensor(a);
    out.pushed.emplace_back(d->uid, t);
    return t;
  };
  auto result = [&](const TensorPtr& t, const char* name) {
    describe(*t, *L.find(name));
    t->set_output(true);
    out.pushed.emplace_back(L.find(name)->uid, t);
  };
  const TensorPtr x = operand("x"), scale = operand("scale"), bias = operand("bias");
  const auto phase = L.stats ? fe::NormFwdPhase_t::TRAINING : fe::NormFwdPhase_t::INFERENCE;
  if (L.op == Lowered::Op::layer_norm) {
    fe::graph::Layernorm_attributes a;
    a.set_name("layer_norm")
        .set_forward_phase(phase)
        .set_epsilon(static_cast<float>(L.epsilon))
        .set_compute_data_type(fe::DataType_t::FLOAT);
    auto [y, mean, inv_variance] = g->layernorm(x, scale, bias, a);
    result(y, "y");
    if (L.stats) {
      result(mean, "mean");
      result(inv_variance, "inv_variance");
    }
  } else {
    fe::graph::Rmsnorm_attributes a;
    auto epsilon = std::make_shared<fe::graph::Tensor_attributes>(static_cast<float>(L.epsilon));
    a.set_name("rms_norm")
        .set_forward_phase(phase)
        .set_epsilon(epsilon)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    TensorPtr b = bias;
    if (b) a.set_bias(b);
    auto [y, inv_rms] = g->rmsnorm(x, scale, a);
    result(y, "y");
    if (L.stats) result(inv_rms, "inv_rms");
  }
  return out;
}

FeGraph make_graph(const Lowered& L, int sm) {
  if (L.op == Lowered::Op::matmul) return make_matmul_graph(L, sm);
  if (L.op == Lowered::Op::layer_norm || L.op == Lowered::Op::rms_norm)
    return make_norm_graph(L, sm);
  FeGraph out;
  auto g = new_graph(L, sm);
  out.graph = g;
  auto push = [&](TensorPtr t, int64_t uid) {
    out.pushed.emplace_back(uid, t);
    return t;
  };
  auto index_tensor = [&](const std::string& name, int64_t uid, int64_t n, DType d) {
    return push(g->tensor(fe::graph::Tensor_attributes()
                              .set_name(name)
                              .set_uid(uid)
                              .set_dim({n, 1, 1, 1})
                              .set_stride({1, 1, 1, 1})
                              .set_data_type(data_type(d))),
                uid);
  };
  std::map<int64_t, TensorPtr> offsets;
  for (const RaggedOffsets& o : L.offsets)
    offsets[o.uid] =
        index_tensor("ragged_offset_" + std::to_string(o.uid), o.uid, L.batch + 1, o.dtype);
  auto ragged_describe = [&](fe::graph::Tensor_attributes& a, const TensorDesc& d) {
    describe(a, d);
    if (d.ragged_uid >= 0) a.set_ragged_offset(offsets.at(d.ragged_uid));
  };
  auto input = [&](const char* name) {
    fe::graph::Tensor_attributes a;
    ragged_describe(a, *L.find(name));
    return push(g->tensor(a), L.find(name)->uid);
  };
  auto output = [&](const TensorPtr& t, const char* name) {
    ragged_describe(*t, *L.find(name));
    t->set_output(true);
    push(t, L.find(name)->uid);
  };
  TensorPtr seq_q, seq_kv;
  if (L.ragged) {
    seq_q = index_tensor("seq_len_q", L.seq_len_q_uid, L.batch, DType::i32);
    seq_kv = index_tensor("seq_len_kv", L.seq_len_kv_uid, L.batch, DType::i32);
  }
  const TensorPtr q = input("q"), k = input("k"), v = input("v");
  const auto scale = static_cast<float>(L.scale);
  if (L.op == Lowered::Op::sdpa) {
    fe::graph::SDPA_attributes a;
    a.set_name("sdpa").set_generate_stats(L.stats).set_attn_scale(scale);
    if (L.causal) a.set_causal_mask_bottom_right(true);
    if (L.ragged)
      a.set_padding_mask(true)
          .set_seq_len_q(seq_q)
          .set_seq_len_kv(seq_kv)
          .set_max_total_seq_len_q(L.s_q)
          .set_max_total_seq_len_kv(L.s_kv);
    auto [o, stats] = g->sdpa(q, k, v, a);
    output(o, "o");
    if (L.stats) output(stats, "stats");
  } else {
    const TensorPtr o = input("o"), d_o = input("d_o"), stats = input("stats");
    fe::graph::SDPA_backward_attributes a;
    a.set_name("sdpa_bwd").set_attn_scale(scale);
    if (L.causal) a.set_causal_mask_bottom_right(true);
    if (L.ragged)
      a.set_padding_mask(true)
          .set_seq_len_q(seq_q)
          .set_seq_len_kv(seq_kv)
          .set_max_total_seq_len_q(L.s_q)
          .set_max_total_seq_len_kv(L.s_kv);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, a);
    output(dq, "dq");
    output(dk, "dk");
    output(dv, "dv");
  }
  return out;
}

void check_validates(const FeGraph& g, const Lowered& L) {
  fe::error_t st = g.graph->validate();
  if (st.is_bad()) decline("cuDNN does not take " + L.summary(), st);
  g.check_uids("after validate");  // validate() assigns the uids eagle left to cuDNN
}

// Lowers, validates and builds cuDNN's operation graph on the planning handle (held locked).
FeGraph operation_graph(const Lowered& L, int sm, void* handle) {
  FeGraph g = make_graph(L, sm);
  check_validates(g, L);
  fe::error_t st = g.graph->build_operation_graph(static_cast<cudnnHandle_t>(handle));
  if (st.is_bad()) decline("cuDNN could not build the operation graph of " + L.summary(), st);
  g.check_uids("after build_operation_graph");
  return g;
}

const CudnnLibrary& loaded_or_decline() {
  const CudnnLibrary& lib = cudnn_library();
  if (!lib.loaded) throw NotSupported("cudnn: " + lib.status);
  return lib;
}

// ---- the compiled plan

constexpr int kMaxSlots = 32;
constexpr std::size_t kAlign = 256;

std::size_t align_up(std::size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

thread_local std::string t_last_error;  // why run() refused, for explain() on this thread

enum class Prep : uint8_t { none, ragged, stats_copy };

class CudnnPlan final : public plan::CompiledPlan {
 public:
  CudnnPlan(const op::Graph& graph, const Lowered& L, FeGraph g, const plan::BuildContext& ctx,
            const CudnnLibrary& lib)
      : graph_(std::move(g.graph)), set_stream_(lib.api.set_stream), summary_(L.summary()) {
    const plan::OperandLayout& layout = *ctx.layout;
    const Device device = ctx.target.value_or(device_of(ctx.device.device));
    // Operand rules: every eagle tensor the plan reads or writes, at its declared dims, dtype
    // and strides.
    auto require = [&](int64_t uid, bool row_major) {
      const op::Tensor t = graph.tensor_by_uid(uid);
      rules_.add(layout, t, device, row_major);
      StrideRule s{layout.index_of(uid), static_cast<int32_t>(t.dims().size()), {}, {}, t.name()};
      for (std::size_t i = 0; i < t.dims().size(); ++i) {
        s.dims[i] = t.dims()[i];
        s.strides[i] = t.strides()[i];
      }
      strides_.push_back(s);
      return s.position;
    };
    for (const TensorDesc& d : L.tensors)
      if (!d.in_workspace) require(d.uid, false);
    // The plan's own arrays, after cuDNN's workspace.
    const std::size_t cudnn_ws = static_cast<std::size_t>(graph_->get_workspace_size());
    std::size_t at = align_up(cudnn_ws);
    std::map<int64_t, std::size_t> own;  // uid -> byte offset in the workspace
    auto reserve = [&](int64_t uid, std::size_t bytes) {
      own[uid] = at;
      at += align_up(bytes);
      return reinterpret_cast<void*>(own[uid]);  // an offset until run() adds the base
    };
    if (L.ragged) {
      prep_ = Prep::ragged;
      const auto b = static_cast<std::size_t>(L.batch);
      ragged_.cu_is64 = L.cu_dtype == DType::i64;
      ragged_.batch = L.batch;
      ragged_.rows_q = L.s_q;
      ragged_.rows_kv = L.s_kv;
      ragged_.max_len_q = L.seq_q;
      ragged_.max_len_kv = L.seq_kv;
      cu_q_pos_ = require(L.cu_q_uid, true);
      cu_kv_pos_ = require(L.cu_kv_uid, true);
      ragged_.seq_len_q = static_cast<int32_t*>(reserve(L.seq_len_q_uid, b * 4));
      ragged_.seq_len_kv = static_cast<int32_t*>(reserve(L.seq_len_kv_uid, b * 4));
      for (const RaggedOffsets& o : L.offsets) {
        if (!o.derived) {
          require(o.uid, true);
          continue;
        }
        const int j = ragged_.n_offsets++;
        ragged_.offsets[j] = static_cast<int64_t*>(reserve(o.uid, (b + 1) * 8));
        ragged_.row_elems[j] = o.row_elems;
        ragged_.kv_side[j] = o.kv_side;
      }
      // dK and dV rows of a sequence with keys but no queries are zeroed after cuDNN. With one
      // cu_seqlens for both sides (self-attention) no sequence is like that: no zeroing kernel,
      // one launch less on the backward's path.
      const bool one_cu = L.cu_q_uid == L.cu_kv_uid && L.s_q == L.s_kv;
      if (L.op == Lowered::Op::sdpa_bwd && !one_cu)
        for (const char* port : {"dk", "dv"}) {
          const TensorDesc* t = L.find(port);
          const int j = ragged_.n_zero++;
          zero_pos_[j] = require(t->uid, false);
          // A THD row is one token's [Hk, D] (cuDNN's dims 1 and 3), rows the S stride apart.
          const auto item = static_cast<int64_t>(itemsize(t->dtype));
          ragged_.zero_row_bytes[j] = t->dims[1] * t->dims[3] * item;
          ragged_.zero_row_pitch[j] = t->strides[2] * item;
        }
      launch_ = ragged_prep_launch(ragged_);
      if (ragged_.n_zero > 0) {
        // The zeroing runs after cuDNN (which may write those rows too); the same kernel before
        // it only derives lengths and offsets.
        zero_launch_ = launch_;
        launch_.grid_y = 1;
      }
    } else if (L.stats_copy_uid >= 0) {
      prep_ = Prep::stats_copy;
      stats_src_pos_ = require(L.stats_source_uid, false);
      copy_.batch = L.batch;
      copy_.heads = L.heads;
      copy_.seq = L.seq_q;
      copy_.stride_b = L.stats_source_strides[0];
      copy_.stride_s = L.stats_source_strides[1];
      copy_.stride_h = L.stats_source_strides[2];
      copy_.dst = static_cast<float*>(
          reserve(L.stats_copy_uid, static_cast<std::size_t>(L.batch * L.heads * L.seq_q) * 4));
      launch_ = stats_copy_launch(copy_, ctx.device.multiprocessors);
    }
    workspace_ = at;
    // The variant pack: cuDNN's user slots (ascending uid), each an operand position or one of
    // the plan's arrays. Fixed here; run() fills it in one loop.
    const std::vector<int64_t> uids = graph_->get_variant_pack_uids_sorted();
    if (uids.size() > kMaxSlots)
      throw NotSupported("cudnn: " + std::to_string(uids.size()) + " variant pack slots, over " +
                         std::to_string(kMaxSlots));
    const std::vector<int64_t>& operand_uids = layout.uids();
    for (int64_t uid : uids) {
      Slot s;
      s.uid = uid;
      if (own.count(uid)) {
        s.offset = own.at(uid);
      } else if (std::find(operand_uids.begin(), operand_uids.end(), uid) != operand_uids.end()) {
        s.position = layout.index_of(uid);
      } else {
        throw std::logic_error("cudnn: cuDNN's variant pack names uid " + std::to_string(uid) +
                               ", which neither the caller nor the plan fills");
      }
      slots_.push_back(s);
    }
  }

  std::size_t workspace_bytes() const override { return workspace_; }
  const Library* library() const override { return &handle_library(); }

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!usable(ops, ctx)) return false;
    try {
      char* ws = static_cast<char*>(ctx.workspace);
      const int ss = set_stream_(ctx.handle, ctx.stream);
      if (ss != 0) return fail("cudnnSetStream failed: " + status_string(ss));
      if (prep_ != Prep::none) {
        const auto args = prep_args(ops, ws);
        if (!launch_prep(launch_, args.data(), ctx.stream))
          return fail(std::string("the preparatory kernel did not launch: ") +
                      cudaGetErrorString(cudaGetLastError()));
      }
      std::array<void*, kMaxSlots> ptrs;
      fill(ops, ws, ptrs.data());
      fe::error_t st = graph_->execute(static_cast<cudnnHandle_t>(ctx.handle), ptrs.data(),
                                       static_cast<int>(slots_.size()), ctx.workspace);
      if (st.is_bad()) return fail("cuDNN execute failed: " + st.get_message());
      if (zero_launch_.kernel) {
        const auto args = prep_args(ops, ws);
        if (!launch_prep(zero_launch_, args.data(), ctx.stream))
          return fail(std::string("the zeroing kernel did not launch: ") +
                      cudaGetErrorString(cudaGetLastError()));
      }
      return true;
    } catch (const std::exception& e) {
      return fail(e.what());
    } catch (...) {
      return fail("cuDNN execute threw");
    }
  }

  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    rules_.explain(ops);
    for (const StrideRule& s : strides_)
      if (!strides_match(s, ops[s.position]))
        throw InvalidArgument("cudnn plan: operand '" + s.name + "' must have the strides it was " +
                              "declared with (the plan was built for them); got " +
                              plan::describe(ops[s.position]));
    if (!ctx.handle)
      throw InvalidArgument("cudnn plan: the context holds no cuDNN handle (library() is cudnn)");
    if (workspace_ && (!ctx.workspace || ctx.workspace_bytes < workspace_))
      throw InvalidArgument("cudnn plan: needs a workspace of " + std::to_string(workspace_) +
                            " bytes, the context has " + std::to_string(ctx.workspace_bytes));
    throw CudaError("cudnn plan (" + summary_ + "): " + t_last_error);
  }

  // Ragged plans add their preparatory kernel node and cuDNN's graph as a child after it;
  // dense ones hand cuDNN the graph itself.
  // The benchmark's direct path (frontend_pointers / frontend_execute).
  void pointers(const plan::OperandBuffer* ops, void* ws, std::vector<void*>& out) const {
    out.resize(slots_.size());
    fill(ops, static_cast<char*>(ws), out.data());
  }
  bool execute_direct(void* handle, void** ptrs, void* ws) const {
    return graph_
        ->execute(static_cast<cudnnHandle_t>(handle), ptrs, static_cast<int>(slots_.size()), ws)
        .is_good();
  }

  bool populate_cuda_graph(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx,
                           void* graph) const override {
    if (!usable(ops, ctx)) return false;
    std::lock_guard<std::mutex> lock(graph_mutex_);
    auto target = static_cast<cudaGraph_t>(graph);
    char* ws = static_cast<char*>(ctx.workspace);
    cudaGraphNode_t prep = nullptr;
    cudaGraph_t inner = nullptr;
    if (prep_ != Prep::none) {
      auto args = prep_args(ops, ws);
      void* params[] = {args.data()};
      cudaKernelNodeParams p = kernel_params(params);
      if (cudaGraphAddKernelNode(&prep, target, nullptr, 0, &p) != cudaSuccess) return false;
      if (cudaGraphCreate(&inner, 0) != cudaSuccess) return false;
      target = inner;
    }
    std::unordered_map<int64_t, void*> pack = uid_pack(ops, ws);
    bool ok = false;
    try {
      ok = graph_
               ->populate_cuda_graph(static_cast<cudnnHandle_t>(ctx.handle), pack, ctx.workspace,
                                     target)
               .is_good();
    } catch (const std::exception&) {
      ok = false;
    }
    if (ok && inner) {
      cudaGraphNode_t child = nullptr;
      ok = cudaGraphAddChildGraphNode(&child, static_cast<cudaGraph_t>(graph), &prep, 1, inner) ==
           cudaSuccess;
      if (ok && zero_launch_.kernel) {
        auto args = prep_args(ops, ws);
        void* params[] = {args.data()};
        cudaKernelNodeParams p = kernel_params(params, zero_launch_);
        cudaGraphNode_t zero = nullptr;
        ok = cudaGraphAddKernelNode(&zero, static_cast<cudaGraph_t>(graph), &child, 1, &p) ==
             cudaSuccess;
      }
    }
    if (inner) cudaGraphDestroy(inner);
    return ok;
  }

  bool update_cuda_graph(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx,
                         void* graph) const override {
    if (!usable(ops, ctx)) return false;
    std::lock_guard<std::mutex> lock(graph_mutex_);
    auto target = static_cast<cudaGraph_t>(graph);
    char* ws = static_cast<char*>(ctx.workspace);
    if (prep_ != Prep::none) {
      // The graph populate_cuda_graph made: the kernel node (its one root), then the child.
      cudaGraphNode_t root = nullptr, child = nullptr;
      std::size_t n = 1;
      if (cudaGraphGetRootNodes(target, &root, &n) != cudaSuccess || n != 1) return false;
      n = 1;
      if (cudaGraphNodeGetDependentNodes(root, &child, nullptr, &n) != cudaSuccess || n != 1)
        return false;
      auto args = prep_args(ops, ws);
      void* params[] = {args.data()};
      cudaKernelNodeParams p = kernel_params(params);
      if (cudaGraphKernelNodeSetParams(root, &p) != cudaSuccess) return false;
      if (zero_launch_.kernel) {  // then the zeroing node after the child
        cudaGraphNode_t zero = nullptr;
        n = 1;
        if (cudaGraphNodeGetDependentNodes(child, &zero, nullptr, &n) != cudaSuccess || n != 1)
          return false;
        cudaKernelNodeParams z = kernel_params(params, zero_launch_);
        if (cudaGraphKernelNodeSetParams(zero, &z) != cudaSuccess) return false;
      }
      if (cudaGraphChildGraphNodeGetGraph(child, &target) != cudaSuccess) return false;
    }
    std::unordered_map<int64_t, void*> pack = uid_pack(ops, ws);
    try {
      return graph_
          ->update_cuda_graph(static_cast<cudnnHandle_t>(ctx.handle), pack, ctx.workspace, target)
          .is_good();
    } catch (const std::exception&) {
      return false;
    }
  }

 private:
  struct Slot {
    int64_t uid = -1;
    int position = -1;       // an operand, or
    std::size_t offset = 0;  // a byte offset into the workspace
  };
  struct StrideRule {
    int position;
    int32_t ndim;
    int64_t dims[plan::kMaxOperandDims];
    int64_t strides[plan::kMaxOperandDims];
    std::string name;  // read only by explain()
  };

  static bool strides_match(const StrideRule& s, const plan::OperandBuffer& b) {
    for (int i = 0; i < s.ndim; ++i)
      if (s.dims[i] > 1 && b.strides[i] != s.strides[i]) return false;
    return true;
  }

  bool usable(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const {
    if (!rules_.match(ops)) return false;
    for (const StrideRule& s : strides_)
      if (!strides_match(s, ops[s.position])) return false;
    if (!ctx.handle) return false;
    return !workspace_ || (ctx.workspace && ctx.workspace_bytes >= workspace_);
  }

  static bool fail(std::string why) {
    t_last_error = std::move(why);
    return false;
  }

  // The preparatory kernel's argument struct with this call's addresses, as bytes.
  struct PrepBytes {
    alignas(16) unsigned char bytes[sizeof(RaggedPrepArgs) > sizeof(StatsCopyArgs)
                                        ? sizeof(RaggedPrepArgs)
                                        : sizeof(StatsCopyArgs)];
    const void* data() const { return bytes; }
    void* data() { return bytes; }
  };
  PrepBytes prep_args(const plan::OperandBuffer* ops, char* ws) const {
    PrepBytes out;
    if (prep_ == Prep::ragged) {
      RaggedPrepArgs a = ragged_;
      a.cu_q = ops[cu_q_pos_].data;
      a.cu_kv = ops[cu_kv_pos_].data;
      a.seq_len_q = reinterpret_cast<int32_t*>(ws + reinterpret_cast<std::size_t>(a.seq_len_q));
      a.seq_len_kv = reinterpret_cast<int32_t*>(ws + reinterpret_cast<std::size_t>(a.seq_len_kv));
      for (int j = 0; j < a.n_offsets; ++j)
        a.offsets[j] = reinterpret_cast<int64_t*>(ws + reinterpret_cast<std::size_t>(a.offsets[j]));
      for (int j = 0; j < a.n_zero; ++j) a.zero[j] = ops[zero_pos_[j]].data;
      std::memcpy(out.bytes, &a, sizeof(a));
    } else {
      StatsCopyArgs a = copy_;
      a.src = static_cast<const float*>(ops[stats_src_pos_].data);
      a.dst = reinterpret_cast<float*>(ws + reinterpret_cast<std::size_t>(a.dst));
      std::memcpy(out.bytes, &a, sizeof(a));
    }
    return out;
  }

  // `params` = {the args}: CUDA copies the argument bytes when the node is added or set.
  cudaKernelNodeParams kernel_params(void** params) const { return kernel_params(params, launch_); }
  cudaKernelNodeParams kernel_params(void** params, const PrepLaunch& launch) const {
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(launch.kernel);
    p.gridDim = dim3(launch.grid, launch.grid_y);
    p.blockDim = dim3(launch.block);
    p.kernelParams = params;
    return p;
  }

  void fill(const plan::OperandBuffer* ops, char* ws, void** ptrs) const {
    for (std::size_t i = 0; i < slots_.size(); ++i)
      ptrs[i] = slots_[i].position >= 0 ? ops[slots_[i].position].data : ws + slots_[i].offset;
  }

  std::unordered_map<int64_t, void*> uid_pack(const plan::OperandBuffer* ops, char* ws) const {
    std::unordered_map<int64_t, void*> pack;
    std::array<void*, kMaxSlots> ptrs;
    fill(ops, ws, ptrs.data());
    for (std::size_t i = 0; i < slots_.size(); ++i) pack[slots_[i].uid] = ptrs[i];
    return pack;
  }

  std::shared_ptr<fe::graph::Graph> graph_;
  int (*set_stream_)(void*, void*);
  std::string summary_;
  plan::OperandRules rules_;
  std::vector<StrideRule> strides_;
  std::vector<Slot> slots_;
  std::size_t workspace_ = 0;
  Prep prep_ = Prep::none;
  int zero_pos_[2] = {-1, -1};       // ragged backward: the operand positions of dk and dv
  PrepLaunch zero_launch_{nullptr};  // ragged backward: the zeroing after cuDNN, else no kernel
  PrepLaunch launch_;
  RaggedPrepArgs ragged_;  // addresses are workspace offsets until prep_args()
  StatsCopyArgs copy_;
  int cu_q_pos_ = -1, cu_kv_pos_ = -1, stats_src_pos_ = -1;
  mutable std::mutex graph_mutex_;  // cudnn-frontend's populate/update are not thread-safe
};

}  // namespace

void validate(const Lowered& L, const DeviceProperties& device) {
  loaded_or_decline();
  if (device.sm <= 0) throw NotSupported("cudnn: runs on CUDA devices, not " + device.device);
  check_validates(make_graph(L, device.sm), L);
}

std::vector<EngineConfig> query(const Lowered& L, plan::HeurMode mode,
                                const DeviceProperties& device) {
  loaded_or_decline();
  const Device dev = device_of(device.device);
  Planner& p = planner(dev);
  std::lock_guard<std::mutex> lock(p.mutex);
  void* handle = planning_handle(p, dev);
  detail::DeviceGuard guard(dev.ordinal());
  FeGraph g = operation_graph(L, device.sm, handle);
  const fe::HeurMode_t m =
      mode == plan::HeurMode::FALLBACK ? fe::HeurMode_t::FALLBACK : fe::HeurMode_t::A;
  fe::error_t st = g.graph->create_execution_plans({m});
  if (st.is_bad()) decline("cuDNN's heuristics have no plan for " + L.summary(), st);
  std::vector<EngineConfig> out;
  for (int64_t i = 0; i < g.graph->get_execution_plan_count(); ++i) {
    int64_t id = -1;
    std::unordered_map<fe::KnobType_t, int64_t> knobs;
    if (g.graph->get_engine_and_knobs_at_index(i, id, knobs).is_bad()) continue;
    if (id < 0 || id >= plan::kBackendHeuristicEngineId) continue;  // outside the backend's ids
    EngineConfig c{id, {}};
    bool named = true;
    for (const auto& [type, value] : knobs) {
      const std::string name = knob_name(static_cast<int64_t>(type));
      named = named && !name.empty();  // an unnamed knob could not be replayed by name
      c.knobs[name] = value;
    }
    if (named) out.push_back(std::move(c));
  }
  return out;
}

std::shared_ptr<const plan::CompiledPlan> build(const op::Graph& graph, const Lowered& L,
                                                const plan::PlanConfig& config,
                                                const plan::BuildContext& ctx) {
  const CudnnLibrary& lib = loaded_or_decline();
  const Device dev = ctx.target.value_or(device_of(ctx.device.device));
  if (!dev.is_cuda()) throw NotSupported("cudnn: runs on CUDA devices, not " + dev.str());
  Planner& p = planner(dev);
  std::lock_guard<std::mutex> lock(p.mutex);
  void* handle = planning_handle(p, dev);
  detail::DeviceGuard guard(dev.ordinal());
  FeGraph g = operation_graph(L, ctx.device.sm, handle);
  fe::error_t st;
  if (config.engine_id == plan::kBackendHeuristicEngineId) {
    st = g.graph->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
  } else {
    std::unordered_map<fe::KnobType_t, int64_t> knobs;
    for (const auto& [name, value] : config.knobs) {
      const int64_t t = knob_type(name);
      if (t < 0) throw NotSupported("cudnn: no cuDNN knob named '" + name + "'");
      knobs[static_cast<fe::KnobType_t>(t)] = value;
    }
    st = g.graph->create_execution_plan(config.engine_id, knobs);
  }
  if (st.is_bad()) decline("no engine config " + std::to_string(config.engine_id), st);
  st = g.graph->build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE);
  if (st.is_bad())
    decline(
        "cuDNN could not build engine " + std::to_string(config.engine_id) + " for " + L.summary(),
        st);
  g.check_uids("after build_plans");
  return std::make_shared<CudnnPlan>(graph, L, std::move(g), ctx, lib);
}

bool frontend_pointers(const plan::CompiledPlan& plan, const plan::OperandBuffer* operands,
                       void* workspace, std::vector<void*>& pointers) {
  const auto* p = dynamic_cast<const CudnnPlan*>(&plan);
  if (p) p->pointers(operands, workspace, pointers);
  return p != nullptr;
}

bool frontend_execute(const plan::CompiledPlan& plan, void* handle, void** pointers,
                      void* workspace) {
  const auto* p = dynamic_cast<const CudnnPlan*>(&plan);
  return p && p->execute_direct(handle, pointers, workspace);
}

#else  // no CUDA: the backend offers nothing

void validate(const Lowered&, const DeviceProperties&) {
  throw NotSupported("cudnn: this build of eagle has no CUDA");
}
std::vector<EngineConfig> query(const Lowered&, plan::HeurMode, const DeviceProperties&) {
  throw NotSupported("cudnn: this build of eagle has no CUDA");
}
std::shared_ptr<const plan::CompiledPlan> build(const op::Graph&, const Lowered&,
                                                const plan::PlanConfig&,
                                                const plan::BuildContext&) {
  throw NotSupported("cudnn: this build of eagle has no CUDA");
}
bool frontend_pointers(const plan::CompiledPlan&, const plan::OperandBuffer*, void*,
                       std::vector<void*>&) {
  return false;
}
bool frontend_execute(const plan::CompiledPlan&, void*, void**, void*) {
  return false;
}

#endif

}  // namespace eagle::cudnn
