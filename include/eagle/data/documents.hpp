// Documents as token sequences, and the segments a packer takes from them.
//
// The tokenizer is byte-level (token = byte value, vocabulary 256): a real corpus needs no
// model-specific vocabulary file, and every text a Debian or PyPI package ships (documentation,
// source code) tokenizes the same way on every machine. A segment is at most `segment_cap`
// tokens: longer documents are split into consecutive segments, each a sequence of its own.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace eagle::data {

constexpr int kByteVocabulary = 256;

// One sequence a batch can hold: its tokens, and where it came from (for messages).
struct Segment {
  std::vector<int32_t> tokens;
  std::string source;  // "path" or "path#k" for the k-th segment of a split document
};

// What read_documents found and what it skipped.
struct CorpusStats {
  int64_t files = 0;            // text files read
  int64_t skipped = 0;          // binary (a NUL byte in the first 4 KiB), empty or unreadable files
  int64_t tokens = 0;           // bytes read
  int64_t segments = 0;         // segments made
  int64_t split_documents = 0;  // documents longer than the cap, split
};

// The text files under `root` (a file or a folder, walked recursively in sorted path order, so
// the result is the same on every run), byte-tokenized and split into segments of at most
// `segment_cap` tokens, up to `max_tokens` tokens in all (0: no limit; the last file read may be
// cut there). Throws InvalidArgument when root does not exist, segment_cap < 1 or max_tokens < 0.
std::vector<Segment> read_documents(const std::filesystem::path& root, int64_t segment_cap,
                                    int64_t max_tokens = 0, CorpusStats* stats = nullptr);

// The lengths of a file with one positive integer per line (blank lines and lines starting with
// '#' ignored). Throws InvalidArgument naming the line of anything else.
std::vector<int64_t> read_lengths(const std::filesystem::path& file);

// Lengths split at `segment_cap`: a length n > cap becomes floor(n / cap) segments of cap and
// the rest (if any), as read_documents splits documents.
std::vector<int64_t> split_lengths(const std::vector<int64_t>& lengths, int64_t segment_cap);

}  // namespace eagle::data
