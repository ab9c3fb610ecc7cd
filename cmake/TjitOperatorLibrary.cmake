# tjit_add_operator_library: a shared library of your own operators, built on tjit's kit.
#
#   tjit_add_operator_library(<name>
#     SOURCES <file>...                 the operators' C++ (TORCH_LIBRARY_FRAGMENT, kernels, entry points)
#     KERNELS <file>...                 the @triton.jit kernel files the operators launch
#     [KERNEL_ROOT <dir>]               the folder KERNELS are relative to (default: the first one's)
#     [DESTINATION <dir>]               where `cmake --install` puts lib<name>.so (default: CMAKE_INSTALL_LIBDIR)
#     [BUNDLE <manifest>... TARGETS <cuda:XX>...]   embed those kernels compiled ahead of time
#     [JOBS <n>])                       parallel compiles for the bundle
#
# Builds lib<name>.so linking tjit::operators (the kit and the runtime) and installs it with its
# kernel files beside it, in <DESTINATION>/<name>_kernels/ (the layout under KERNEL_ROOT kept). The
# installed library carries a run path to itself, to tjit's libraries and to torch's, so
# `torch.ops.load_library` loads it in a process that never imported tjit, and a C++ program links it
# like any library.
#
# The library's C++ finds its kernel files with tjit::kit::library_kernel_path("<file>")
# (<tjit/kit/library_kernels.h>): the folder in the environment variable <NAME>_KERNEL_DIR when
# set, else <name>_kernels/ next to the library, else KERNEL_ROOT in the source tree (a build that is
# not installed runs the source files, so a manifest recorded from it names them).
#
# Where tjit is built by the same project (add_subdirectory, FetchContent), installing the library
# also installs tjit's three libraries beside it and tjit's kernels in <DESTINATION>/../share/tjit.

function(tjit_add_operator_library name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "KERNEL_ROOT;DESTINATION;JOBS" "SOURCES;KERNELS;BUNDLE;TARGETS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tjit_add_operator_library(${name}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_SOURCES OR NOT ARG_KERNELS)
    message(FATAL_ERROR "tjit_add_operator_library(${name}): give SOURCES <file>... and KERNELS <file>...")
  endif()
  if(ARG_BUNDLE AND NOT ARG_TARGETS)
    message(FATAL_ERROR "tjit_add_operator_library(${name}): BUNDLE needs TARGETS <cuda:XX>...")
  endif()
  if(ARG_TARGETS AND NOT ARG_BUNDLE)
    message(FATAL_ERROR "tjit_add_operator_library(${name}): TARGETS without a BUNDLE manifest")
  endif()
  if(NOT TARGET tjit::operators)
    message(FATAL_ERROR "tjit_add_operator_library(${name}): find_package(tjit) or FetchContent tjit first")
  endif()
  include(GNUInstallDirs)
  if(NOT ARG_DESTINATION)
    set(ARG_DESTINATION "${CMAKE_INSTALL_LIBDIR}")
  endif()

  # Kernel files, absolute, and their paths under the kernel root.
  set(_kernels "")
  foreach(_kernel IN LISTS ARG_KERNELS)
    get_filename_component(_kernel "${_kernel}" ABSOLUTE)
    if(NOT EXISTS "${_kernel}")
      message(FATAL_ERROR "tjit_add_operator_library(${name}): kernel file ${_kernel} does not exist")
    endif()
    list(APPEND _kernels "${_kernel}")
  endforeach()
  if(ARG_KERNEL_ROOT)
    get_filename_component(_root "${ARG_KERNEL_ROOT}" ABSOLUTE)
  else()
    list(GET _kernels 0 _first)
    get_filename_component(_root "${_first}" DIRECTORY)
  endif()
  set(_probe "")
  foreach(_kernel IN LISTS _kernels)
    file(RELATIVE_PATH _relative "${_root}" "${_kernel}")
    if(_relative MATCHES "^\\.\\./")
      message(FATAL_ERROR "tjit_add_operator_library(${name}): kernel ${_kernel} is outside KERNEL_ROOT ${_root}")
    endif()
    if(NOT _probe)
      set(_probe "${_relative}")
    endif()
    get_filename_component(_subdir "${_relative}" DIRECTORY)
    install(FILES "${_kernel}" DESTINATION "${ARG_DESTINATION}/${name}_kernels/${_subdir}")
  endforeach()

  add_library(${name} SHARED ${ARG_SOURCES})
  target_link_libraries(${name} PUBLIC tjit::operators)
  # A toolchain that links libstdc++ statically would otherwise export its copy, and torch's
  # libstdc++ calls would bind to it (a crash formatting an error message).
  target_link_options(${name} PRIVATE "LINKER:--exclude-libs,ALL")
  string(TOUPPER "${name}" _upper)
  string(MAKE_C_IDENTIFIER "${_upper}" _upper)
  # Read by <tjit/kit/library_kernels.h>.
  target_compile_definitions(${name} PRIVATE
    TJIT_LIBRARY_KERNEL_ENV="${_upper}_KERNEL_DIR"
    TJIT_LIBRARY_KERNEL_SUBDIR="${name}_kernels"
    TJIT_LIBRARY_KERNEL_PROBE="${_probe}"
    TJIT_LIBRARY_SOURCE_KERNEL_DIR="${_root}")

  # Run paths. Built: CMake's own (every linked library's folder). Installed: the library's folder
  # (tjit's libraries when installed together), tjit's libraries where find_package found them, and
  # torch's, so that a dlopen of the installed library alone resolves everything.
  get_property(_torch_lib_dir GLOBAL PROPERTY TJIT_TORCH_LIB_DIR)
  set(_rpath "$ORIGIN")
  get_target_property(_imported tjit::operators IMPORTED)
  if(_imported)
    foreach(_config "" _RELEASE _RELWITHDEBINFO _DEBUG _MINSIZEREL _NOCONFIG)
      get_target_property(_location tjit::operators IMPORTED_LOCATION${_config})
      if(_location)
        get_filename_component(_tjit_lib_dir "${_location}" DIRECTORY)
        list(APPEND _rpath "${_tjit_lib_dir}")
        break()
      endif()
    endforeach()
  else()
    get_property(_installed GLOBAL PROPERTY TJIT_OPERATOR_LIBRARY_INSTALLED_TJIT)
    if(NOT _installed)
      set_property(GLOBAL PROPERTY TJIT_OPERATOR_LIBRARY_INSTALLED_TJIT ON)
      install(TARGETS tjit_triton_jit tjit_operators tjit_python LIBRARY DESTINATION "${ARG_DESTINATION}")
      get_property(_tjit_source GLOBAL PROPERTY TJIT_SOURCE_DIR)
      install(DIRECTORY "${_tjit_source}/ops/kernels_py/" DESTINATION "${ARG_DESTINATION}/../share/tjit/kernels_py"
              FILES_MATCHING PATTERN "*.py" PATTERN "*.json" PATTERN "__pycache__" EXCLUDE)
    endif()
  endif()
  if(_torch_lib_dir)
    list(APPEND _rpath "${_torch_lib_dir}")
  endif()
  list(REMOVE_DUPLICATES _rpath)
  set_target_properties(${name} PROPERTIES INSTALL_RPATH "${_rpath}")
  install(TARGETS ${name} LIBRARY DESTINATION "${ARG_DESTINATION}")

  if(ARG_BUNDLE)
    set(_jobs "")
    if(ARG_JOBS)
      set(_jobs JOBS ${ARG_JOBS})
    endif()
    tjit_add_kernel_bundle(${name} NAME ${name} MANIFEST ${ARG_BUNDLE} TARGETS ${ARG_TARGETS} ${_jobs})
  endif()
endfunction()
