# tern_add_proto(<target> <file.proto>... [IMPORT_DIRS <dir>...])
#
# Compiles the .proto files with protoc into ${CMAKE_CURRENT_BINARY_DIR}: the messages
# (<name>.pb.h/.pb.cc, --cpp_out) and the tern::rpc services (<name>.tern.h/.tern.cc, protoc-gen-tern;
# every file gets the pair, an empty one when it declares no service). Adds the generated sources to
# <target>, the output directory to its include path, and links it to tern::rpc. Call it in the
# directory that creates <target>; a .proto is generated for one target per directory (targets that
# share messages link a library target that holds them). docs/rpc.md, "Code generation".
#
# A file is named (in `import` lines, in the output paths, in #include) relative to the first of
# IMPORT_DIRS that contains it; IMPORT_DIRS default to ${CMAKE_CURRENT_SOURCE_DIR}, relative ones
# are taken from there. A file outside every import directory is named by its file name, and its
# directory joins the import path. List every .proto whose messages the target uses, imported
# ones included. protoc records the files each one imports, so editing any of them, or rebuilding
# protoc-gen-tern, regenerates exactly what depends on it.
#
# Works inside tern's build (the plugin is built first) and from an installed tern
# (find_package(tern) includes this file; the plugin is the installed executable).

if(NOT TARGET protobuf::protoc OR NOT TARGET protobuf::libprotobuf)
  find_package(Protobuf REQUIRED)
endif()

function(tern_add_proto target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "IMPORT_DIRS")
  set(files ${arg_UNPARSED_ARGUMENTS})
  if(NOT files)
    message(FATAL_ERROR "tern_add_proto(${target}): no .proto files given")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "tern_add_proto(${target}): no such target (create it first)")
  endif()
  if(NOT TARGET tern::protoc-gen-tern)
    message(FATAL_ERROR "tern_add_proto(${target}): the protoc-gen-tern target is not defined")
  endif()
  if(TARGET tern::rpc)
    set(rpc_library tern::rpc)
  elseif(TARGET tern::tern_rpc)
    set(rpc_library tern::tern_rpc)
  else()
    message(FATAL_ERROR "tern_add_proto(${target}): tern's rpc library is not defined")
  endif()

  set(import_dirs)
  foreach(dir IN LISTS arg_IMPORT_DIRS)
    cmake_path(ABSOLUTE_PATH dir BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} NORMALIZE)
    list(APPEND import_dirs ${dir})
  endforeach()
  if(NOT import_dirs)
    set(import_dirs ${CMAKE_CURRENT_SOURCE_DIR})
  endif()

  # The name of every file relative to its import directory.
  set(names)
  set(paths)
  foreach(file IN LISTS files)
    cmake_path(ABSOLUTE_PATH file BASE_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} NORMALIZE)
    if(NOT EXISTS ${file})
      message(FATAL_ERROR "tern_add_proto(${target}): ${file} does not exist")
    endif()
    set(name)
    foreach(dir IN LISTS import_dirs)
      cmake_path(IS_PREFIX dir ${file} NORMALIZE inside)
      if(inside)
        cmake_path(RELATIVE_PATH file BASE_DIRECTORY ${dir} OUTPUT_VARIABLE name)
        break()
      endif()
    endforeach()
    if(NOT name)
      cmake_path(GET file FILENAME name)
      cmake_path(GET file PARENT_PATH dir)
      list(APPEND import_dirs ${dir})
    endif()
    list(APPEND names ${name})
    list(APPEND paths ${file})
  endforeach()
  list(REMOVE_DUPLICATES import_dirs)
  set(import_flags)
  foreach(dir IN LISTS import_dirs)
    list(APPEND import_flags -I ${dir})
  endforeach()

  set(out ${CMAKE_CURRENT_BINARY_DIR})
  set(sources)
  foreach(name file IN ZIP_LISTS names paths)
    string(REGEX REPLACE "\\.proto$" "" stem ${name})
    # In the order protoc writes them to the depfile (ninja compares the first).
    set(outputs ${out}/${stem}.pb.cc ${out}/${stem}.pb.h ${out}/${stem}.tern.cc ${out}/${stem}.tern.h)
    string(MAKE_C_IDENTIFIER ${stem} depfile)
    set(depfile ${out}/${target}_${depfile}.proto.d)
    add_custom_command(
      OUTPUT ${outputs}
      COMMAND protobuf::protoc ${import_flags} --cpp_out=${out} --tern_out=${out}
              --plugin=protoc-gen-tern=$<TARGET_FILE:tern::protoc-gen-tern>
              --dependency_out=${depfile} ${file}
      DEPENDS ${file} tern::protoc-gen-tern protobuf::protoc
      DEPFILE ${depfile}
      COMMENT "protoc: ${name} (messages and tern::rpc services)"
      VERBATIM)
    list(APPEND sources ${outputs})
  endforeach()

  target_sources(${target} PRIVATE ${sources})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${out}>)
  target_link_libraries(${target} PUBLIC ${rpc_library} protobuf::libprotobuf)
endfunction()
