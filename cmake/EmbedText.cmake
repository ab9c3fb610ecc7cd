# cmake -DINPUT=file -DOUTPUT=file.cpp -P EmbedText.cmake
# Writes a C++ file defining tjit::detail::kTritonAdapterSource with INPUT's text.
file(READ "${INPUT}" _text)
string(FIND "${_text}" ")tjit_py\"" _clash)
if(NOT _clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter )tjit_py\"")
endif()
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT}; do not edit.\n"
  "namespace tjit::detail {\n"
  "extern const char* const kTritonAdapterSource;\n"
  "const char* const kTritonAdapterSource = R\"tjit_py(${_text})tjit_py\";\n"
  "}  // namespace tjit::detail\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
