// Checking an attention engine against the reference on THD or dense cases: where the sequences
// sit, fresh random inputs with NaN in every padding row, and the comparison of the active rows
// of every output (tolerances per METHOD.md: test::tolerance of the io dtype times a scale;
// 1e-4 for the f32 statistics).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "planned_runs.hpp"
#include "poison.hpp"
#include "random.hpp"
#include "sdpa_graphs.hpp"

namespace eagle::test::sdpa {

// Where the sequences of a THD case sit (q side and kv side); dense cases have none.
struct Layout {
  bool ragged = false;
  test::RaggedRows q, kv;
  std::vector<int64_t> cu_q, cu_kv;
};

// A THD case: sequences of the given lengths packed from row 0, then `pad` padding rows.
Layout thd(const std::vector<int64_t>& len_q, const std::vector<int64_t>& len_kv, int64_t pad);
// `s` with the batch and buffer rows of `l` (THD) or unchanged (dense).
SdpaShape shape_for(SdpaShape s, const Layout& l);
// Fresh random host arrays for the graph's floating inputs (padding rows NaN) and cu_seqlens.
Arrays random_inputs(const op::Graph& g, const Layout& l);
// The values of the rows of `a` ([rows, ...], or all of it when dense) that belong to sequences.
std::vector<double> active(const Array& a, const test::RaggedRows* rows);
// Every output's active rows of `got` against `want` (the reference's, all finite).
void compare(const op::Graph& g, const Layout& l, const Arrays& got, const Arrays& want,
             double tol_scale);

// The backward's inputs for a forward case: q, k, v and the cu_seqlens of `fin`, o and stats
// of the forward's outputs `fout` (as a training step has them), and a fresh d_o (padding NaN).
Arrays backward_inputs(const op::Graph& fwd, const Arrays& fin, const Arrays& fout,
                       const op::Graph& bwd, const Layout& l);

// Rows [0, rows) of the forward's outputs `got` see no key: o = 0 and stats = -inf there (the
// reference's definition).
void expect_rows_see_no_key(const op::Graph& g, const Arrays& got, const SdpaShape& s,
                            int64_t rows);

}  // namespace eagle::test::sdpa
