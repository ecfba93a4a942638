// Register reuse for the fused pointwise program (fused_kernels.hpp): the vector path keeps the
// file in shared memory, kFusedVec floats per register per thread, so its size decides how many
// threads a block holds.
#include <algorithm>
#include <vector>

#include "engines/native/fused_kernels.hpp"

namespace eagle::native {

bool fused_vector_shape(const FusedProgram& p) {
  return p.ndim >= 1 && p.dims[p.ndim - 1] % kFusedVec == 0;
}

void compact_registers(FusedProgram& p) {
  const int values = p.inputs + p.instructions;  // the SSA numbering the engine writes
  constexpr int kForever = kFusedMaxInstructions;
  // The last instruction that reads each value; outputs are read after the last one.
  std::vector<int> last(static_cast<std::size_t>(values), -1);
  for (int k = 0; k < p.instructions; ++k)
    for (uint8_t r : {p.code[k].a, p.code[k].b, p.code[k].c}) last[r] = std::max(last[r], k);
  for (int k = 0; k < p.outputs; ++k) last[p.out_reg[k]] = kForever;

  std::vector<int> where(static_cast<std::size_t>(values), -1);  // value -> register
  std::vector<bool> busy;
  for (int k = 0; k < p.inputs; ++k) {
    where[k] = k;
    busy.push_back(true);
  }
  for (int k = 0; k < p.instructions; ++k) {
    FusedInstruction& c = p.code[k];
    const uint8_t a = c.a, b = c.b, cc = c.c;
    c.a = static_cast<uint8_t>(where[a]);
    c.b = static_cast<uint8_t>(where[b]);
    c.c = static_cast<uint8_t>(where[cc]);
    // Operands read for the last time free their registers before the result takes one: the
    // kernel reads every operand of an element before it writes the result.
    for (uint8_t r : {a, b, cc})
      if (last[r] == k) busy[static_cast<std::size_t>(where[r])] = false;
    const int dst = c.dst;
    auto free = std::find(busy.begin(), busy.end(), false);
    if (free == busy.end()) free = busy.insert(busy.end(), false);
    *free = true;
    where[dst] = static_cast<int>(free - busy.begin());
    c.dst = static_cast<uint8_t>(where[dst]);
    // A value nobody reads (a dead intermediate) frees its register at once.
    if (last[dst] < 0) *free = false;
  }
  for (int k = 0; k < p.outputs; ++k) p.out_reg[k] = static_cast<uint8_t>(where[p.out_reg[k]]);
  p.registers = static_cast<int32_t>(busy.size());
}

}  // namespace eagle::native
