// `eagle pack`: the seed's packing-efficiency table for a dataset (shared/seeds/
// ragged-cuda-graphs.txt, "Show me the data!") and a recommendation, from eagle/data.
#include "pack.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "eagle/core/error.hpp"
#include "eagle/data/documents.hpp"
#include "eagle/data/packing_report.hpp"
#include "eagle/data/zipf.hpp"

namespace eagle::tools {

namespace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<int64_t> int_list(const std::string& option, const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1)
      throw UsageError(option + " takes positive integers separated by commas, got '" + text + "'");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError(option + " needs at least one value");
  return out;
}

struct Options {
  std::string lengths, docs, csv, plot;
  std::vector<int64_t> zipf;  // total, count[, seed]
  std::vector<int64_t> budgets{4096, 8192, 16384, 32768};
  std::vector<int64_t> lookahead{1, 8, 16, 32, 64};
  int64_t segment_cap = 0;  // 0: the largest budget
  int64_t max_tokens = 50'000'000;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a value");
      return args[++i];
    };
    if (a == "--lengths")
      o.lengths = value();
    else if (a == "--docs")
      o.docs = value();
    else if (a == "--zipf")
      o.zipf = int_list(a, value());
    else if (a == "--budgets")
      o.budgets = int_list(a, value());
    else if (a == "--lookahead")
      o.lookahead = int_list(a, value());
    else if (a == "--segment-cap")
      o.segment_cap = int_list(a, value())[0];
    else if (a == "--max-tokens")
      o.max_tokens = int_list(a, value())[0];
    else if (a == "--csv")
      o.csv = value();
    else if (a == "--plot")
      o.plot = value();
    else
      throw UsageError("unknown option '" + a + "'");
  }
  const int sources = !o.lengths.empty() + !o.docs.empty() + !o.zipf.empty();
  if (sources != 1) throw UsageError("give exactly one of --lengths, --docs, --zipf");
  if (!o.zipf.empty() && o.zipf.size() != 2 && o.zipf.size() != 3)
    throw UsageError("--zipf takes TOTAL,COUNT[,SEED]");
  if (o.segment_cap == 0) o.segment_cap = *std::max_element(o.budgets.begin(), o.budgets.end());
  return o;
}

std::vector<int64_t> lengths_of(const Options& o) {
  if (!o.lengths.empty()) return data::read_lengths(o.lengths);
  if (!o.zipf.empty())
    return data::zipf_lengths(o.zipf[0], o.zipf[1],
                              o.zipf.size() == 3 ? static_cast<uint64_t>(o.zipf[2]) : 1);
  data::CorpusStats stats;
  const std::vector<data::Segment> segs =
      data::read_documents(o.docs, o.segment_cap, o.max_tokens, &stats);
  std::printf(
      "corpus: %lld text files (%lld skipped), %lld byte tokens, %lld segments (%lld documents "
      "split at %lld)\n",
      static_cast<long long>(stats.files), static_cast<long long>(stats.skipped),
      static_cast<long long>(stats.tokens), static_cast<long long>(stats.segments),
      static_cast<long long>(stats.split_documents), static_cast<long long>(o.segment_cap));
  std::vector<int64_t> out;
  for (const data::Segment& s : segs) out.push_back(static_cast<int64_t>(s.tokens.size()));
  return out;
}

// Runs the plot script (python3 with matplotlib) over the CSV; its own message when it fails.
int plot(const std::string& csv, const std::string& png) {
  const std::filesystem::path script = std::filesystem::path(EAGLE_TOOLS_DIR) / "plot_packing.py";
  const std::string command = "python3 '" + script.string() + "' '" + csv + "' '" + png + "'";
  const int rc = std::system(command.c_str());
  if (rc != 0) {
    std::fprintf(stderr,
                 "eagle pack: the plot failed (%s exited %d; it needs python3 with matplotlib)\n",
                 command.c_str(), rc);
    return 1;
  }
  std::printf("plot: %s\n", png.c_str());
  return 0;
}

}  // namespace

void pack_usage(std::FILE* to) {
  std::fprintf(
      to,
      "usage: eagle pack (--lengths FILE | --docs DIR | --zipf TOTAL,COUNT[,SEED]) [options]\n"
      "  packs the sequences with a look-ahead candidate buffer and prints, per token\n"
      "  budget T and buffer size B, the mean fill, mean padding, median and p99 M, then\n"
      "  a recommendation for T, N and the capacity buckets\n"
      "  --lengths FILE      one sequence length per line\n"
      "  --docs DIR          text files under DIR, byte-tokenized\n"
      "  --zipf T,C[,S]      C synthetic zipf lengths summing to T (seed S)\n"
      "  --budgets LIST      token budgets T (default 4096,8192,16384,32768)\n"
      "  --lookahead LIST    candidate buffer sizes B (default 1,8,16,32,64)\n"
      "  --segment-cap C     split sequences longer than C (default: the largest T)\n"
      "  --max-tokens N      read at most N tokens of --docs (default 50000000)\n"
      "  --csv FILE          write the table as CSV\n"
      "  --plot FILE.png     plot mean fill against T per B (python3 + matplotlib)\n");
}

int run_pack(const std::vector<std::string>& args) {
  Options o;
  try {
    o = parse(args);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "eagle pack: %s\n", e.what());
    pack_usage(stderr);
    return 2;
  }
  try {
    const std::vector<int64_t> lengths = data::split_lengths(lengths_of(o), o.segment_cap);
    std::printf("%zu sequences after splitting at %lld tokens\n", lengths.size(),
                static_cast<long long>(o.segment_cap));
    std::printf("%8s %5s %8s %10s %12s %9s %6s %6s\n", "T", "B", "batches", "mean fill",
                "mean padding", "median M", "p99 M", "max M");
    std::vector<data::PackingStats> all;
    for (int64_t t : o.budgets) {
      if (t < o.segment_cap) {
        std::printf("%8lld  skipped: below the segment cap %lld\n", static_cast<long long>(t),
                    static_cast<long long>(o.segment_cap));
        continue;
      }
      for (int64_t b : o.lookahead) {
        const data::PackingStats s = data::measure_packing(lengths, t, b);
        std::printf("%8lld %5lld %8lld %9.2f%% %12.1f %9lld %6lld %6lld\n",
                    static_cast<long long>(t), static_cast<long long>(b),
                    static_cast<long long>(s.batches), 100 * s.mean_fill, s.mean_padding,
                    static_cast<long long>(s.median_m), static_cast<long long>(s.p99_m),
                    static_cast<long long>(s.max_m));
        all.push_back(s);
      }
    }
    std::printf("\nrecommendation:\n");
    for (const data::PackingAdvice& a : data::advise_packing(all)) {
      std::string buckets;
      for (int64_t c : a.buckets) buckets += (buckets.empty() ? "" : ",") + std::to_string(c);
      std::printf("  T = %lld: B = %lld, N = %lld, buckets %s (%s)\n",
                  static_cast<long long>(a.tokens), static_cast<long long>(a.lookahead),
                  static_cast<long long>(a.slots), buckets.c_str(), a.reason.c_str());
    }
    std::string csv = o.csv;
    if (csv.empty() && !o.plot.empty()) csv = o.plot + ".csv";
    if (!csv.empty()) {
      std::ofstream out(csv);
      out << "tokens,lookahead,batches,mean_fill,mean_padding,median_m,p99_m,max_m\n";
      for (const data::PackingStats& s : all)
        out << s.tokens << ',' << s.lookahead << ',' << s.batches << ',' << s.mean_fill << ','
            << s.mean_padding << ',' << s.median_m << ',' << s.p99_m << ',' << s.max_m << '\n';
      if (!out) {
        std::fprintf(stderr, "eagle pack: cannot write '%s'\n", csv.c_str());
        return 1;
      }
    }
    if (!o.plot.empty()) return plot(csv, o.plot);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "eagle pack: %s\n", e.what());
    return 1;
  }
}

}  // namespace eagle::tools
