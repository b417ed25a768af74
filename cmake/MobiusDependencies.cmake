# Finds Mobius's dependencies. Everything comes from Debian 12 packages (deploy/install-deps.sh)
# except the CUDA toolkit and NCCL, which are preinstalled on the machines.

find_package(Threads REQUIRED)
if(MOBIUS_SERVICE)
  find_package(absl CONFIG REQUIRED)
  find_package(glog CONFIG REQUIRED)
  find_package(nlohmann_json 3 REQUIRED)
  # Several nodes: the per-stage gradient all-reduce across nodes (worker/runtime/node_collective.h).
  find_package(Gloo CONFIG REQUIRED)  # Debian: libgloo-dev
else()
  find_package(nlohmann_json 3 QUIET)
  # The CUDA-only subset builds what it can without them (a GPU machine may lack both).
  find_package(absl CONFIG QUIET)
  find_package(glog CONFIG QUIET)
  find_package(Gloo CONFIG QUIET)  # without it: no pipeline runtime (worker/CMakeLists.txt)
endif()
if(MOBIUS_TESTS)
  find_package(GTest CONFIG QUIET)
  if(NOT GTest_FOUND AND MOBIUS_GTEST_SOURCE_DIR)
    # A copy of Debian's /usr/src/googletest carried to a machine without GoogleTest installed.
    add_subdirectory(${MOBIUS_GTEST_SOURCE_DIR} ${PROJECT_BINARY_DIR}/googletest EXCLUDE_FROM_ALL)
    # GoogleTest >= 1.11 declares these aliases itself; older sources do not.
    foreach(gtest_lib gtest gmock gtest_main)
      if(NOT TARGET GTest::${gtest_lib})
        add_library(GTest::${gtest_lib} ALIAS ${gtest_lib})
      endif()
    endforeach()
  elseif(NOT GTest_FOUND)
    message(FATAL_ERROR "GoogleTest not found: install libgtest-dev or set MOBIUS_GTEST_SOURCE_DIR")
  endif()
endif()

if(MOBIUS_SERVICE)
  find_package(Protobuf REQUIRED)
  find_package(gRPC CONFIG REQUIRED)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HWLOC REQUIRED IMPORTED_TARGET hwloc>=2.0)
  # Job spec YAML (common/jobspec); Debian 12 ships yaml-cpp 0.7.
  pkg_check_modules(YAML_CPP REQUIRED IMPORTED_TARGET yaml-cpp>=0.6)
  find_package(SQLite3 REQUIRED)  # the job store (server/jobs/store/), target SQLite::SQLite3
  find_package(prometheus-cpp CONFIG REQUIRED)  # the daemon's metrics (server/metrics/)
  find_program(MOBIUS_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)
endif()

# CUDA: compiled whenever nvcc is found (MOBIUS_CUDA=AUTO), required with ON, skipped with OFF.
set(MOBIUS_HAVE_CUDA OFF)
if(NOT MOBIUS_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES ${MOBIUS_CUDA_ARCHITECTURES})
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 cannot ask nvcc for C++20
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    # Debian 12's CMake 3.25.1 FindCUDAToolkit sets a DEPRECATION property on CUDA::nvToolsExt
    # whenever the project requires CMake >= 3.25, without checking that the target exists; CUDA
    # >= 12.9 ships no libnvToolsExt (only the header-only nvtx3), so the configure stops at
    # "set_property could not find TARGET CUDA::nvToolsExt" (FindCUDAToolkit.cmake:1088). That
    # block only runs when CMAKE_MINIMUM_REQUIRED_VERSION >= 3.25, so it is lowered for this one
    # call (policies stay as set). Machines whose module was patched by hand never showed it
    # (`dpkg -V cmake-data`); scripts/fresh-root.sh does.
    set(_mobius_min_required ${CMAKE_MINIMUM_REQUIRED_VERSION})
    if(CMAKE_VERSION VERSION_LESS 3.26)
      set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
    endif()
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_MINIMUM_REQUIRED_VERSION ${_mobius_min_required})
    set(MOBIUS_HAVE_CUDA ON)
    # NCCL (preinstalled with the toolkit on our machines; optional: without it the runtime
    # keeps the host-staged transport). No CMake package ships with it: header + library.
    find_path(MOBIUS_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/include)
    find_library(MOBIUS_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/lib)
    if(MOBIUS_NCCL_INCLUDE_DIR AND MOBIUS_NCCL_LIBRARY AND NOT TARGET mobius_nccl_imported)
      add_library(mobius_nccl_imported UNKNOWN IMPORTED)
      set_target_properties(mobius_nccl_imported PROPERTIES
        IMPORTED_LOCATION ${MOBIUS_NCCL_LIBRARY}
        INTERFACE_INCLUDE_DIRECTORIES ${MOBIUS_NCCL_INCLUDE_DIR})
      message(STATUS "Mobius: NCCL ${MOBIUS_NCCL_LIBRARY}")
    elseif(NOT MOBIUS_NCCL_LIBRARY)
      message(STATUS "Mobius: NCCL not found; the GPU runtime uses the host-staged transport only")
    endif()
  elseif(MOBIUS_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MOBIUS_CUDA=ON but no CUDA compiler (nvcc) was found")
  else()
    message(STATUS "Mobius: nvcc not found; building without CUDA (CPU backend only)")
  endif()
endif()
