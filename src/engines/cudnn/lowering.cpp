#include "engines/cudnn/lowering.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "eagle/core/error.hpp"

namespace eagle::cudnn {

namespace {

[[noreturn]] void decline(const std::string& why) {
  throw NotSupported("cudnn: " + why);
}

std::string dims_str(const op::Dims& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

bool row_major(const op::Tensor& t) {
  int64_t expect = 1;
  const op::Dims& d = t.dims();
  const op::Dims& s = t.strides();
  for (std::size_t i = d.size(); i-- > 0;) {
    if (d[i] != 1 && s[i] != expect) return false;
    expect *= d[i];
  }
  return true;
}

// Hands out uids no eagle tensor holds, smallest first: the arrays the plan adds must not take
// a number from the IR, which owns the uid space.
class FreeUids {
 public:
  explicit FreeUids(const op::Graph& g) {
    for (const op::Tensor& t : g.tensors()) taken_.insert(t.uid());
  }
  int64_t next() {
    while (taken_.count(candidate_)) ++candidate_;
    taken_.insert(candidate_);
    return candidate_;
  }

 private:
  std::set<int64_t> taken_;
  int64_t candidate_ = 1;
};

class Lowering {
 public:
  Lowering(const op::Graph& g, const op::Node& n) : node_(n), uids_(g) {}

  Lowered run() {
    Lowered& L = out_;
    L.op = node_.op() == "sdpa" ? Lowered::Op::sdpa : Lowered::Op::sdpa_bwd;
    const bool bwd = L.op == Lowered::Op::sdpa_bwd;
    const op::Tensor q = node_.input("q"), k = node_.input("k"), v = node_.input("v");
    L.io = q.dtype();
    if (L.io != DType::f16 && L.io != DType::bf16)
      decline("sdpa runs in f16 or bf16 (cuDNN's fused attention); q is " +
              std::string(dtype_name(L.io)));
    const std::vector<const char*> same =
        bwd ? std::vector<const char*>{"k", "v", "o", "d_o"} : std::vector<const char*>{"k", "v"};
    for (const char* p : same)
      if (node_.input(p).dtype() != L.io)
        decline(std::string(p) + " is " + std::string(dtype_name(node_.input(p).dtype())) +
                ", q is " + std::string(dtype_name(L.io)) + ": one io dtype");
    L.ragged = node_.input("cu_seqlens_q").defined();
    L.causal = node_.attr("causal").as_bool("causal");
    const std::size_t r = q.dims().size();
    L.heads = q.dims()[r - 2];
    L.kv_heads = k.dims()[r - 2];
    L.head_dim = q.dims()[r - 1];
    L.value_dim = v.dims()[r - 1];
    // The schema's default: 1/sqrt(D) when the attribute is absent (as the reference reads it).
    L.scale = node_.has_attr("scale") ? node_.attr("scale").as_real("sdpa: attribute scale")
                                      : 1.0 / std::sqrt(static_cast<double>(L.head_dim));
    if (L.ragged)
      ragged_sizes(q, k);
    else
      dense_sizes(q, k);
    if (!bwd) {
      add("q", q, false);
      add("k", k, false);
      add("v", v, false);
      const op::Tensor o = node_.output("o");
      if (o.is_virtual()) decline("o is virtual: cuDNN writes it to a caller buffer (set_output)");
      add("o", o, true);
      const op::Tensor st = node_.output("stats");
      L.stats = st.defined() && !st.is_virtual();  // virtual statistics: not generated
      if (L.stats) add_stats(st, true);
    } else {
      for (const char* p : {"q", "k", "v", "o", "d_o"}) add(p, node_.input(p), false);
      const op::Tensor st = node_.input("stats");
      if (st.dtype() != DType::f32)
        decline("stats must be f32 (cuDNN's statistics), got " +
                std::string(dtype_name(st.dtype())));
      add_stats(st, false);
      for (const char* p : {"dq", "dk", "dv"}) {
        const op::Tensor t = node_.output(p);
        if (t.is_virtual())
          decline(std::string(p) + " is virtual: cuDNN writes dq, dk and dv to caller buffers");
        add(p, t, true);
        // THD: cuDNN 9.19's backward computes wrong dq and NaN dk, dv when q, k, v are slices
        // of a packed qkv array and the gradients are not (dq off by 2.1x its scale on an H100,
        // session 28). The reverse pass gives each gradient its input's layout, the form served.
        const char* input = p + 1;  // "dq" -> "q"
        const int64_t row = L.tensors.back().strides[2], in_row = L.find(input)->strides[2];
        if (L.ragged && row != in_row)
          decline(std::string(p) + " tokens " + std::to_string(row) + " elements apart, " + input +
                  "'s " + std::to_string(in_row) +
                  ": the THD backward needs each gradient laid out as its input (a packed qkv "
                  "slice's gradient a slice of one packed array too)");
      }
    }
    if (L.ragged) {
      const op::Tensor cq = node_.input("cu_seqlens_q"), ck = node_.input("cu_seqlens_kv");
      if (cq.dtype() != ck.dtype() || (cq.dtype() != DType::i32 && cq.dtype() != DType::i64))
        decline("cu_seqlens_q and cu_seqlens_kv must both be i32 or both i64, got " +
                std::string(dtype_name(cq.dtype())) + " and " +
                std::string(dtype_name(ck.dtype())));
      L.cu_dtype = cq.dtype();
      L.cu_q_uid = cq.uid();
      L.cu_kv_uid = ck.uid();
      L.seq_len_q_uid = uids_.next();
      L.seq_len_kv_uid = uids_.next();
    }
    return L;
  }

 private:
  void dense_sizes(const op::Tensor& q, const op::Tensor& k) {
    out_.batch = q.dims()[0];
    out_.seq_q = out_.s_q = q.dims()[1];
    out_.seq_kv = out_.s_kv = k.dims()[1];
    if (out_.causal && out_.s_q > out_.s_kv)
      decline("causal with S_q " + std::to_string(out_.s_q) + " > S_kv " +
              std::to_string(out_.s_kv) +
              ": cuDNN 9.19's bottom-right causal mask without a padding mask needs S_q <= S_kv");
  }

  void ragged_sizes(const op::Tensor& q, const op::Tensor& k) {
    out_.batch = node_.input("cu_seqlens_q").dims()[0] - 1;
    out_.s_q = q.dims()[0];  // a sequence is at most every row
    out_.s_kv = k.dims()[0];
    // FlashAttention's max_seqlen, where the caller promises one: cuDNN's S, which sizes its grids
    // (no faster at issue 12's shape on an H100: bench/RESULTS.md, session 28).
    const auto bound = [&](const char* attr, int64_t rows) {
      const int64_t b = node_.attr(attr).as_int(attr);
      return b > 0 ? std::min(b, rows) : rows;
    };
    out_.seq_q = bound("max_seqlen_q", out_.s_q);
    out_.seq_kv = bound("max_seqlen_kv", out_.s_kv);
    if (out_.batch < 1) decline("cu_seqlens describe no sequence (B = 0)");
  }

  // A [B, S, H, D] or [T, H, D] tensor (q-side: S = s_q) as cuDNN's [B, H, S, D].
  void add(const std::string& name, const op::Tensor& t, bool output) {
    const bool kv = name == "k" || name == "v" || name == "dk" || name == "dv";
    TensorDesc d;
    d.name = name;
    d.uid = t.uid();
    d.dtype = t.dtype();
    d.output = output;
    const op::Dims& dims = t.dims();
    const op::Dims& st = t.strides();
    if (!out_.ragged) {
      d.dims = {dims[0], dims[2], dims[1], dims[3]};
      d.strides = {st[0], st[2], st[1], st[3]};
      if (t.ragged_offset().defined())
        decline(name + " has a ragged offset but the node is dense (no cu_seqlens)");
    } else {
      // Each token's [heads, dim] contiguous; tokens `row` elements apart, at least heads * dim
      // (more in a packed qkv array: q, k and v column slices of one [T, 3 * heads * dim]).
      const int64_t s = kv ? out_.seq_kv : out_.seq_q, h = dims[1], e = dims[2];
      const bool token_dense = (e == 1 || st[2] == 1) && (h == 1 || st[1] == e);
      const int64_t row = dims[0] > 1 ? st[0] : h * e;
      if (!token_dense || row < h * e)
        decline(name +
                " must be [T, heads, dim] with each token's [heads, dim] contiguous and tokens "
                "at least heads * dim apart (THD, row-major or a packed qkv slice); its strides "
                "are " +
                dims_str(st));
      d.dims = {out_.batch, h, s, e};
      d.strides = {s * row, e, row, 1};
      d.ragged_uid = ragged_offsets(t, kv, row);
    }
    out_.tensors.push_back(d);
  }

  // Statistics: [B, S, H] dense or [T, H] THD, f32, as cuDNN's [B, H, S, 1].
  void add_stats(const op::Tensor& t, bool output) {
    TensorDesc d;
    d.name = "stats";
    d.uid = t.uid();
    d.dtype = DType::f32;
    d.output = output;
    const op::Dims& st = t.strides();
    const int64_t h = out_.heads, s = out_.seq_q;
    if (out_.ragged) {
      if (!row_major(t))
        decline("stats must be dense row-major [T, heads] (THD), its strides are " + dims_str(st));
      d.dims = {out_.batch, h, s, 1};
      d.strides = {s * h, 1, h, 1};
      d.ragged_uid = ragged_offsets(t, false, h);
    } else if (output) {
      d.dims = {out_.batch, h, s, 1};
      d.strides = {st[0], st[2], st[1], 1};
    } else {
      // cuDNN 9.19 reads backward statistics only as packed [B, H, S]; the plan copies them.
      out_.stats_source_uid = t.uid();
      out_.stats_source_strides = {st[0], st[1], st[2]};
      out_.stats_copy_uid = d.uid = uids_.next();
      d.in_workspace = true;
      d.dims = {out_.batch, h, s, 1};
      d.strides = {h * s, s, 1, 1};
    }
    out_.tensors.push_back(d);
  }

  // The ragged offset array of a THD tensor: its own from the IR, else one derived from
  // cu_seqlens (shared by every tensor of the same side and row size).
  int64_t ragged_offsets(const op::Tensor& t, bool kv, int64_t row_elems) {
    const op::Tensor own = t.ragged_offset();
    if (own.defined()) {
      if (own.dtype() != DType::i32 && own.dtype() != DType::i64)
        decline("the ragged offset of " + t.name() + " must be i32 or i64, got " +
                std::string(dtype_name(own.dtype())));
      for (const RaggedOffsets& o : out_.offsets)
        if (o.uid == own.uid()) return o.uid;
      out_.offsets.push_back({own.uid(), kv, row_elems, false, own.dtype()});
      return own.uid();
    }
    for (const RaggedOffsets& o : out_.offsets)
      if (o.derived && o.kv_side == kv && o.row_elems == row_elems) return o.uid;
    out_.offsets.push_back({uids_.next(), kv, row_elems, true, DType::i64});
    return out_.offsets.back().uid;
  }

  const op::Node& node_;
  FreeUids uids_;
  Lowered out_;
};

}  // namespace

const TensorDesc* Lowered::find(const std::string& name) const {
  for (const TensorDesc& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string Lowered::summary() const {
  if (op == Op::layer_norm || op == Op::rms_norm)
    return std::string(op == Op::layer_norm ? "layer_norm " : "rms_norm ") +
           std::string(dtype_name(io)) + " N " + std::to_string(batch) + " C " +
           std::to_string(tensors[0].dims[1]) + (stats ? " training" : "");
  if (op == Op::matmul) {
    std::string s = "matmul " + std::string(dtype_name(io)) + " B " + std::to_string(batch) +
                    " M " + std::to_string(tensors[0].dims[1]) + " K " +
                    std::to_string(tensors[0].dims[2]) + " N " + std::to_string(tensors[1].dims[2]);
    for (const PointwiseStep& p : epilogue) s += " -> " + p.op;
    return s;
  }
  return std::string(op == Op::sdpa ? "sdpa" : "sdpa_bwd") + (ragged ? " THD" : " dense") + " " +
         std::string(dtype_name(io)) + " B " + std::to_string(batch) + " H " +
         std::to_string(heads) + "/" + std::to_string(kv_heads) + " D " + std::to_string(head_dim) +
         "/" + std::to_string(value_dim) + " S " + std::to_string(seq_q) + "/" +
         std::to_string(seq_kv) +
         (ragged ? " rows " + std::to_string(s_q) + "/" + std::to_string(s_kv) : "") +
         (causal ? " causal" : "") + (stats ? " stats" : "");
}

Lowered lower(const op::Graph& graph) {
  const std::vector<op::Node> nodes = graph.nodes();
  if (!nodes.empty() && nodes[0].op() == "matmul") return lower_matmul(graph);
  if (nodes.size() == 1 && (nodes[0].op() == "layer_norm" || nodes[0].op() == "rms_norm"))
    return lower_norm(graph);
  if (nodes.size() != 1)
    decline(
        "lowers a graph of one sdpa or sdpa_bwd node, or a matmul with a pointwise "
        "epilogue; this one has " +
        std::to_string(nodes.size()) + " nodes, the first " +
        (nodes.empty() ? std::string("none") : nodes[0].op()));
  const op::Node& n = nodes[0];
  if (n.op() != "sdpa" && n.op() != "sdpa_bwd")
    decline("lowers sdpa, sdpa_bwd, matmul, layer_norm and rms_norm; no lowering for op " + n.op());
  return Lowering(graph, n).run();
}

}  // namespace eagle::cudnn
