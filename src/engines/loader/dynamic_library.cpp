#include "engines/loader/dynamic_library.hpp"

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <filesystem>
#include <set>

namespace eagle::engines {

namespace {

std::vector<std::string> glob_dirs(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), GLOB_ONLYDIR, nullptr, &g) == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  return out;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// dlopen with the reason kept: the last dlerror() is the one a user needs to see.
void* try_open(const std::string& path, std::string& error) {
  ::dlerror();
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    error = e ? e : "dlopen failed";
  }
  return h;
}

// Tries `name` in each folder; on success fills `out`.
bool open_in(const std::vector<std::string>& dirs, const std::vector<std::string>& names,
             LoadedLibrary& out, std::vector<std::string>& tried) {
  for (const std::string& d : dirs)
    for (const std::string& n : names) {
      const std::filesystem::path p = std::filesystem::path(d) / n;
      std::error_code ec;
      if (!std::filesystem::exists(p, ec)) continue;
      std::string error;
      if (void* h = try_open(p.string(), error)) {
        out.handle = h;
        out.path = p.string();
        return true;
      }
      tried.push_back(p.string() + " (" + error + ")");
    }
  return false;
}

}  // namespace

void* LoadedLibrary::symbol(const char* name) const {
  return handle ? ::dlsym(handle, name) : nullptr;
}

std::vector<std::string> python_package_dirs() {
  std::vector<std::string> prefixes;
  for (const char* v : {"VIRTUAL_ENV", "CONDA_PREFIX"})
    if (!env(v).empty()) prefixes.push_back(env(v));
  const std::string home = env("HOME");
  if (!home.empty()) prefixes.push_back(home + "/.local");
  for (const char* p : {"/usr/local", "/usr", "/opt/conda"}) prefixes.emplace_back(p);
  std::vector<std::string> dirs;
  std::set<std::string> seen;
  auto add = [&](const std::string& d) {
    if (seen.insert(d).second) dirs.push_back(d);
  };
  const std::string pythonpath = env("PYTHONPATH");
  for (std::size_t at = 0; at <= pythonpath.size();) {
    const std::size_t end = std::min(pythonpath.find(':', at), pythonpath.size());
    if (end > at) add(pythonpath.substr(at, end - at));
    at = end + 1;
  }
  for (const std::string& p : prefixes)
    for (const char* kind : {"site-packages", "dist-packages"})
      for (const std::string& d : glob_dirs(p + "/lib/python3*/" + kind)) add(d);
  for (const char* kind : {"site-packages", "dist-packages"})
    for (const std::string& d : glob_dirs(std::string("/usr/lib/python3/") + kind)) add(d);
  return dirs;
}

LoadedLibrary open_library(const LibrarySearch& s) {
  LoadedLibrary out;
  std::vector<std::string> tried;
  const std::string forced = env(s.env_var.c_str());
  if (!forced.empty()) {
    std::error_code ec;
    if (std::filesystem::is_directory(forced, ec)) {
      if (open_in({forced}, s.sonames, out, tried)) return out;
    } else {
      std::string error;
      if (void* h = try_open(forced, error)) {
        out.handle = h;
        out.path = forced;
        return out;
      }
      tried.push_back(forced + " (" + error + ")");
    }
    out.reason = s.what + " not loaded: " + s.env_var + "=" + forced + " holds no usable " +
                 s.sonames.front();
    for (const std::string& t : tried) out.reason += "; tried " + t;
    return out;
  }
  for (const std::string& n : s.sonames) {
    std::string error;
    if (void* h = try_open(n, error)) {
      out.handle = h;
      out.path = n;
      return out;
    }
  }
  tried.push_back("the loader's path");
  std::vector<std::string> toolkit;
  for (const std::string& root :
       {env("CUDA_HOME"), env("CUDA_PATH"), std::string("/usr/local/cuda")})
    if (!root.empty()) {
      for (const char* lib : {"/lib64", "/lib", "/targets/x86_64-linux/lib"})
        toolkit.push_back(root + lib);
      for (const std::string& sub : s.toolkit_subdirs) toolkit.push_back(root + "/" + sub);
    }
  if (open_in(toolkit, s.sonames, out, tried)) return out;
  tried.push_back("the CUDA toolkit");
  std::vector<std::string> pip;
  for (const std::string& d : python_package_dirs())
    for (const std::string& sub : s.pip_subdirs) pip.push_back(d + "/" + sub);
  if (open_in(pip, s.sonames, out, tried)) return out;
  tried.push_back("the pip packages of " + std::to_string(python_package_dirs().size()) +
                  " Python package folders");
  out.reason = s.what + " not found (" + s.sonames.front() + "; set " + s.env_var +
               " to its file or folder): tried";
  for (std::size_t i = 0; i < tried.size(); ++i) out.reason += (i ? ", " : " ") + tried[i];
  return out;
}

}  // namespace eagle::engines
