// Our CUDA fused pointwise kernel: a DAG of pointwise ops over one iteration shape, inputs
// broadcast to it, as ONE launch. The program (loads, instructions, stores) travels in the
// kernel's parameters; each thread interprets it per element with f32 registers, so no
// intermediate touches device memory. Every tensor has its own dtype (f32, f16, bf16 or
// boolean; u8 for inputs only, e.g. a mask: its values 0..255 are exact in f32): loads convert from
// it, each node's result is rounded to its output's dtype (as the reference rounds every node's
// output to its declared dtype), stores convert to it. The ops: those of EAGLE_POINTWISE_OPS, and
// the comparisons, logical ops, where and cast (FusedExtra). An interpreter, not generated code:
// the register file is indexed at run time. Where the innermost dim is a multiple of kFusedVec
// and every pointer is 16-byte aligned, each thread takes kFusedVec consecutive elements: vector
// loads and stores, one decode per instruction for all of them, the file in shared memory sized
// by the program's registers (compact_registers reuses a register once its value is dead). Else
// one element per thread, the file in local memory. (Measured on the H100: one element per
// thread moved 0.75 TB/s, a quarter of the copy rate: too few loads in flight.)
#pragma once

#include <cstdint>

#include "eagle/core/dtype.hpp"
#include "engines/native/pointwise_kernels.hpp"

namespace eagle::native {

inline constexpr int kFusedMaxInputs = 8;
inline constexpr int kFusedMaxOutputs = 8;
inline constexpr int kFusedMaxInstructions = 32;
inline constexpr int kFusedMaxDims = 8;
inline constexpr int kFusedVec = 8;  // elements per thread on the vector path

// A tensor's storage as the kernel reads and writes it.
enum class FusedType : uint8_t { f32, f16, bf16, boolean, u8 };
// The fused type of `dtype`; false for a dtype the kernel does not hold (integers, f64).
bool fused_type_of(DType dtype, FusedType& type);

// The ops beyond EAGLE_POINTWISE_OPS, numbered after it (an instruction's op is either).
enum class FusedExtra : uint8_t {
  cmp_eq = 64,
  cmp_neq,
  cmp_lt,
  cmp_le,
  cmp_gt,
  cmp_ge,
  logical_not,
  logical_and,
  logical_or,
  where,  // cond (a) != 0 ? b : c
  cast,   // the value; the node's dtype rounds it
};
// The op code of an IR pointwise op for the fused kernel; false for none.
bool fused_op_of(std::string_view name, uint8_t& op);

struct FusedInstruction {
  uint8_t op;            // a PwOp, or a FusedExtra
  uint8_t dst, a, b, c;  // registers: inputs first, then one per instruction
  FusedType type;        // the node output's dtype: the result is rounded to it
};

// A plain aggregate (a kernel parameter): value-initialise it, FusedProgram p{}.
struct FusedProgram {
  int32_t inputs, outputs, instructions, ndim;
  int32_t registers;  // registers the code names (inputs first): the file's size
  int64_t numel;
  int64_t dims[kFusedMaxDims];  // the iteration shape, outermost first
  const void* in[kFusedMaxInputs];
  FusedType in_type[kFusedMaxInputs];
  // Per input: element strides over the iteration dims (0 where it broadcasts); dense inputs
  // (the iteration shape itself) are indexed by the flat index directly.
  int64_t in_strides[kFusedMaxInputs][kFusedMaxDims];
  bool in_dense[kFusedMaxInputs];
  // Per input: one element (a constant): offset 0 for every index, no division.
  bool in_scalar[kFusedMaxInputs];
  // Per input: broadcast along the innermost dim (one value serves a vector's elements).
  bool in_splat[kFusedMaxInputs];
  // Per input: no instruction reads it (where(cond, a, a) reads a alone): never loaded.
  bool in_unread[kFusedMaxInputs];
  void* out[kFusedMaxOutputs];
  FusedType out_type[kFusedMaxOutputs];
  uint8_t out_reg[kFusedMaxOutputs];
  FusedInstruction code[kFusedMaxInstructions];
};

// Renumbers the code's registers so that a register whose value no later instruction or output
// reads is reused (inputs keep 0..inputs-1; outputs live to the end), and sets `registers`. The
// program computes the same values.
void compact_registers(FusedProgram& program);

// Whether the vector path serves the program's shape (innermost dim a multiple of kFusedVec);
// it also needs the pointers it reads in vectors (inputs not splat, every output) 16-byte
// aligned, which the caller checks per call.
bool fused_vector_shape(const FusedProgram& program);

// Issues the program on `stream` for a device with `multiprocessors` SMs, on the vector path
// when `vector` (the caller checked shape and pointers) else one element per thread. Returns
// false on a launch error; never throws.
using FusedLauncher = bool (*)(const FusedProgram& program, bool vector, int multiprocessors,
                               void* stream) noexcept;
// The launcher (one kernel per path for every dtype mix), or nullptr in a build without CUDA.
FusedLauncher fused_launcher();

}  // namespace eagle::native
