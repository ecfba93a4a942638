// compact_registers (engines/native/fused_kernels.hpp): the fused kernel's vector path sizes its
// shared-memory register file by the program's registers, so a dead value's register is reused;
// the renumbered program must compute what the single-assignment one did. Host only: the
// programs run through this file's own interpreter of the few ops they use.
#include <gtest/gtest.h>

#include <vector>

#include "engines/native/fused_kernels.hpp"
#include "random.hpp"

namespace eagle::native {
namespace {

constexpr int kFile = kFusedMaxInputs + kFusedMaxInstructions;

uint8_t op_of(PwOp op) {
  return static_cast<uint8_t>(op);
}

// Adds an instruction in single-assignment form (dst = inputs + its index); returns dst.
int emit(FusedProgram& p, uint8_t op, int a, int b = -1, int c = -1) {
  const int k = p.instructions++;
  const int dst = p.inputs + k;
  p.code[k] = {op,
               static_cast<uint8_t>(dst),
               static_cast<uint8_t>(a),
               static_cast<uint8_t>(b < 0 ? a : b),
               static_cast<uint8_t>(c < 0 ? a : c),
               FusedType::f32};
  return dst;
}

void output(FusedProgram& p, int reg) {
  p.out_reg[p.outputs++] = static_cast<uint8_t>(reg);
}

// The program's outputs for one element: operands read before the result is written, as the
// kernel does.
std::vector<float> interpret(const FusedProgram& p, const std::vector<float>& in) {
  float r[kFile] = {};
  for (int k = 0; k < p.inputs; ++k) r[k] = in[static_cast<std::size_t>(k)];
  for (int k = 0; k < p.instructions; ++k) {
    const FusedInstruction& c = p.code[k];
    const float a = r[c.a], b = r[c.b], cc = r[c.c];
    float v = 0;
    if (c.op == op_of(PwOp::add)) v = a + b;
    if (c.op == op_of(PwOp::mul)) v = a * b;
    if (c.op == op_of(PwOp::sub)) v = a - b;
    if (c.op == op_of(PwOp::neg)) v = -a;
    if (c.op == static_cast<uint8_t>(FusedExtra::where)) v = a != 0 ? b : cc;
    r[c.dst] = v;
  }
  std::vector<float> out;
  for (int k = 0; k < p.outputs; ++k) out.push_back(r[p.out_reg[k]]);
  return out;
}

void expect_same_values(const FusedProgram& ssa, const FusedProgram& compact) {
  const std::vector<double> values = test::random_values(static_cast<std::size_t>(ssa.inputs) * 16);
  for (int trial = 0; trial < 16; ++trial) {
    std::vector<float> in;
    for (int k = 0; k < ssa.inputs; ++k)
      in.push_back(static_cast<float>(values[static_cast<std::size_t>(trial * ssa.inputs + k)]));
    EXPECT_EQ(interpret(compact, in), interpret(ssa, in)) << "trial " << trial;
  }
}

TEST(FusedRegisters, AChainOfUnaryOpsReusesOneRegister) {
  FusedProgram p{};
  p.inputs = 1;
  int v = 0;
  for (int k = 0; k < 12; ++k) v = emit(p, op_of(PwOp::neg), v);
  output(p, v);
  const FusedProgram ssa = p;
  compact_registers(p);
  EXPECT_EQ(p.registers, 1);
  expect_same_values(ssa, p);
}

// Inputs keep their registers; a value read later (x twice, t by two nodes) stays live; two
// outputs, one produced early, survive to the end; a where reads three operands.
TEST(FusedRegisters, LiveValuesKeepTheirRegistersAndOutputsSurvive) {
  FusedProgram p{};
  p.inputs = 3;  // x, w, s
  const int xw = emit(p, op_of(PwOp::mul), 0, 1);
  const int pre = emit(p, op_of(PwOp::add), xw, 2);
  const int out1 = emit(p, op_of(PwOp::mul), pre, 0);
  const int dead = emit(p, op_of(PwOp::neg), pre);  // nobody reads it
  const int t = emit(p, op_of(PwOp::sub), pre, 1);
  const int picked = emit(p, static_cast<uint8_t>(FusedExtra::where), 2, t, out1);
  const int out2 = emit(p, op_of(PwOp::add), picked, t);
  output(p, out1);
  output(p, out2);
  (void)dead;
  const FusedProgram ssa = p;
  compact_registers(p);
  EXPECT_LT(p.registers, ssa.inputs + ssa.instructions);
  EXPECT_LE(p.registers, 6);
  EXPECT_EQ(p.code[0].a, 0);  // x and w where the loads put them
  EXPECT_EQ(p.code[0].b, 1);
  EXPECT_NE(p.out_reg[0], p.out_reg[1]);
  expect_same_values(ssa, p);
}

TEST(FusedRegisters, TheVectorShapeNeedsAnInnermostDimOfEights) {
  FusedProgram p{};
  p.ndim = 2;
  p.dims[0] = 3;
  p.dims[1] = 4096;
  EXPECT_TRUE(fused_vector_shape(p));
  p.dims[1] = 4099;
  EXPECT_FALSE(fused_vector_shape(p));
  p.ndim = 0;
  EXPECT_FALSE(fused_vector_shape(p));
}

}  // namespace
}  // namespace eagle::native
