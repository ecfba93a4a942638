# eagle_kernel_sources(<target> <file>...): sources holding typed kernels (eagle/kernel/typed.hpp).
# They are compiled as CUDA when the CUDA language is enabled in the project, so their kernels
# get GPU versions, and as C++ otherwise (CPU versions only).
function(eagle_kernel_sources target)
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CUDA" IN_LIST languages)
    set_source_files_properties(${ARGN} PROPERTIES LANGUAGE CUDA)
  else()
    set_source_files_properties(${ARGN} PROPERTIES LANGUAGE CXX)
    if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
      set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS "-xc++")
    endif()
  endif()
  target_sources(${target} PRIVATE ${ARGN})
endfunction()
