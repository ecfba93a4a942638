// CUPTI opened at run time (exec/cupti_library.hpp): where it was found, or why not, said
// plainly. Runs in every build (the loader needs no CUDA header and no device).
#include <filesystem>
#include <iostream>
#include <string>

#include "exec/cupti_library.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using detail::cupti_library;

TEST(CuptiLibrary, AMissingFileNamedByTheVariableIsThePlainReason) {
  test::EnvGuard env("EAGLE_CUPTI_LIBRARY");
  env.set("/nonexistent/libcupti.so.13");
  const detail::CuptiLibrary& lib = cupti_library();
  EXPECT_FALSE(lib.loaded);
  for (const char* part :
       {"CUPTI not loaded", "EAGLE_CUPTI_LIBRARY=/nonexistent/libcupti.so.13", "libcupti.so.13"})
    EXPECT_NE(lib.status.find(part), std::string::npos) << lib.status;
}

TEST(CuptiLibrary, AFolderWithoutItIsThePlainReason) {
  test::EnvGuard env("EAGLE_CUPTI_LIBRARY");
  const std::string dir = ::testing::TempDir();
  env.set(dir.c_str());
  const detail::CuptiLibrary& lib = cupti_library();
  EXPECT_FALSE(lib.loaded);
  EXPECT_NE(lib.status.find("EAGLE_CUPTI_LIBRARY=" + dir), std::string::npos) << lib.status;
}

// The toolkit's copy, where this machine has one: either loaded (a CUPTI 13 that names its file
// and version) or refused with a reason that names the file. Which of the two depends on the
// library, not on a device: cuptiGetVersion needs none.
TEST(CuptiLibrary, TheToolkitsCopyIsLoadedOrRefusedByName) {
  std::string found;
  for (const char* p :
       {"/usr/local/cuda/lib64/libcupti.so.13", "/usr/local/cuda/lib/libcupti.so.13",
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"})
    if (std::filesystem::exists(p)) {
      found = p;
      break;
    }
  if (found.empty()) GTEST_SKIP() << "no libcupti.so.13 in /usr/local/cuda on this machine";
  test::EnvGuard env("EAGLE_CUPTI_LIBRARY");
  env.set(found.c_str());
  const detail::CuptiLibrary& lib = cupti_library();
  std::cout << lib.status << "\n";
  if (lib.loaded) {
    EXPECT_EQ(lib.version / 10000, detail::kCuptiMajor);
    EXPECT_EQ(lib.status.rfind("CUPTI 13.", 0), 0u) << lib.status;
    EXPECT_NE(lib.status.find("loaded from " + lib.path), std::string::npos) << lib.status;
    EXPECT_NE(lib.path.find("libcupti.so.13"), std::string::npos) << lib.path;
  } else {
    EXPECT_NE(lib.status.find("libcupti.so.13"), std::string::npos) << lib.status;
  }
  // Memoized per value of the variable: the same answer twice.
  EXPECT_EQ(&cupti_library(), &lib);
}

// The usual search (no variable): found somewhere, named; or every place tried, named.
TEST(CuptiLibrary, TheUsualSearchNamesWhatItFoundOrWhereItLooked) {
  test::EnvGuard env("EAGLE_CUPTI_LIBRARY");
  const detail::CuptiLibrary& lib = cupti_library();
  std::cout << lib.status << "\n";
  if (lib.loaded) {
    EXPECT_NE(lib.status.find("loaded from "), std::string::npos) << lib.status;
  } else {
    for (const char* part : {"CUPTI", "EAGLE_CUPTI_LIBRARY", "libcupti.so.13"})
      EXPECT_NE(lib.status.find(part), std::string::npos) << lib.status;
  }
}

TEST(CuptiLibrary, ThePublicStatusSaysWhatThisBuildDoes) {
  const std::string status = cupti_status();
  ASSERT_FALSE(status.empty());
#ifdef EAGLE_HAVE_CUDA
  EXPECT_EQ(status, cupti_library().status);
#else
  EXPECT_NE(status.find("no CUDA"), std::string::npos) << status;
#endif
}

}  // namespace
}  // namespace eagle
