// Our CUDA fused pointwise kernel: a DAG of ops of EAGLE_POINTWISE_OPS over one iteration shape,
// inputs broadcast to it, as ONE launch. The program (loads, instructions, stores) travels in the
// kernel's parameters; each thread interprets it per element with f32 registers, so no
// intermediate touches device memory. Each node's result is rounded to the io dtype, as the
// reference rounds every node's output to its declared dtype. An interpreter, not generated code:
// the register file is indexed at run time and lives in local memory (L1); a code generator is the
// step after this one if a measurement asks for it.
#pragma once

#include <cstdint>

#include "eagle/core/dtype.hpp"
#include "engines/native/pointwise_kernels.hpp"

namespace eagle::native {

inline constexpr int kFusedMaxInputs = 8;
inline constexpr int kFusedMaxOutputs = 8;
inline constexpr int kFusedMaxInstructions = 32;
inline constexpr int kFusedMaxDims = 8;

struct FusedInstruction {
  PwOp op;
  uint8_t dst, a, b;  // registers: inputs first, then one per instruction
};

// A plain aggregate (a kernel parameter): value-initialise it, FusedProgram p{}.
struct FusedProgram {
  int32_t inputs, outputs, instructions, ndim;
  int64_t numel;
  int64_t dims[kFusedMaxDims];  // the iteration shape, outermost first
  const void* in[kFusedMaxInputs];
  // Per input: element strides over the iteration dims (0 where it broadcasts); dense inputs
  // (the iteration shape itself) are indexed by the flat index directly.
  int64_t in_strides[kFusedMaxInputs][kFusedMaxDims];
  bool in_dense[kFusedMaxInputs];
  void* out[kFusedMaxOutputs];
  uint8_t out_reg[kFusedMaxOutputs];
  FusedInstruction code[kFusedMaxInstructions];
};

using FusedLauncher = bool (*)(const FusedProgram& program, unsigned grid, unsigned threads,
                               void* stream) noexcept;
// The launcher for `dtype` (f32, f16, bf16), or nullptr.
FusedLauncher fused_launcher(DType dtype);

}  // namespace eagle::native
