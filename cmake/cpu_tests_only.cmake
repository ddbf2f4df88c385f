# PAGODA_CPU_TESTS_ONLY: only the CPU backend (src/core, src/backend without cuda/), the op table
# (src/bench/op_table*.cpp) and the CPU backend's kernel and op-table tests — no server, no CUDA, no
# other third-party library but GoogleTest, which is compiled here from Debian's source package
# (libgtest-dev ships /usr/src/googletest) so that a cross build needs no foreign-architecture
# packages. For the aarch64 build under qemu (cmake/aarch64-linux-gnu.cmake, .ci/run).
find_package(Threads REQUIRED)
set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
set(BUILD_GMOCK OFF CACHE BOOL "" FORCE)
add_subdirectory(/usr/src/googletest ${CMAKE_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)

file(GLOB_RECURSE cpu_core_sources CONFIGURE_DEPENDS src/core/*.cpp)
file(GLOB_RECURSE cpu_backend_sources CONFIGURE_DEPENDS src/backend/*.cpp)
list(FILTER cpu_backend_sources EXCLUDE REGEX "src/backend/(cuda|vulkan)/")
file(GLOB cpu_op_table_sources CONFIGURE_DEPENDS src/bench/op_table*.cpp)
add_library(pagoda_cpu_only STATIC ${cpu_core_sources} ${cpu_backend_sources} ${cpu_op_table_sources})
target_include_directories(pagoda_cpu_only PUBLIC src)
target_compile_options(pagoda_cpu_only PRIVATE ${PAGODA_WARNINGS})
target_compile_definitions(pagoda_cpu_only PRIVATE PAGODA_VERSION="${PROJECT_VERSION}")
target_link_libraries(pagoda_cpu_only PUBLIC Threads::Threads)

enable_testing()
# The curated set: the GEMV kernels on every ISA path and the CPU backend's op table (about 15 s
# under qemu on two cores, most of it the paged-attention cases).
add_executable(pagoda_cpu_tests tests/backend/op_table_test.cpp tests/backend/cpu_gemv_test.cpp)
target_compile_options(pagoda_cpu_tests PRIVATE ${PAGODA_WARNINGS})
target_link_libraries(pagoda_cpu_tests PRIVATE pagoda_cpu_only GTest::gtest GTest::gtest_main)
include(GoogleTest)
# Listed when ctest runs (through the emulator), not at build time; the CUDA and Vulkan cases would
# only skip (neither backend is in this build).
gtest_discover_tests(pagoda_cpu_tests DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 120 TEST_FILTER "-*cuda*:*vulkan*"
                     WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
# The op table's CPU linear cases once per 16-bit-weight kernel path, as in the full build.
foreach(isa scalar neon neonbf16)
  add_test(NAME OpTableIsa.${isa}
           COMMAND pagoda_cpu_tests "--gtest_filter=Backends/OpTable.MatchesNaiveAndCpu/cpu_linear:Backends/OpTable.MatchesNaiveAndCpu/cpu_moe_grouped_linear:Backends/OpTable.MatchesNaiveAndCpu/cpu_linear_silu_mul"
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(OpTableIsa.${isa} PROPERTIES ENVIRONMENT PAGODA_CPU_ISA=${isa}
                       SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endforeach()
