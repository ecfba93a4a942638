// What the native structured engines share on the host: reading a one-node graph, the checks
// every one of them declines with, and per-call alignment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "eagle/core/error.hpp"
#include "eagle/op/graph.hpp"
#include "eagle/plan/engine.hpp"
#include "eagle/plan/operand_rules.hpp"

namespace eagle::native {

// Declines with NotSupported("<engine>: <why>") unless `ok`.
inline void require(bool ok, const std::string& engine, const std::string& why) {
  if (!ok) throw NotSupported(engine + ": " + why);
}

// The graph's single node, declining graphs of several nodes or of an op outside `ops`.
op::Node single_node(const op::Graph& graph, const std::string& engine,
                     std::initializer_list<const char*> ops);

// Declines unless `t` is declared dense row-major.
void require_row_major(const op::Tensor& t, const std::string& engine);
// Declines unless the (wired) output `port` of `node` is one the caller receives.
void require_output(const op::Node& node, const char* port, const std::string& engine);
// Declines unless `d` is f32, f16 or bf16 (the kernels' float types), naming `what`.
void require_float_io(DType d, const std::string& what, const std::string& engine);

// `t` is wired and not virtual (the caller passes a buffer for it).
bool receives(const op::Tensor& t);
int64_t element_count(const op::Dims& dims);
// The device a plan is built for.
Device plan_device(const plan::BuildContext& ctx);

// What every native engine declares: CUDA from sm 80 (plain CUDA C++, built for Ampere and Hopper
// by EAGLE_CUDA_ARCHITECTURES), f32, f16 and bf16 data. An engine adds its knobs.
inline plan::Capabilities native_capabilities() {
  plan::Capabilities caps;
  caps.device = DeviceKind::cuda;
  caps.sm_lo = 80;
  caps.sm_hi = 1299;
  caps.dtypes = {DType::f32, DType::f16, DType::bf16};
  return caps;
}

// What every native plan's explain() says, in order: the operand rule the call breaks, a workspace
// smaller than `needed` bytes, else the launch error. Always throws; `what` names the plan
// ("native softmax").
[[noreturn]] void explain_refusal(const plan::OperandRules& rules, const plan::OperandBuffer* ops,
                                  const plan::ExecutionContext& ctx, std::size_t needed,
                                  const std::string& what);

// The workspace's regions start 256-byte aligned: `n` rounded up to the next region start.
inline std::size_t round_up_region(std::size_t n) noexcept {
  constexpr std::size_t kAlign = 256;
  return (n + kAlign - 1) / kAlign * kAlign;
}

// `t`'s dtype by name, "" for an unwired tensor (for messages).
std::string dtype_text(const op::Tensor& t);

// The rules every linear-attention engine (kda, gdn, their backwards) declines by: cu_seqlens
// i32; q bf16 or f16 and each of `same_as_q` in q's dtype; no operand with a ragged offset; every
// operand dense row-major; K = V in {64, 128}.
void require_linear_attention_operands(const op::Node& node, const std::string& engine,
                                       std::initializer_list<const char*> same_as_q);

inline bool aligned16(const void* p) noexcept {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

}  // namespace eagle::native
