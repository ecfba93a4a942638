#include "engines/reference/math/sdpa.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <tuple>

#include "eagle/core/error.hpp"

namespace eagle::reference {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

[[noreturn]] void fail(const char* fn, const std::string& msg) {
  throw InvalidArgument(std::string(fn) + ": " + msg);
}

std::string dims_str(const Dims& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Rejects a Dense whose rank, dims or storage size is not what the routines index by.
void check_tensor(const char* fn, const char* name, const Dense& x, std::size_t rank,
                  const char* layout) {
  if (x.dims.size() != rank) {
    fail(fn, std::string(name) + " must be rank " + std::to_string(rank) + " " + layout +
                 ", got dims " + dims_str(x.dims));
  }
  for (int64_t d : x.dims) {
    if (d < 0) fail(fn, std::string(name) + ".dims must be >= 0, got " + dims_str(x.dims));
  }
  if (x.numel() != count(x.dims)) {
    fail(fn, std::string(name) + ".data has " + std::to_string(x.numel()) + " elements but " +
                 name + ".dims " + dims_str(x.dims) + " hold " + std::to_string(count(x.dims)));
  }
}

void check_dims_equal(const char* fn, const char* name, const Dense& x, const Dims& want,
                      const char* layout) {
  check_tensor(fn, name, x, want.size(), layout);
  if (x.dims != want) {
    fail(fn, std::string(name) + ".dims must be " + layout + " = " + dims_str(want) + ", got " +
                 dims_str(x.dims));
  }
}

// Rows [start, start + len) of each sequence must lie in a tensor of `rows` rows, and no two
// sequences may share a row: a shared row would have two owners' results written into it.
void check_rows(const char* fn, const std::vector<int64_t>& start, const std::vector<int64_t>& len,
                const char* start_name, const char* len_name, const char* tensor, int64_t rows) {
  std::vector<std::tuple<int64_t, int64_t, std::size_t>> spans;  // (begin, end, sequence)
  for (std::size_t b = 0; b < start.size(); ++b) {
    const std::string at = "[" + std::to_string(b) + "]";
    if (len[b] < 0) {
      fail(fn,
           std::string("seqs.") + len_name + at + " must be >= 0, got " + std::to_string(len[b]));
    }
    if (start[b] < 0) {
      fail(fn, std::string("seqs.") + start_name + at + " must be >= 0, got " +
                   std::to_string(start[b]));
    }
    // Written as start <= rows - len so that a huge start cannot overflow.
    if (start[b] > rows - len[b]) {
      fail(fn, "sequence " + std::to_string(b) + " (seqs." + start_name + at + " = " +
                   std::to_string(start[b]) + ", seqs." + len_name + at + " = " +
                   std::to_string(len[b]) + ") runs past the end of " + tensor + " (" +
                   std::to_string(rows) + " rows)");
    }
    if (len[b] > 0) spans.emplace_back(start[b], start[b] + len[b], b);
  }
  // After sorting by begin, any overlap shows up between neighbours.
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    const auto& [prev_begin, prev_end, prev_b] = spans[i - 1];
    const auto& [begin, end, b] = spans[i];
    if (begin < prev_end) {
      fail(fn, "sequences " + std::to_string(std::min(prev_b, b)) + " and " +
                   std::to_string(std::max(prev_b, b)) + " overlap in " + tensor + " rows (seqs." +
                   start_name + ", seqs." + len_name + ")");
    }
  }
}

struct Shape {
  int64_t tq, h, d, tk, hk, dv;
};

Shape check_inputs(const char* fn, const Dense& q, const Dense& k, const Dense& v,
                   const SdpaSequences& seqs, const SdpaOptions& opt) {
  check_tensor(fn, "q", q, 3, "[Tq, H, D]");
  check_tensor(fn, "k", k, 3, "[Tk, Hk, D]");
  check_tensor(fn, "v", v, 3, "[Tk, Hk, Dv]");
  const Shape s{q.dims[0], q.dims[1], q.dims[2], k.dims[0], k.dims[1], v.dims[2]};
  if (k.dims[2] != s.d) {
    fail(fn, "k.dims[2] (head dim " + std::to_string(k.dims[2]) + ") must equal q.dims[2] (" +
                 std::to_string(s.d) + ")");
  }
  if (v.dims[0] != s.tk || v.dims[1] != s.hk) {
    fail(fn, "v.dims[0:2] " + dims_str({v.dims[0], v.dims[1]}) + " must equal k.dims[0:2] " +
                 dims_str({s.tk, s.hk}));
  }
  if (s.hk <= 0) fail(fn, "k.dims[1] (kv heads) must be > 0");
  if (s.h % s.hk != 0) {
    fail(fn, "q.dims[1] (heads " + std::to_string(s.h) +
                 ") must be a multiple of k.dims[1] (kv heads " + std::to_string(s.hk) + ")");
  }
  if (!std::isfinite(opt.scale))
    fail(fn, "opt.scale must be finite, got " + std::to_string(opt.scale));
  const std::size_t n = seqs.q_start.size();
  if (seqs.q_len.size() != n || seqs.kv_start.size() != n || seqs.kv_len.size() != n) {
    fail(fn, "seqs.q_start, seqs.q_len, seqs.kv_start, seqs.kv_len must have the same size, got " +
                 std::to_string(n) + ", " + std::to_string(seqs.q_len.size()) + ", " +
                 std::to_string(seqs.kv_start.size()) + ", " + std::to_string(seqs.kv_len.size()));
  }
  check_rows(fn, seqs.q_start, seqs.q_len, "q_start", "q_len", "q", s.tq);
  check_rows(fn, seqs.kv_start, seqs.kv_len, "kv_start", "kv_len", "k/v", s.tk);
  return s;
}

// Elements per leading-dim row, and per (row, head) vector, of a [T, H] or [T, H, C] tensor.
int64_t row_size(const Dense& x) {
  return count(Dims(x.dims.begin() + 1, x.dims.end()));
}
int64_t vec_size(const Dense& x) {
  return x.dims.size() == 3 ? x.dims[2] : 1;
}

const double* vec(const Dense& x, int64_t t, int64_t h) {
  return x.data.data() + (t * x.dims[1] + h) * vec_size(x);
}
double* vec(Dense& x, int64_t t, int64_t h) {
  return x.data.data() + (t * x.dims[1] + h) * vec_size(x);
}

void fill_rows(Dense& x, int64_t start, int64_t len, double value) {
  const int64_t n = row_size(x);
  std::fill(x.data.begin() + start * n, x.data.begin() + (start + len) * n, value);
}

double dot(const double* a, const double* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y += a * x
void axpy(double a, const double* x, double* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

// Query i of a sequence sees a prefix [0, n) of its keys; causal is bottom-right aligned.
int64_t visible_keys(int64_t i, int64_t q_len, int64_t kv_len, bool causal) {
  if (!causal) return kv_len;
  return std::clamp<int64_t>(i + (kv_len - q_len) + 1, 0, kv_len);
}

// The scaled scores of one (sequence, query head): the part forward and backward share.
struct ScoreBlock {
  int64_t q0, k0;                // first q row and first kv row of the sequence
  int64_t h, hk;                 // query head and the kv head it reads
  int64_t rows, cols;            // q_len, kv_len
  std::vector<int64_t> visible;  // per row: keys [0, visible) are seen
  std::vector<double> s;         // [rows, cols]; only the visible prefix of each row is set
  const double* scores(int64_t i) const { return s.data() + i * cols; }
};

// Calls fn(block) for every (sequence, query head) once the block's scores are filled in.
template <class Fn>
void for_each_block(const Dense& q, const Dense& k, const SdpaSequences& seqs, const Shape& sh,
                    const SdpaOptions& opt, Fn&& fn) {
  const int64_t group = sh.h / sh.hk;
  for (std::size_t b = 0; b < seqs.q_start.size(); ++b) {
    ScoreBlock blk;
    blk.q0 = seqs.q_start[b];
    blk.k0 = seqs.kv_start[b];
    blk.rows = seqs.q_len[b];
    blk.cols = seqs.kv_len[b];
    blk.visible.resize(static_cast<std::size_t>(blk.rows));
    for (int64_t i = 0; i < blk.rows; ++i) {
      blk.visible[i] = visible_keys(i, blk.rows, blk.cols, opt.causal);
    }
    blk.s.assign(static_cast<std::size_t>(blk.rows * blk.cols), 0.0);
    for (int64_t h = 0; h < sh.h; ++h) {
      blk.h = h;
      blk.hk = h / group;
      for (int64_t i = 0; i < blk.rows; ++i) {
        const double* qi = vec(q, blk.q0 + i, h);
        for (int64_t j = 0; j < blk.visible[i]; ++j) {
          blk.s[i * blk.cols + j] = opt.scale * dot(qi, vec(k, blk.k0 + j, blk.hk), sh.d);
        }
      }
      fn(static_cast<const ScoreBlock&>(blk));
    }
  }
}

}  // namespace

SdpaForward sdpa_forward(const Dense& q, const Dense& k, const Dense& v, const SdpaSequences& seqs,
                         const SdpaOptions& opt) {
  const Shape sh = check_inputs("sdpa_forward", q, k, v, seqs, opt);
  SdpaForward out{Dense({sh.tq, sh.h, sh.dv}, kNaN), Dense({sh.tq, sh.h}, kNaN)};
  for (std::size_t b = 0; b < seqs.q_start.size(); ++b) {
    fill_rows(out.o, seqs.q_start[b], seqs.q_len[b], 0.0);
  }
  for_each_block(q, k, seqs, sh, opt, [&](const ScoreBlock& blk) {
    for (int64_t i = 0; i < blk.rows; ++i) {
      const int64_t t = blk.q0 + i, n = blk.visible[i];
      double& lse = *vec(out.lse, t, blk.h);
      if (n == 0) {
        lse = -kInf;
        continue;
      }
      const double* s = blk.scores(i);
      // Subtract the max so exp never overflows.
      const double m = *std::max_element(s, s + n);
      double sum = 0.0;
      for (int64_t j = 0; j < n; ++j) sum += std::exp(s[j] - m);
      lse = m + std::log(sum);
      double* o = vec(out.o, t, blk.h);
      for (int64_t j = 0; j < n; ++j) {
        axpy(std::exp(s[j] - lse), vec(v, blk.k0 + j, blk.hk), o, sh.dv);
      }
    }
  });
  return out;
}

SdpaBackward sdpa_backward(const Dense& q, const Dense& k, const Dense& v, const Dense& o,
                           const Dense& lse, const Dense& d_o, const SdpaSequences& seqs,
                           const SdpaOptions& opt) {
  const char* fn = "sdpa_backward";
  const Shape sh = check_inputs(fn, q, k, v, seqs, opt);
  check_dims_equal(fn, "o", o, {sh.tq, sh.h, sh.dv}, "[Tq, H, Dv]");
  check_dims_equal(fn, "lse", lse, {sh.tq, sh.h}, "[Tq, H]");
  check_dims_equal(fn, "d_o", d_o, {sh.tq, sh.h, sh.dv}, "[Tq, H, Dv]");
  SdpaBackward g{Dense({sh.tq, sh.h, sh.d}, kNaN), Dense({sh.tk, sh.hk, sh.d}, kNaN),
                 Dense({sh.tk, sh.hk, sh.dv}, kNaN)};
  // Gradients accumulate into sequence rows, so zero those; padding rows keep their NaN.
  for (std::size_t b = 0; b < seqs.q_start.size(); ++b) {
    fill_rows(g.dq, seqs.q_start[b], seqs.q_len[b], 0.0);
    fill_rows(g.dk, seqs.kv_start[b], seqs.kv_len[b], 0.0);
    fill_rows(g.dv, seqs.kv_start[b], seqs.kv_len[b], 0.0);
  }
  for_each_block(q, k, seqs, sh, opt, [&](const ScoreBlock& blk) {
    for (int64_t i = 0; i < blk.rows; ++i) {
      const int64_t t = blk.q0 + i, n = blk.visible[i];
      if (n == 0) continue;  // o = 0 whatever q, k, v are: no gradient flows
      const double* s = blk.scores(i);
      const double* qi = vec(q, t, blk.h);
      const double* doi = vec(d_o, t, blk.h);
      const double lse_i = *vec(lse, t, blk.h);
      // d(softmax)/ds contracted with dP: dS_ij = P_ij * (dP_ij - sum_j P_ij dP_ij), and the
      // inner sum equals dO_i . o_i since o_i = sum_j P_ij v_j.
      const double delta = dot(doi, vec(o, t, blk.h), sh.dv);
      double* dqi = vec(g.dq, t, blk.h);
      for (int64_t j = 0; j < n; ++j) {
        const int64_t r = blk.k0 + j;
        const double p = std::exp(s[j] - lse_i);
        axpy(p, doi, vec(g.dv, r, blk.hk), sh.dv);
        const double ds = p * (dot(doi, vec(v, r, blk.hk), sh.dv) - delta);
        axpy(opt.scale * ds, vec(k, r, blk.hk), dqi, sh.d);
        axpy(opt.scale * ds, qi, vec(g.dk, r, blk.hk), sh.d);
      }
    }
  });
  return g;
}

SdpaSequences sequences_from_cu_seqlens(const std::vector<int64_t>& cu_q,
                                        const std::vector<int64_t>& cu_kv) {
  const char* fn = "sequences_from_cu_seqlens";
  if (cu_q.size() != cu_kv.size()) {
    fail(fn, "cu_q and cu_kv must have the same size B + 1, got " + std::to_string(cu_q.size()) +
                 " and " + std::to_string(cu_kv.size()));
  }
  if (cu_q.empty()) fail(fn, "cu_q and cu_kv must have B + 1 >= 1 entries, got 0");
  SdpaSequences seqs;
  auto split = [&](const std::vector<int64_t>& cu, const char* name, std::vector<int64_t>& start,
                   std::vector<int64_t>& len) {
    if (cu[0] < 0) fail(fn, std::string(name) + "[0] must be >= 0, got " + std::to_string(cu[0]));
    for (std::size_t b = 0; b + 1 < cu.size(); ++b) {
      if (cu[b + 1] < cu[b]) {
        fail(fn, std::string(name) + "[" + std::to_string(b + 1) + "] (" +
                     std::to_string(cu[b + 1]) + ") must be >= " + name + "[" + std::to_string(b) +
                     "] (" + std::to_string(cu[b]) + "): cumulative lengths never decrease");
      }
      start.push_back(cu[b]);
      len.push_back(cu[b + 1] - cu[b]);
    }
  };
  split(cu_q, "cu_q", seqs.q_start, seqs.q_len);
  split(cu_kv, "cu_kv", seqs.kv_start, seqs.kv_len);
  return seqs;
}

}  // namespace eagle::reference
