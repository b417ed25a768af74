# Small helpers so that every component is one target with explicit dependencies.
#
#   mobius_cc_library(NAME name SRCS a.cc b.cu HDRS a.h DEPS other::target [PUBLIC_DEPS ...])
#     PUBLIC_DEPS: what the public headers (HDRS) include; DEPS: what only the sources use (PRIVATE).
#   mobius_cc_binary(NAME name SRCS main.cc DEPS ...)
#   mobius_cc_test(NAME name SRCS foo_test.cc DEPS ... [LABELS unit;gpu] [GPU])
#
# Targets are named mobius_<name> with an alias mobius::<name>. Include paths are rooted at the
# repository (#include "host/topology/topology.h") and at the generated-sources directory.

function(mobius_cc_library)
  cmake_parse_arguments(A "" "NAME" "SRCS;HDRS;DEPS;PUBLIC_DEPS" ${ARGN})
  set(target mobius_${A_NAME})
  if(A_SRCS)
    add_library(${target} STATIC ${A_SRCS} ${A_HDRS})
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/gen)
    # DEPS are PRIVATE: a dependent sees only what this target's public headers need (PUBLIC_DEPS).
    target_link_libraries(${target} PUBLIC ${A_PUBLIC_DEPS} PRIVATE ${A_DEPS})
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
  else()
    add_library(${target} INTERFACE ${A_HDRS})
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/gen)
    target_link_libraries(${target} INTERFACE ${A_PUBLIC_DEPS} ${A_DEPS})
  endif()
  add_library(mobius::${A_NAME} ALIAS ${target})
endfunction()

function(mobius_cc_binary)
  cmake_parse_arguments(A "" "NAME;OUTPUT_NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${A_NAME} ${A_SRCS})
  target_include_directories(${A_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/gen)
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  target_compile_options(${A_NAME} PRIVATE -Wall -Wextra -Wno-unused-parameter)
  set_target_properties(${A_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endfunction()

# GPU tests carry the ctest label `gpu` and report "Skipped" (not "Passed") when they GTEST_SKIP
# because no device is present.
function(mobius_cc_test)
  cmake_parse_arguments(A "GPU" "NAME" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${A_NAME} ${A_SRCS})
  target_include_directories(${A_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/gen)
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  set_target_properties(${A_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  add_test(NAME ${A_NAME} COMMAND ${A_NAME})
  set(labels ${A_LABELS})
  if(A_GPU)
    list(APPEND labels gpu)
    set_tests_properties(${A_NAME} PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
  endif()
  if(NOT labels)
    set(labels unit)
  endif()
  set_tests_properties(${A_NAME} PROPERTIES LABELS "${labels}"
    ENVIRONMENT "MOBIUS_SOURCE_DIR=${PROJECT_SOURCE_DIR};MOBIUS_BINARY_DIR=${PROJECT_BINARY_DIR}")
endfunction()
