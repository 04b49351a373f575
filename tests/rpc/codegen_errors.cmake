# Runs protoc with protoc-gen-tern on every file of protos/invalid and checks that each fails with
# the message that names the problem. Called by ctest as `cmake -P` with PROTOC, PLUGIN, PROTO_DIR
# and WORK_DIR defined.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(failures "")

# Runs protoc on `proto`; it must fail and say `expected`.
function(expect_failure proto expected)
  execute_process(
    COMMAND ${PROTOC} -I ${PROTO_DIR} --plugin=protoc-gen-tern=${PLUGIN} --tern_out=${WORK_DIR}
            ${PROTO_DIR}/${proto}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(FIND "${err}" "${expected}" found)
  if(rc EQUAL 0)
    string(APPEND failures "${proto}: protoc succeeded, expected a failure\n")
  elseif(found EQUAL -1)
    string(APPEND failures "${proto}: expected\n  ${expected}\nin protoc's output:\n  ${err}\n")
  else()
    message(STATUS "${err}")
  endif()
  set(failures "${failures}" PARENT_SCOPE)
endfunction()

expect_failure(method_clash.proto
  "protoc-gen-tern: method_clash.proto:8:3: a.b.Foo.SayAsync clashes with a.b.Foo.Say: both generate FooClient::SayAsync; rename one of them")
expect_failure(member_clash.proto
  "protoc-gen-tern: member_clash.proto:6:3: a.b.Foo.methods clashes with FooBase::methods, which protoc-gen-tern generates for every service; rename the method")
expect_failure(keyword.proto
  "protoc-gen-tern: keyword.proto:6:3: a.b.Foo.delete: 'delete' is a C++ keyword; rename the method")
expect_failure(symbol_clash.proto
  "protoc-gen-tern: symbol_clash.proto:6:1: the class FooClient generated for a.b.Foo clashes with the message a.b.FooClient; rename one of them")
expect_failure(package_keyword.proto
  "protoc-gen-tern: package_keyword.proto: package a.class: 'class' is a C++ keyword and cannot name a namespace")

file(GLOB_RECURSE written ${WORK_DIR}/*)
if(written)
  string(APPEND failures "protoc wrote files although protoc-gen-tern failed: ${written}\n")
endif()
if(failures)
  message(FATAL_ERROR "${failures}")
endif()
