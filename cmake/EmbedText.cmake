# Writes a C++ source defining `const char* const <SYMBOL>` with the text of one file, so that a
# document served by trackd (the OpenAPI description) ships inside the binary and is edited as
# the file it is (also the map page and MapLibre GL JS). Called with -DOUT=<file.cpp> -DIN=<file> -DSYMBOL=<ns::name> -DHEADER=<hpp>.
file(READ ${IN} text)
string(FIND "${text}" ")trackd_text\"" _clash)
if(NOT _clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw string delimiter )trackd_text\"")
endif()
string(REGEX REPLACE "::[^:]+$" "" ns "${SYMBOL}")
string(REGEX REPLACE "^.*::" "" name "${SYMBOL}")
get_filename_component(src ${IN} NAME)
file(WRITE ${OUT} "// Generated from ${src} by cmake/EmbedText.cmake. Do not edit.\n"
  "#include \"${HEADER}\"\n\nnamespace ${ns} {\n\n"
  "// A raw string with a delimiter the document never contains.\n"
  "const char* const ${name} = R\"trackd_text(${text})trackd_text\";\n\n}  // namespace ${ns}\n")
