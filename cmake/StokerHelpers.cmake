# Project-wide compile settings and small helpers so every module is declared the same way.

add_library(stoker_options INTERFACE)
target_compile_options(stoker_options INTERFACE
  -Wall -Wextra -Wpedantic -Werror -Wno-missing-field-initializers)
target_include_directories(stoker_options INTERFACE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(stoker_options INTERFACE Threads::Threads)

if(STOKER_SANITIZE)
  target_compile_options(stoker_options INTERFACE
    -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(stoker_options INTERFACE -fsanitize=address,undefined)
endif()
if(STOKER_FUZZ)
  target_compile_options(stoker_options INTERFACE -fsanitize=fuzzer-no-link,address,undefined)
  target_link_options(stoker_options INTERFACE -fsanitize=address,undefined)
endif()
if(STOKER_PORTABLE)
  target_link_options(stoker_options INTERFACE -static-libstdc++ -static-libgcc)
  # The portable build is Release (-O3), where GCC 12 reports false -Wrestrict overlaps inside
  # libstdc++'s std::string operator+ (GCC bug 105329); the -O2 builds keep the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(stoker_options INTERFACE -Wno-restrict)
  endif()
endif()

# stoker_library(NAME SRCS a.cc b.cc DEPS x y) -> target stoker_NAME, alias stoker::NAME.
function(stoker_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_library(stoker_${name} STATIC ${ARG_SRCS})
  add_library(stoker::${name} ALIAS stoker_${name})
  target_link_libraries(stoker_${name} PUBLIC stoker_options ${ARG_DEPS})
endfunction()

# stoker_test(NAME SRCS ... DEPS ...) -> one GoogleTest executable registered with CTest.
function(stoker_test name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE stoker_options ${ARG_DEPS} stoker::test_support GTest::gtest
                        GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE
    STOKER_SHARED_DIR="${STOKER_SHARED_DIR}"
    STOKER_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    STOKER_BINARY_DIR="${PROJECT_BINARY_DIR}")
  include(GoogleTest)
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${ARG_LABELS}")
endfunction()

# stoker_bench(NAME SRCS ... DEPS ...) -> one Google Benchmark executable.
function(stoker_bench name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE stoker_options ${ARG_DEPS} stoker::test_support
                        benchmark::benchmark)
  target_compile_definitions(${name} PRIVATE
    STOKER_SHARED_DIR="${STOKER_SHARED_DIR}"
    STOKER_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    STOKER_BINARY_DIR="${PROJECT_BINARY_DIR}")
endfunction()
