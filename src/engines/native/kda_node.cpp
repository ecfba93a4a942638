#include "engines/native/kda_node.hpp"

#include <cmath>

#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

bool is_gdn2(const op::Node& node) {
  return node.op() == "gdn2" || node.op() == "gdn2_bwd";
}

}  // namespace

kda::Shape kda_shape_of(const op::Node& node) {
  const op::Tensor q = node.input("q"), v = node.input("v");
  kda::Shape s;
  s.slots = node.input("cu_seqlens").dims()[0] - 1;
  s.rows = q.dims()[0];
  s.heads = static_cast<int>(q.dims()[1]);
  s.value_heads = static_cast<int>(v.dims()[1]);
  s.dim = static_cast<int>(q.dims()[2]);
  s.scale = node.has_attr("scale")
                ? static_cast<float>(node.attr("scale").as_real("scale"))
                : static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.dim)));
  s.l2norm = node.attr("use_qk_l2norm").as_bool("use_qk_l2norm");
  s.dtype = q.dtype();
  s.gates = is_gdn2(node) ? kda::Gates::gdn2 : kda::Gates::kda;
  return s;
}

void require_f32_gates(const op::Node& node, const std::string& engine) {
  const std::initializer_list<const char*> kda_gates = {"g", "beta"}, gdn2_gates = {"g", "b", "w"};
  for (const char* p : is_gdn2(node) ? gdn2_gates : kda_gates)
    require(node.input(p).dtype() == DType::f32, engine,
            std::string("the gate ") + p + " must be f32, not " + dtype_text(node.input(p)));
}

}  // namespace eagle::native
