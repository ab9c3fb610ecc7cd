# tjit_add_kernel_bundle: compile a manifest's kernels ahead of time and embed them in a target.
#
#   tjit_add_kernel_bundle(<target> MANIFEST <file>... TARGETS <cuda:XX>... [NAME <name>] [JOBS <n>])
#
# At build time, runs tjit's bundle builder (`python -m tjit aot build`, needing Python and Triton
# on the build machine only, no GPU) on the manifests, for every GPU target given, and links the
# bundle into <target> as read-only data. When the program (or library) is loaded, the bundle is
# registered with tjit's runtime: its kernels launch without Python, Triton or file access. The
# bundle is rebuilt when a manifest or a kernel source changes. <target> must link tjit::triton_jit
# (or tjit::operators). A static library's object would be dropped by the linker unless something
# references it: embed into the executable or shared library instead.
#
# TJIT_AOT_PYTHON (default: Python3_EXECUTABLE) is the Python with Triton that builds the bundle;
# the builder (the package folder aot/) is found beside this file: in tjit's source tree, an installed prefix or a
# wheel (or TJIT_AOT_SCRIPT names it).

function(tjit_add_kernel_bundle target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "NAME;JOBS" "MANIFEST;TARGETS")
  if(NOT TARGET ${target})
    message(FATAL_ERROR "tjit_add_kernel_bundle: ${target} is not a target")
  endif()
  if(NOT ARG_MANIFEST OR NOT ARG_TARGETS)
    message(FATAL_ERROR "tjit_add_kernel_bundle(${target}): give MANIFEST <file>... and TARGETS <cuda:XX>...")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tjit_add_kernel_bundle(${target}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_NAME)
    set(ARG_NAME ${target})
  endif()
  set(_python "${TJIT_AOT_PYTHON}")
  if(NOT _python)
    set(_python "${Python3_EXECUTABLE}")
  endif()
  set(_here "${CMAKE_CURRENT_FUNCTION_LIST_DIR}")
  set(_script "")
  # tjit's source tree (cmake/), a wheel (tjit/lib/cmake/tjit), a prefix (lib[/<arch>]/cmake/tjit)
  # The builder is the package folder aot/ (Python runs a folder through its __main__.py).
  foreach(_candidate "${TJIT_AOT_SCRIPT}" "${_here}/../ops/aot" "${_here}/../../../aot"
                     "${_here}/../../../share/tjit/aot/aot" "${_here}/../../../../share/tjit/aot/aot")
    if(_candidate AND EXISTS "${_candidate}/__main__.py" AND NOT _script)
      get_filename_component(_script "${_candidate}" ABSOLUTE)
    endif()
  endforeach()
  if(NOT _python OR NOT _script)
    message(FATAL_ERROR "tjit_add_kernel_bundle(${target}): needs a Python with Triton (TJIT_AOT_PYTHON or "
                        "Python3_EXECUTABLE: '${_python}') and tjit's builder, the folder aot/ (not found near ${_here}; "
                        "set TJIT_AOT_SCRIPT to it)")
  endif()

  string(MAKE_C_IDENTIFIER "${target}_${ARG_NAME}" _id)
  set(_dir "${CMAKE_CURRENT_BINARY_DIR}/tjit_bundles")
  set(_bundle "${_dir}/${_id}.tjb")
  set(_source "${_dir}/${_id}.cpp")
  set(_command "${_python}" "${_script}" build -o "${_bundle}" --depfile "${_bundle}.d")
  set(_manifests "")
  foreach(_manifest IN LISTS ARG_MANIFEST)
    get_filename_component(_manifest "${_manifest}" ABSOLUTE)
    if(NOT EXISTS "${_manifest}")
      message(FATAL_ERROR "tjit_add_kernel_bundle(${target}): manifest ${_manifest} does not exist "
                          "(record one with TJIT_RECORD=<file>)")
    endif()
    list(APPEND _manifests "${_manifest}")
    list(APPEND _command --manifest "${_manifest}")
  endforeach()
  foreach(_target IN LISTS ARG_TARGETS)
    list(APPEND _command --target "${_target}")
  endforeach()
  if(ARG_JOBS)
    list(APPEND _command -j "${ARG_JOBS}")
  endif()
  set(_depfile "")
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.20)
    set(_depfile DEPFILE "${_bundle}.d")  # the kernel sources the bundle was built from
  endif()
  file(MAKE_DIRECTORY "${_dir}")
  add_custom_command(
    OUTPUT "${_bundle}"
    COMMAND ${_command}
    DEPENDS ${_manifests} "${_script}"
    ${_depfile}
    COMMENT "tjit: building kernel bundle ${ARG_NAME} for ${ARG_TARGETS}"
    VERBATIM)
  add_custom_target(${_id}_tjit_bundle DEPENDS "${_bundle}")

  set(TJIT_BUNDLE_SYMBOL "tjit_bundle_${_id}")
  set(TJIT_BUNDLE_NAME "${ARG_NAME}")
  set(TJIT_BUNDLE_PATH "${_bundle}")
  configure_file("${_here}/kernel_bundle_embed.cpp.in" "${_source}" @ONLY)
  set_source_files_properties("${_source}" PROPERTIES OBJECT_DEPENDS "${_bundle}")
  target_sources(${target} PRIVATE "${_source}")
  add_dependencies(${target} ${_id}_tjit_bundle)
endfunction()
