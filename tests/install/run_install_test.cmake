# Installs tern into a scratch prefix, builds an outside project against it with
# find_package(tern), and runs the result. Called by ctest as `cmake -P` with BUILD_DIR,
# SOURCE_DIR, WORK_DIR, CXX_COMPILER and GENERATOR defined.
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
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
