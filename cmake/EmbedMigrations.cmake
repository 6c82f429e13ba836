# Writes a C++ source holding every migration file's name and text, in the order given.
# Called with -DOUT=<file.cpp> -DFILES=<a.sql|b.sql|...>.
string(REPLACE "|" ";" FILES "${FILES}")
set(body "// Generated from sql/migrations by cmake/EmbedMigrations.cmake. Do not edit.\n")
string(APPEND body "#include \"embedded_migrations.hpp\"\n\nnamespace trackd::db {\n\n")
string(APPEND body "const std::vector<MigrationFile>& embedded_migrations() {\n")
string(APPEND body "    static const std::vector<MigrationFile> files = {\n")
foreach(f IN LISTS FILES)
  get_filename_component(name ${f} NAME)
  file(READ ${f} text)
  # A raw string with a delimiter no SQL file uses.
  string(APPEND body "        {\"${name}\", R\"trackd_sql(${text})trackd_sql\"},\n")
endforeach()
string(APPEND body "    };\n    return files;\n}\n\n}  // namespace trackd::db\n")
file(WRITE ${OUT} "${body}")
