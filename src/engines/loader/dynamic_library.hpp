// Vendor libraries opened at run time (cuDNN, cuBLASLt): eagle links none of them, so a machine
// without one still runs everything else, and says why the engines that need it are absent.
#pragma once

#include <string>
#include <vector>

namespace eagle::engines {

// Where to look for one library, in order: the file or folder named by `env_var` (when set,
// only there), the loader's own path (`sonames`), the CUDA toolkit's lib folders and its
// `toolkit_subdirs` (such as "extras/CUPTI/lib64"), then the `pip_subdirs` (such as
// "nvidia/cudnn/lib") of every Python site-packages folder found.
struct LibrarySearch {
  std::string what;                  // "cuDNN", for messages
  std::string env_var;               // "EAGLE_CUDNN_LIBRARY"
  std::vector<std::string> sonames;  // {"libcudnn.so.9"}
  std::vector<std::string> pip_subdirs;
  std::vector<std::string> toolkit_subdirs = {};
};

// An opened library (kept open for the life of the process), or why none was.
struct LoadedLibrary {
  void* handle = nullptr;
  std::string path;    // what was opened
  std::string reason;  // why nothing was, naming every place tried; empty when opened
  explicit operator bool() const { return handle != nullptr; }
  // The symbol's address, or nullptr.
  void* symbol(const char* name) const;
};

LoadedLibrary open_library(const LibrarySearch& search);

// The site-packages / dist-packages folders of the Pythons this process can see: $VIRTUAL_ENV,
// $CONDA_PREFIX, $PYTHONPATH, ~/.local, /usr/local, /usr and /opt/conda.
std::vector<std::string> python_package_dirs();

}  // namespace eagle::engines
