#include "sdpa_check.hpp"

#include <cmath>
#include <limits>
#include <string>

#include "compare.hpp"

namespace eagle::test::sdpa {

Layout thd(const std::vector<int64_t>& len_q, const std::vector<int64_t>& len_kv, int64_t pad) {
  Layout l;
  l.ragged = true;
  l.cu_q = {0};
  l.cu_kv = {0};
  for (std::size_t b = 0; b < len_q.size(); ++b) {
    l.cu_q.push_back(l.cu_q.back() + len_q[b]);
    l.cu_kv.push_back(l.cu_kv.back() + len_kv[b]);
  }
  l.q = test::rows_of(l.cu_q);
  l.kv = test::rows_of(l.cu_kv);
  l.q.rows += pad;
  l.kv.rows += pad;
  return l;
}

SdpaShape shape_for(SdpaShape s, const Layout& l) {
  if (l.ragged) {
    s.ragged = true;
    s.batch = static_cast<int64_t>(l.cu_q.size()) - 1;
    s.s_q = l.q.rows;
    s.s_kv = l.kv.rows;
  }
  return s;
}

// Fresh random host arrays for the graph's floating inputs (padding rows NaN) and cu_seqlens.
Arrays random_inputs(const op::Graph& g, const Layout& l) {
  Arrays in;
  const op::Node n = g.nodes()[0];
  for (const auto& [port, t] : n.inputs()) {
    if (port == "cu_seqlens_q" || port == "cu_seqlens_kv") {
      const auto& cu = port == "cu_seqlens_q" ? l.cu_q : l.cu_kv;
      in[t.uid()] = test::from_ints(cu, t.dims(), t.dtype(), Device::cpu());
      continue;
    }
    Array a = test::random_array(t.dims(), t.dtype(), Device::cpu());
    if (l.ragged) {
      const bool kv = port == "k" || port == "v";
      test::poison_padding(a, kv ? l.kv : l.q);
    }
    in[t.uid()] = a;
  }
  return in;
}

// The values of the rows of `a` ([rows, ...], or all of it when dense) that belong to sequences.
std::vector<double> active(const Array& a, const test::RaggedRows* rows) {
  std::vector<double> v = test::values(a);
  if (!rows) return v;
  const int64_t per_row = a.numel() / a.shape()[0];
  std::vector<double> out;
  for (int64_t r = 0; r < a.shape()[0]; ++r)
    if (!rows->is_padding(r))
      out.insert(out.end(), v.begin() + r * per_row, v.begin() + (r + 1) * per_row);
  return out;
}

void compare(const op::Graph& g, const Layout& l, const Arrays& got, const Arrays& want,
             double tol_scale) {
  const op::Node n = g.nodes()[0];
  for (const op::Tensor& t : outputs(g)) {
    std::string port;
    for (const auto& [p, u] : n.outputs())
      if (u.uid() == t.uid()) port = p;
    SCOPED_TRACE("output " + port);
    const bool kv = port == "dk" || port == "dv";
    const test::RaggedRows* rows = l.ragged ? (kv ? &l.kv : &l.q) : nullptr;
    const std::vector<double> all_w = active(want.at(t.uid()), rows);
    const std::vector<double> all_x = active(got.at(t.uid()), rows);
    const double tol = port == "stats" ? 1e-4 : test::tolerance(t.dtype()) * tol_scale;
    // The statistics of a row that sees no key are -inf (the reference's definition) and must
    // be exactly that; every other reference value is finite and compared by the tolerance.
    std::vector<double> w, x;
    for (std::size_t i = 0; i < all_w.size(); ++i) {
      if (port == "stats" && all_w[i] == -std::numeric_limits<double>::infinity()) {
        EXPECT_EQ(all_x[i], all_w[i]) << "stats at " << i << ": a row that sees no key";
        continue;
      }
      ASSERT_TRUE(std::isfinite(all_w[i])) << "the reference gives " << all_w[i] << " at " << i;
      w.push_back(all_w[i]);
      x.push_back(all_x[i]);
    }
    EXPECT_CLOSE(x, w, tol);
  }
}

Arrays backward_inputs(const op::Graph& fwd, const Arrays& fin, const Arrays& fout,
                       const op::Graph& bwd, const Layout& l) {
  const op::Node f = fwd.nodes()[0], n = bwd.nodes()[0];
  Arrays in = random_inputs(bwd, l);  // d_o fresh, padding NaN
  for (const char* p : {"q", "k", "v", "cu_seqlens_q", "cu_seqlens_kv"})
    if (n.input(p).defined()) in[n.input(p).uid()] = fin.at(f.input(p).uid());
  in[n.input("o").uid()] = fout.at(f.output("o").uid());
  in[n.input("stats").uid()] = fout.at(f.output("stats").uid());
  return in;
}

void expect_rows_see_no_key(const op::Graph& g, const Arrays& got, const SdpaShape& s,
                            int64_t rows) {
  const op::Node n = g.nodes()[0];
  const std::vector<double> o = test::values(got.at(n.output("o").uid()));
  const std::vector<double> st = test::values(got.at(n.output("stats").uid()));
  const int64_t per_row = s.heads * s.value_dim;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t e = 0; e < per_row; ++e) EXPECT_EQ(o[r * per_row + e], 0.0) << "row " << r;
    for (int64_t h = 0; h < s.heads; ++h)
      EXPECT_EQ(st[r * s.heads + h], -std::numeric_limits<double>::infinity()) << "row " << r;
  }
}

}  // namespace eagle::test::sdpa
