# Installs tern into a scratch prefix, builds outside projects against it with find_package(tern),
# and runs them: tests/install/consumer (tern::tern, the admin endpoint, tern_add_proto) and
# examples/rpc (kv_server and kv_client against each other, tests/install/run_kv_example.sh).
# Called as `cmake -P` with BUILD_DIR, SOURCE_DIR, WORK_DIR and GENERATOR defined, and optionally
# CXX_COMPILER: by ctest (install_test, on the test build) and by `make install-check` (on a build
# without tests and tools).
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
set(compiler)
if(CXX_COMPILER)
  set(compiler -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
endif()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix ${compiler}
    -DTERN_EXAMPLE_SOURCE=${SOURCE_DIR}/examples/fibers.cc)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
# tern::tern brings the admin layer whole, so an installed tern serves TERN_ADMIN in a program that
# never names it.
execute_process(COMMAND ${CMAKE_COMMAND} -E env TERN_ADMIN=127.0.0.1:0 ${WORK_DIR}/build/consumer
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT "${out}${err}" MATCHES "admin endpoint on http://127\\.0\\.0\\.1:[0-9]+/")
  message(FATAL_ERROR "consumer with TERN_ADMIN=127.0.0.1:0 (exit ${rc}) did not start the admin "
                      "endpoint:\n${out}\n${err}")
endif()
run(${WORK_DIR}/build/rpc_consumer)

# examples/rpc as a user builds it, on its own against the installed tern, then its server and
# client against each other.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/rpc -B ${WORK_DIR}/kv -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix ${compiler})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/kv)
run(bash ${SOURCE_DIR}/tests/install/run_kv_example.sh ${WORK_DIR}/kv)

# docs/rpc.md walks through examples/rpc: each of its C++ and .proto snippets is a piece of those
# files, word for word but for indentation, so that what the page shows compiles and runs here.
file(READ ${SOURCE_DIR}/docs/rpc.md doc)
set(example "\n")
foreach(file kv.proto kv_server.cc kv_client.cc)
  file(READ ${SOURCE_DIR}/examples/rpc/${file} text)
  string(APPEND example "${text}\n")
endforeach()
# Compared without the lines' indentation: the page shows code from inside functions dedented.
string(REGEX REPLACE "\n[ ]+" "\n" example "${example}")
# (Walked with string(FIND): the snippets hold semicolons, which a CMake list would split at.)
set(rest "${doc}")
set(count 0)
while(TRUE)
  string(REGEX MATCH "```(cpp|proto)\n" fence "${rest}")
  if(fence STREQUAL "")
    break()
  endif()
  string(FIND "${rest}" "${fence}" start)
  string(LENGTH "${fence}" fence_length)
  math(EXPR start "${start} + ${fence_length}")
  string(SUBSTRING "${rest}" ${start} -1 rest)
  string(FIND "${rest}" "```" end)
  if(end EQUAL -1)
    message(FATAL_ERROR "docs/rpc.md: a snippet is not closed")
  endif()
  string(SUBSTRING "${rest}" 0 ${end} body)
  math(EXPR end "${end} + 3")
  string(SUBSTRING "${rest}" ${end} -1 rest)
  string(REGEX REPLACE "\n[ ]+" "\n" body "\n${body}")
  string(FIND "${example}" "${body}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "docs/rpc.md: this snippet is not a piece of examples/rpc "
                        "(kv.proto, kv_server.cc, kv_client.cc):\n${body}")
  endif()
  math(EXPR count "${count} + 1")
endwhile()
if(count EQUAL 0)
  message(FATAL_ERROR "docs/rpc.md: no C++ or .proto snippet found")
endif()
message(STATUS "docs/rpc.md: ${count} snippets, each a piece of examples/rpc")
