// Reading a corpus as byte tokens, splitting at the segment cap, and length files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "compare.hpp"
#include "eagle/data/documents.hpp"
#include "random.hpp"

namespace eagle::data {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the system's temporary directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("eagle-data-" + std::to_string(test::random_ints(1, 0, 1'000'000'000)[0]));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  void write(const std::string& name, const std::string& bytes) const {
    fs::create_directories((path / name).parent_path());
    std::ofstream(path / name, std::ios::binary) << bytes;
  }
};

TEST(ReadDocuments, TokenizesBytesSplitsAtTheCapAndSkipsBinaries) {
  TempDir dir;
  dir.write("b/long.txt", std::string(25, 'x'));
  dir.write("a.txt", "hi\xC3\xA9");  // UTF-8 bytes are tokens 0..255
  dir.write("c.bin", std::string("ab\0cd", 5));
  dir.write("d.txt", "");
  CorpusStats stats;
  const std::vector<Segment> segs = read_documents(dir.path, 10, 0, &stats);
  ASSERT_EQ(segs.size(), 4u);  // a.txt, then long.txt in 10 + 10 + 5 (sorted path order)
  EXPECT_EQ(segs[0].tokens, (std::vector<int32_t>{'h', 'i', 0xC3, 0xA9}));
  EXPECT_EQ(segs[0].source, (dir.path / "a.txt").string());
  EXPECT_EQ(segs[1].tokens.size(), 10u);
  EXPECT_EQ(segs[3].tokens.size(), 5u);
  EXPECT_EQ(segs[2].source, (dir.path / "b/long.txt").string() + "#1");
  EXPECT_EQ(stats.files, 2);
  EXPECT_EQ(stats.skipped, 2);
  EXPECT_EQ(stats.tokens, 29);
  EXPECT_EQ(stats.segments, 4);
  EXPECT_EQ(stats.split_documents, 1);
}

TEST(ReadDocuments, StopsAtMaxTokens) {
  TempDir dir;
  dir.write("a.txt", std::string(30, 'a'));
  dir.write("b.txt", std::string(30, 'b'));
  const std::vector<Segment> segs = read_documents(dir.path, 100, 40);
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[1].tokens.size(), 10u);
}

TEST(ReadDocuments, RefusesBadArguments) {
  test::expect_invalid([] { read_documents("/nonexistent/eagle-corpus", 8); },
                       {"root", "/nonexistent/eagle-corpus", "does not exist"});
  TempDir dir;
  test::expect_invalid([&] { read_documents(dir.path, 0); }, {"segment_cap", ">= 1"});
  test::expect_invalid([&] { read_documents(dir.path, 8, -1); }, {"max_tokens", ">= 0"});
}

TEST(ReadLengths, ReadsOnePerLineAndNamesTheBadLine) {
  TempDir dir;
  dir.write("ok.txt", "# lengths\n12\n\n 7 \n3\n");
  EXPECT_EQ(read_lengths(dir.path / "ok.txt"), (std::vector<int64_t>{12, 7, 3}));
  dir.write("bad.txt", "12\n0\n");
  test::expect_invalid([&] { read_lengths(dir.path / "bad.txt"); }, {"bad.txt:2", "'0'"});
  dir.write("bad2.txt", "5 6\n");
  test::expect_invalid([&] { read_lengths(dir.path / "bad2.txt"); }, {"bad2.txt:1", "5 6"});
  test::expect_invalid([&] { read_lengths(dir.path / "none.txt"); }, {"cannot open"});
}

TEST(SplitLengths, SplitsAsReadDocumentsDoes) {
  EXPECT_EQ(split_lengths({25, 10, 3}, 10), (std::vector<int64_t>{10, 10, 5, 10, 3}));
  test::expect_invalid([] { split_lengths({1}, 0); }, {"segment_cap"});
}

}  // namespace
}  // namespace eagle::data
