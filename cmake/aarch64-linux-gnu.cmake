# cmake/aarch64-linux-gnu.cmake — a cross build for 64-bit ARM Linux on an x86-64 Debian or Ubuntu machine:
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DSCRATCHGRAD_CUDA=OFF -DSCRATCHGRAD_MPI=OFF
# (`make test-arm64` does this, installs what it needs and runs the tests under qemu-user.)
#
# The libraries come from Debian's multiarch packages (libblis-dev:arm64, libfmt-dev:arm64, ...): their
# files sit in /usr/lib/aarch64-linux-gnu beside the host's, and the headers in /usr/include are shared.
# So there is no separate sysroot: CMake looks in the aarch64 library folder, never in the x86-64 one.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# The programs run on this machine under user-mode QEMU: ctest runs each test through it, and the tests
# that start the command line or an example read SCRATCHGRAD_EMULATOR (tests/test_process.h). Plain
# qemu-aarch64 finds the arm64 loader and libc that multiarch installed in /lib; with `-L /usr/aarch64-linux-gnu`
# (the cross toolchain's copies) threaded programs hang, so no -L here.
find_program(SCRATCHGRAD_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${SCRATCHGRAD_QEMU_AARCH64})

# Only aarch64 libraries and packages, never the host's x86-64 ones; programs (cmake, ccache) from the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
