// `eagle ops`: the op tables (eagle/op/schema.hpp) as a person reads them.
#include "ops.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "eagle/op/schema.hpp"

namespace eagle::tools {

namespace {

std::string_view dtype_class_name(op::DTypeClass c) {
  switch (c) {
    case op::DTypeClass::floating:
      return "floating";
    case op::DTypeClass::integer:
      return "integer";
    case op::DTypeClass::any:
      return "any dtype";
  }
  return "?";
}

std::string when_text(const op::OutputPort& out) {
  switch (out.when) {
    case op::OutputPort::When::always:
      return "always";
    case op::OutputPort::When::attr_true:
      return "when attribute " + out.condition + " is true";
    case op::OutputPort::When::input_wired:
      return "when input " + out.condition + " is wired";
  }
  return "?";
}

void list_all() {
  std::string_view kind;
  std::size_t width = 0;
  for (const op::OpSchema* s : op::all_ops()) width = std::max(width, s->name.size());
  for (const op::OpSchema* s : op::all_ops()) {
    if (op::op_kind_name(s->kind) != kind) {
      kind = op::op_kind_name(s->kind);
      const auto n = std::count_if(op::all_ops().begin(), op::all_ops().end(),
                                   [&](const op::OpSchema* o) { return o->kind == s->kind; });
      std::printf("%s%.*s (%ld ops%s)\n", kind == "pointwise" ? "" : "\n",
                  static_cast<int>(kind.size()), kind.data(), static_cast<long>(n),
                  kind == "pointwise"
                      ? "; inputs a, b (where: cond, a, b), numpy broadcasting, output out"
                      : "");
    }
    std::printf("  %-*s  %s\n", static_cast<int>(width), s->name.c_str(), s->doc.c_str());
  }
  std::printf("\n`eagle ops NAME` prints an op's ports, attributes and shape rule.\n");
}

// `text` broken into lines of at most `width` columns at spaces outside brackets, each starting
// with `indent`.
std::string wrapped(const std::string& text, const std::string& indent, std::size_t width) {
  std::string out, line = indent;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = start;
    for (int depth = 0; end < text.size() && (depth > 0 || text[end] != ' '); ++end)
      depth += text[end] == '[' ? 1 : text[end] == ']' ? -1 : 0;  // "[T, HV, K]" stays whole
    const std::string word = text.substr(start, end - start);
    if (line.size() > indent.size() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line = indent;
    }
    line += (line.size() > indent.size() ? " " : "") + word;
    start = end + 1;
  }
  return out + line + "\n";
}

void describe(const op::OpSchema& s) {
  std::printf("%s (%.*s): %s\n", s.name.c_str(), static_cast<int>(op::op_kind_name(s.kind).size()),
              op::op_kind_name(s.kind).data(), s.doc.c_str());
  std::size_t width = 0;
  for (const auto& p : s.inputs) width = std::max(width, p.name.size());
  for (const auto& p : s.outputs) width = std::max(width, p.name.size());
  for (const auto& a : s.attrs) width = std::max(width, a.name.size());
  const int w = static_cast<int>(width);
  std::printf("\ninputs, in positional order:\n");
  for (std::size_t i = 0; i < s.inputs.size(); ++i) {
    const op::InputPort& p = s.inputs[i];
    const std::string_view dtypes = dtype_class_name(p.dtypes);
    std::printf("  %2zu  %-*s  %-8s  %.*s\n", i, w, p.name.c_str(),
                p.required ? "required" : "optional", static_cast<int>(dtypes.size()),
                dtypes.data());
  }
  std::printf("\noutputs:\n");
  for (const op::OutputPort& o : s.outputs)
    std::printf("      %-*s  %s\n", w, o.name.c_str(), when_text(o).c_str());
  std::printf("\nattributes:%s\n", s.attrs.empty() ? " none" : "");
  for (const op::AttrSpec& a : s.attrs) {
    const std::string_view type = op::attr_type_name(a.type);
    std::string value = a.required                    ? "required"
                        : a.default_value.has_value() ? "default " + a.default_value->to_json()
                                                      : "optional (derived by the op when absent)";
    std::printf("      %-*s  %-12.*s  %s\n", w, a.name.c_str(), static_cast<int>(type.size()),
                type.data(), value.c_str());
  }
  std::printf("\nshape rule:\n%s", wrapped(s.shape_rule, "  ", 96).c_str());
  std::printf("\nderivative: %s\n",
              s.grad ? "a rule of its own (op::backward, README \"Gradients\")"
                     : "none (its outputs carry no gradient, or it has no rule)");
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Ops whose name contains `name` or is contained in it, then those a few edits away, nearest
// first; at most six.
std::vector<std::string> close_names(const std::string& name) {
  std::vector<std::pair<std::size_t, std::string>> ranked;
  const std::size_t limit = std::max<std::size_t>(1, name.size() / 3);
  for (const op::OpSchema* s : op::all_ops()) {
    const bool contains =
        s->name.find(name) != std::string::npos || name.find(s->name) != std::string::npos;
    const std::size_t d = edit_distance(name, s->name);
    if (contains || d <= limit) ranked.emplace_back(contains ? 0 : d, s->name);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (const auto& r : ranked)
    if (out.size() < 6) out.push_back(r.second);
  return out;
}

}  // namespace

void ops_usage(std::FILE* to) {
  std::fprintf(to,
               "usage: eagle ops [NAME]\n"
               "  without NAME: every op of the tables, grouped by table, with what it computes\n"
               "  with NAME:    the op's inputs in positional order (required or optional, dtype\n"
               "                class), outputs (always, or when an attribute is true or an input\n"
               "                is wired), attributes (type, default or required), shape rule\n");
}

int run_ops(const std::vector<std::string>& args) {
  if (args.size() > 1 || (!args.empty() && !args[0].empty() && args[0][0] == '-')) {
    std::fprintf(stderr, "eagle ops: unexpected argument '%s'\n", args.back().c_str());
    ops_usage(stderr);
    return 2;
  }
  if (args.empty()) {
    list_all();
    return 0;
  }
  if (const op::OpSchema* s = op::find_op(args[0])) {
    describe(*s);
    return 0;
  }
  std::fprintf(stderr, "eagle ops: no op named '%s'", args[0].c_str());
  const std::vector<std::string> close = close_names(args[0]);
  for (std::size_t i = 0; i < close.size(); ++i)
    std::fprintf(stderr, "%s%s", i ? ", " : "; close names: ", close[i].c_str());
  std::fprintf(stderr, "%s\n", close.empty() ? " (`eagle ops` lists them all)" : "");
  return 2;
}

}  // namespace eagle::tools
