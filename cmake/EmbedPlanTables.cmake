# cmake -DINPUTS="a.json;b.json" -DOUTPUT=file.cpp -P EmbedPlanTables.cmake
# Writes a C++ file defining tjit::detail::kPlanTables (each file's text), kPlanTableNames (the file
# names) and kNumPlanTables: the per-card plan tables (ops/plan_tables/) liboperators carries.
set(_texts "")
set(_names "")
set(_count 0)
foreach(_input IN LISTS INPUTS)
  file(READ "${_input}" _text)
  string(FIND "${_text}" ")tjit_table\"" _clash)
  if(NOT _clash EQUAL -1)
    message(FATAL_ERROR "${_input} contains the raw-string delimiter )tjit_table\"")
  endif()
  get_filename_component(_name "${_input}" NAME)
  string(APPEND _texts "    R\"tjit_table(${_text})tjit_table\",\n")
  string(APPEND _names "    \"${_name}\",\n")
  math(EXPR _count "${_count} + 1")
endforeach()
if(_count EQUAL 0)
  set(_texts "    nullptr,\n")
  set(_names "    nullptr,\n")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ops/plan_tables/*.json; do not edit.\n"
  "#include <cstddef>\n"
  "namespace tjit::detail {\n"
  "extern const char* const kPlanTables[];\n"
  "extern const char* const kPlanTableNames[];\n"
  "extern const size_t kNumPlanTables;\n"
  "const char* const kPlanTables[] = {\n${_texts}};\n"
  "const char* const kPlanTableNames[] = {\n${_names}};\n"
  "const size_t kNumPlanTables = ${_count};\n"
  "}  // namespace tjit::detail\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
