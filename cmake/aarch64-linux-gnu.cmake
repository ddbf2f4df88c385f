# Cross-compiling for aarch64 Linux with Debian's g++-aarch64-linux-gnu; tests run under
# qemu-user-static (ctest prefixes each test command with the emulator). Used by .ci/run:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DPAGODA_CPU_TESTS_ONLY=ON
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# The aarch64 libc and libstdc++ of the cross packages live here; qemu needs it as its sysroot.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# -cpu max: every optional feature qemu emulates, BF16 included, so each kernel path runs.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static -cpu max -L /usr/aarch64-linux-gnu)
