# Finds Apache Arrow and Parquet C++ for the archive area and defines ArrowParquet::ArrowParquet.
#
# Two routes, tried in order:
#   1. A system installation (Apache's own packages, a source build, conda, ...):
#      find_package(Arrow CONFIG) and find_package(Parquet CONFIG).
#   2. The pyarrow wheel from PyPI, which ships libarrow, libparquet and their headers. Debian 12
#      packages no Arrow, so this is the route on a fresh machine: scripts/python-env.sh installs
#      the pinned pyarrow into .venv/, and this module asks that interpreter where it is.
#
# Inputs (cache variables):
#   TRACKD_ARROW_ROUTE  auto (default), system or pyarrow
#   TRACKD_PYTHON       the interpreter that has pyarrow (default: <source>/.venv/bin/python)
# Outputs:
#   ArrowParquet_FOUND, ArrowParquet_ROUTE, ArrowParquet_VERSION, target ArrowParquet::ArrowParquet
#
# The pyarrow libraries are linked by full path, so the build tree's RPATH points into the wheel;
# an installed trackd needs that directory (or a system Arrow of the same version) on its
# library path.

set(TRACKD_ARROW_ROUTE "auto" CACHE STRING "Where Arrow/Parquet C++ come from: auto, system or pyarrow")
set_property(CACHE TRACKD_ARROW_ROUTE PROPERTY STRINGS auto system pyarrow)
set(TRACKD_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH
    "Python interpreter with pyarrow installed (the pyarrow route)")

if(TARGET ArrowParquet::ArrowParquet)
  set(ArrowParquet_FOUND TRUE)
  return()
endif()

set(ArrowParquet_FOUND FALSE)
set(_ap_why "")

if(TRACKD_ARROW_ROUTE STREQUAL "auto" OR TRACKD_ARROW_ROUTE STREQUAL "system")
  find_package(Arrow CONFIG QUIET)
  find_package(Parquet CONFIG QUIET)
  if(Arrow_FOUND AND Parquet_FOUND AND TARGET Parquet::parquet_shared)
    add_library(ArrowParquet::ArrowParquet INTERFACE IMPORTED)
    target_link_libraries(ArrowParquet::ArrowParquet INTERFACE Parquet::parquet_shared
                                                               Arrow::arrow_shared)
    # S3 (s3:// warehouses): its own library since Arrow 22 (ArrowS3), inside libarrow before.
    find_package(ArrowS3 CONFIG QUIET)
    if(TARGET ArrowS3::arrow_s3_shared)
      target_link_libraries(ArrowParquet::ArrowParquet INTERFACE ArrowS3::arrow_s3_shared)
    endif()
    set(ArrowParquet_FOUND TRUE)
    set(ArrowParquet_ROUTE "system")
    set(ArrowParquet_VERSION "${Arrow_VERSION}")
  else()
    string(APPEND _ap_why "  system: find_package(Arrow/Parquet CONFIG) found no installation\n")
  endif()
endif()

if(NOT ArrowParquet_FOUND AND (TRACKD_ARROW_ROUTE STREQUAL "auto" OR
                               TRACKD_ARROW_ROUTE STREQUAL "pyarrow"))
  if(NOT EXISTS "${TRACKD_PYTHON}")
    string(APPEND _ap_why "  pyarrow: no interpreter at ${TRACKD_PYTHON}\n")
  else()
    # pyarrow_paths.py adds libarrow.so -> libarrow.so.<ABI> beside the versioned files (relative
    # links, safe in the venv every clone shares) and prints include dir, lib dir and version.
    execute_process(
      COMMAND "${TRACKD_PYTHON}" "${CMAKE_CURRENT_LIST_DIR}/pyarrow_paths.py"
      OUTPUT_VARIABLE _ap_out ERROR_VARIABLE _ap_err RESULT_VARIABLE _ap_rc
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT _ap_rc EQUAL 0)
      string(APPEND _ap_why "  pyarrow: ${TRACKD_PYTHON} cannot import pyarrow: ${_ap_err}\n")
    else()
      string(REPLACE "\n" ";" _ap_lines "${_ap_out}")
      list(GET _ap_lines 0 _ap_include)
      list(GET _ap_lines 1 _ap_libdir)
      list(GET _ap_lines 2 _ap_version)
      find_library(_ap_arrow NAMES arrow PATHS "${_ap_libdir}" NO_DEFAULT_PATH NO_CACHE)
      find_library(_ap_parquet NAMES parquet PATHS "${_ap_libdir}" NO_DEFAULT_PATH NO_CACHE)
      # The wheel is built with ARROW_S3; its S3 filesystem is libarrow_s3 (s3:// warehouses).
      find_library(_ap_s3 NAMES arrow_s3 PATHS "${_ap_libdir}" NO_DEFAULT_PATH NO_CACHE)
      if(_ap_arrow AND _ap_parquet AND _ap_s3 AND EXISTS "${_ap_include}/parquet/arrow/writer.h")
        # Link the versioned file itself (libarrow.so.2600): that is the soname the loader looks
        # for, found through the build RPATH CMake derives from the full path.
        file(REAL_PATH "${_ap_arrow}" _ap_arrow_real)
        file(REAL_PATH "${_ap_parquet}" _ap_parquet_real)
        add_library(ArrowParquet::arrow SHARED IMPORTED)
        set_target_properties(ArrowParquet::arrow PROPERTIES
          IMPORTED_LOCATION "${_ap_arrow_real}"
          INTERFACE_INCLUDE_DIRECTORIES "${_ap_include}")
        add_library(ArrowParquet::parquet SHARED IMPORTED)
        set_target_properties(ArrowParquet::parquet PROPERTIES
          IMPORTED_LOCATION "${_ap_parquet_real}"
          INTERFACE_INCLUDE_DIRECTORIES "${_ap_include}"
          INTERFACE_LINK_LIBRARIES ArrowParquet::arrow)
        file(REAL_PATH "${_ap_s3}" _ap_s3_real)
        add_library(ArrowParquet::arrow_s3 SHARED IMPORTED)
        set_target_properties(ArrowParquet::arrow_s3 PROPERTIES
          IMPORTED_LOCATION "${_ap_s3_real}"
          INTERFACE_INCLUDE_DIRECTORIES "${_ap_include}"
          INTERFACE_LINK_LIBRARIES ArrowParquet::arrow)
        add_library(ArrowParquet::ArrowParquet INTERFACE IMPORTED)
        target_link_libraries(ArrowParquet::ArrowParquet INTERFACE ArrowParquet::parquet
                                                                   ArrowParquet::arrow_s3)
        set(ArrowParquet_FOUND TRUE)
        set(ArrowParquet_ROUTE "pyarrow (${_ap_libdir})")
        set(ArrowParquet_VERSION "${_ap_version}")
      else()
        string(APPEND _ap_why
               "  pyarrow: ${_ap_libdir} lacks libarrow/libparquet/libarrow_s3 or ${_ap_include} lacks headers\n")
      endif()
    endif()
  endif()
endif()

if(ArrowParquet_FOUND)
  if(NOT ArrowParquet_FIND_QUIETLY)
    message(STATUS "Arrow/Parquet C++ ${ArrowParquet_VERSION} from ${ArrowParquet_ROUTE}")
  endif()
elseif(ArrowParquet_FIND_REQUIRED)
  message(FATAL_ERROR
    "Arrow/Parquet C++ not found (TRACKD_ARROW_ROUTE=${TRACKD_ARROW_ROUTE}):\n${_ap_why}"
    "Run `bash scripts/python-env.sh` (pinned pyarrow into .venv/), or install Arrow C++ and "
    "Parquet and pass -DTRACKD_ARROW_ROUTE=system; see README.md, \"Arrow and Parquet\".")
endif()
