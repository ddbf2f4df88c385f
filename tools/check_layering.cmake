# Fails when a file of src/<folder>/ includes a pagoda header from a folder that folder may not use,
# or when a file outside src/backend/ includes a concrete backend (backend/cpu/, backend/cuda/,
# backend/vulkan/): above backend/ everything goes through the Backend contract.
# Run by ctest (Layering.NothingIncludesUpward) with the map CMakeLists.txt declares:
#   cmake -DSRC=<repo>/src -DLAYERS=core,io,... -DALLOWED_<layer>=a,b,... -P tools/check_layering.cmake
cmake_minimum_required(VERSION 3.25)
string(REPLACE "," ";" layers "${LAYERS}")
set(problems "")
file(GLOB folders RELATIVE "${SRC}" "${SRC}/*")
foreach(folder ${folders})
  if(IS_DIRECTORY "${SRC}/${folder}" AND NOT folder IN_LIST layers)
    string(APPEND problems "  src/${folder}/ is not a layer of CMakeLists.txt's PAGODA_LAYERS\n")
  endif()
endforeach()
foreach(layer ${layers})
  string(REPLACE "," ";" allowed "${ALLOWED_${layer}}")
  file(GLOB_RECURSE files "${SRC}/${layer}/*.h" "${SRC}/${layer}/*.cpp" "${SRC}/${layer}/*.cuh"
       "${SRC}/${layer}/*.cu")
  foreach(f ${files})
    file(STRINGS "${f}" includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"[a-z_0-9]+/")
    foreach(line ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([a-z_0-9]+)/.*" "\\1" target "${line}")
      file(RELATIVE_PATH rel "${SRC}/.." "${f}")
      if(NOT target IN_LIST allowed)
        string(APPEND problems "  ${rel} includes ${target}/ but ${layer}/ may use only: ${ALLOWED_${layer}}\n")
      elseif(NOT layer STREQUAL "backend" AND line MATCHES "\"backend/(cpu|cuda|vulkan)/")
        string(APPEND problems "  ${rel} includes a concrete backend (backend/${CMAKE_MATCH_1}/); outside backend/ "
                               "use the Backend contract (backend/backend.h) instead\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(problems)
  message(FATAL_ERROR "layering: an include reaches outside the folders a layer may use "
                      "(docs/design.md, the map in CMakeLists.txt):\n${problems}")
endif()
list(LENGTH layers n)
message(STATUS "layering: ${n} layers, every include within its layer's map")
