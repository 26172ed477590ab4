# Generates a C++ header that embeds the Lua scripts (run as `cmake -P`).
cmake_minimum_required(VERSION 3.22) # the project's policies (IN_LIST among them)
# Inputs: PROTOCOL (src/semaphore/protocol.hpp: the facts C++ and Lua share, turned into Lua
# constants ahead of everything else), LIB_DIR (lua/lib, the shared modules), SCRIPTS
# (|-separated list), OUT (header path), and SUFFIX (optional: a line appended to every
# script and to the library, which makes each another text; the tests build a "newer redsem"
# with it), and LUA_OUT (optional: a directory where each script and the library are also
# written as plain Lua, for tests/lua/check_globals.sh, and the modules alone, modules.lua).
#
# Modules: a script or module names each module it needs on a line of its own,
# `--- @include "NAME"` (LIB_DIR/NAME.lua). Ahead of a script go the modules it needs, directly
# or through others, each after those it needs (depth first, in the order named), and
# main.lua, whose run() the code below calls; a cycle is an error. The library holds the
# modules of all scripts, in the same way.
#
# Each script is embedded twice:
# - as a script for EVAL: `inline constexpr Script k_<name>_script` with its body and SHA1, so
#   EVALSHA can be tried first without a SCRIPT LOAD round trip;
# - as a function of one Redis Functions library, `k_library` (FUNCTION LOAD, FCALL: Redis 7),
#   named redsem_<first 16 hex digits of the SHA1 of its code>, its functions
#   <library>_<script>. A release that changes any script is another library, so an older and
#   a newer redsem share a server, each calling its own.
# A script's body sees its call context as `call`, KEYS as a local (a function has no such
# globals), and its arguments by name as `args`: run() (lua/lib/main.lua) gives it them, and
# ends every call with finish(), whichever return the body takes.
#
# Arguments: each script declares the names of its own on lines `--- @args NAME...`, in order
# (none: a bare `--- @args`). A call sends ARGV[1] and ARGV[2] (lib/call.lua), then each name
# and its value, in any order, and Connection::eval ends it with "flags" and theirs. The body
# reads `args.NAME`; the build writes that as `args[K]`, K where the value of NAME stands when
# the names come in the declared order, and fails on a name the script does not declare. Its
# reader, <script>_args(argv), compares each name with the declared one and then hands over
# ARGV itself (the calls redsem sends: no table is built), and otherwise hands the call to
# named_args() (lib/call.lua), which takes the names in any order, refuses an unknown,
# repeated or missing one, and puts them in the declared order. The header gets the same
# names, in the same order, as `k_<script>_params` (Script::params), against which
# tests/unit/test_wire.cpp checks each builder of src/semaphore/wire.cpp.
# The module "protocol": each `inline constexpr TYPE k_NAME = VALUE;` of the header becomes
# `local NAME = VALUE` (NAME upper-cased; an integer's digit separators dropped; a string
# literal stays one, an array of them becomes a table). Anything else declared there is an error.
file(READ "${PROTOCOL}" protocol_text)
string(REGEX REPLACE "//[^\n]*" "" protocol_text "${protocol_text}")
string(REGEX REPLACE "[ \n]+" " " protocol_text "${protocol_text}")
# (Without the semicolon, which would split a CMake list.)
string(REGEX MATCHALL "inline constexpr [^;]*" declarations "${protocol_text}")
set(protocol_body "-- protocol: generated from src/semaphore/protocol.hpp, which says why each is so.\n")
foreach(declaration IN LISTS declarations)
    if(NOT declaration MATCHES "^inline constexpr (long long|std::string_view) k_([a-z0-9_]+)(\\[\\])? = (.*)$")
        message(FATAL_ERROR "protocol.hpp: cannot turn into Lua: ${declaration}")
    endif()
    set(cpp_name "k_${CMAKE_MATCH_2}")
    string(TOUPPER "${CMAKE_MATCH_2}" lua_name)
    set(value "${CMAKE_MATCH_4}")
    if(value MATCHES "^[0-9']+$")
        string(REPLACE "'" "" value "${value}") # digit separators
    endif()
    string(REGEX REPLACE ", *}" "}" value "${value}")
    if(NOT value MATCHES "^([0-9]+|\"[^\"\\]*\"|{ *\"[^\"\\]*\"( *, *\"[^\"\\]*\")* *})$")
        message(FATAL_ERROR "protocol.hpp: ${cpp_name}: not an integer, a string literal or an array of them: ${value}")
    endif()
    string(APPEND protocol_body "local ${lua_name} = ${value}\n")
endforeach()
list(LENGTH declarations declared)
if(declared EQUAL 0)
    message(FATAL_ERROR "protocol.hpp: no declarations found in ${PROTOCOL}")
endif()

# Appends to the global property lua_modules the modules `file` needs that it does not hold
# yet, each after those it needs. `chain`: the files that led here, to tell a cycle.
function(lua_require file chain)
    file(STRINGS "${file}" includes REGEX "^--- @include ")
    foreach(line IN LISTS includes)
        if(NOT line MATCHES "^--- @include \"([a-z_]+)\"$")
            message(FATAL_ERROR "${file}: not an include: ${line}")
        endif()
        set(module "${LIB_DIR}/${CMAKE_MATCH_1}.lua")
        if(NOT EXISTS "${module}")
            message(FATAL_ERROR "${file}: includes ${CMAKE_MATCH_1}, and there is no ${module}")
        endif()
        get_property(held GLOBAL PROPERTY lua_modules)
        if(module IN_LIST held)
            continue()
        endif()
        if(module IN_LIST chain)
            set(steps "")
            foreach(step IN LISTS chain ITEMS "${file}" "${module}")
                if(step)
                    get_filename_component(step "${step}" NAME)
                    list(APPEND steps "${step}")
                endif()
            endforeach()
            string(REPLACE ";" " -> " path "${steps}")
            message(FATAL_ERROR "an @include cycle: ${path}")
        endif()
        lua_require("${module}" "${chain};${file}")
        set_property(GLOBAL APPEND PROPERTY lua_modules "${module}")
    endforeach()
endfunction()

# The code of the modules `files` need (main.lua last but for what it needs), after the
# protocol's constants.
function(lua_modules_for files out)
    set_property(GLOBAL PROPERTY lua_modules "")
    foreach(file IN LISTS files ITEMS "${LIB_DIR}/main.lua")
        lua_require("${file}" "")
    endforeach()
    set_property(GLOBAL APPEND PROPERTY lua_modules "${LIB_DIR}/main.lua")
    get_property(modules GLOBAL PROPERTY lua_modules)
    list(REMOVE_DUPLICATES modules)
    set(code "${protocol_body}")
    foreach(module IN LISTS modules)
        file(READ "${module}" module_body)
        string(APPEND code "${module_body}\n")
    endforeach()
    set(${out} "${code}" PARENT_SCOPE)
endfunction()

string(REPLACE "|" ";" SCRIPTS "${SCRIPTS}")
lua_modules_for("${SCRIPTS}" lib_body)

# The flags of each function (see FUNCTION LOAD): none (a function that writes, refused while
# Redis is out of memory), or allow-oom for those that free memory (release, gc), as EVAL lets
# them run there today: a full Redis must not keep a slot from being given back. Also pause
# and lost: an operator's freeze (or its end), or a declared loss of data, must not wait for
# memory (each writes a few fields). The view writes nothing (no-writes: it runs under
# FCALL_RO, on a replica, and out of memory); a call that must write (the removal of an epoch
# proof) sends its text instead (Script::no_writes).
set(flags_release "{'allow-oom'}")
set(flags_gc "{'allow-oom'}")
set(flags_pause "{'allow-oom'}")
set(flags_lost "{'allow-oom'}")
set(flags_view "{'no-writes'}")

# Sets `out_body` to `body`, the text of `script`, with each `args.NAME` it reads as the place
# of NAME's value among the names `script` declares on its `--- @args` lines, `out_reader` to
# the Lua of its reader, `${name}_args(argv)`, and `out_params` to the C++ array of its names.
function(script_params script name body out_body out_reader out_params)
    file(STRINGS "${script}" lines REGEX "^--- @args")
    if(NOT lines)
        message(FATAL_ERROR "${script}: declares no arguments (a line '--- @args NAME...', bare for none)")
    endif()
    set(names "")
    foreach(line IN LISTS lines)
        if(NOT line MATCHES "^--- @args(( [a-z_]+)*)$")
            message(FATAL_ERROR "${script}: not a list of argument names: ${line}")
        endif()
        string(STRIP "${CMAKE_MATCH_1}" declared)
        if(NOT declared STREQUAL "")
            string(REPLACE " " ";" declared "${declared}")
            list(APPEND names ${declared})
        endif()
    endforeach()
    set(all ${names} flags) # (Connection::eval's, last)
    set(checks "")
    set(listed "")
    set(at 3)
    foreach(param IN LISTS all)
        if(param IN_LIST listed)
            message(FATAL_ERROR "${script}: declares the argument ${param} twice (or flags, which every call gets)")
        endif()
        list(APPEND listed "${param}")
        math(EXPR value_at "${at} + 1")
        string(APPEND checks "argv[${at}] == '${param}' and ")
        string(REGEX REPLACE "args\\.${param}([^a-z0-9_])" "args[${value_at}]\\1" body "${body}")
        math(EXPR at "${at} + 2")
    endforeach()
    if(body MATCHES "args\\.([a-z_]+)")
        message(FATAL_ERROR "${script}: reads args.${CMAKE_MATCH_1}, which its '--- @args' lines do not declare")
    endif()
    math(EXPR size "${at} - 1")
    string(REPLACE ";" "', '" quoted "${all}")
    string(REPLACE ";" "\", \"" cpp_quoted "${names}")
    if(NOT cpp_quoted STREQUAL "")
        set(cpp_quoted "\"${cpp_quoted}\"")
    endif()
    list(LENGTH names cpp_count)
    set(${out_body} "${body}" PARENT_SCOPE)
    set(${out_reader}
        "local function ${name}_args(argv)\n"
        "    if ${checks}#argv == ${size} then\n"
        "        return argv\n"
        "    end\n"
        "    return named_args(argv, {'${quoted}'}, '${name}')\n"
        "end\n" PARENT_SCOPE)
    set(${out_params}
        "inline constexpr std::array<std::string_view, ${cpp_count}> k_${name}_params{{${cpp_quoted}}};\n"
        PARENT_SCOPE)
endfunction()

# Each script's reader, body and registration in a block of its own: Lua 5.1 allows a function
# (the library's chunk) 200 locals in scope at once, and the modules' take most of them.
set(registrations "")
foreach(script IN LISTS SCRIPTS)
    get_filename_component(name "${script}" NAME_WE)
    file(READ "${script}" body)
    script_params("${script}" "${name}" "${body}" body reader params)
    string(REPLACE ";" "" reader "${reader}")
    set(flags "{}")
    if(DEFINED flags_${name})
        set(flags "${flags_${name}}")
    endif()
    string(APPEND registrations
           "do\n${reader}local function ${name}_body(call, KEYS, args)\n${body}\nend\n"
           "redis.register_function{function_name = LIBRARY .. '_${name}', flags = ${flags},\n"
           "    callback = function(keys, argv) return run(keys, argv, ${name}_body, ${name}_args) end}\n"
           "end\n")
endforeach()
set(library_code "${lib_body}${registrations}${SUFFIX}\n")
string(SHA1 library_sha "${library_code}")
string(SUBSTRING "${library_sha}" 0 16 library_version)
set(library_name "redsem_${library_version}")
set(library "#!lua name=${library_name}\nlocal LIBRARY = '${library_name}'\n${library_code}")

function(check_delimiter text what)
    string(FIND "${text}" ")lua\"" clash)
    if(NOT clash EQUAL -1)
        message(FATAL_ERROR "${what} contains the raw-string delimiter )lua\"")
    endif()
endfunction()

set(header "// Generated by cmake/embed_lua.cmake from lua/*.lua. Do not edit.\n#pragma once\n\n")
string(APPEND header "#include <array>\n#include <string_view>\n\n#include \"redis/script.hpp\"\n\nnamespace redsem::scripts {\n")
check_delimiter("${library}" "the library")
string(APPEND header "\ninline constexpr FunctionLibrary k_library{\"${library_name}\", R\"lua(${library})lua\"};\n")
foreach(script IN LISTS SCRIPTS)
    get_filename_component(name "${script}" NAME_WE)
    file(READ "${script}" body)
    lua_modules_for("${script}" modules_body)
    script_params("${script}" "${name}" "${body}" body reader params)
    string(REPLACE ";" "" reader "${reader}")
    set(full "${modules_body}${reader}local function script_body(call, KEYS, args)\n${body}\nend\nreturn run(KEYS, ARGV, script_body, ${name}_args)\n${SUFFIX}")
    check_delimiter("${full}" "${script}")
    string(SHA1 sha "${full}")
    if(DEFINED LUA_OUT)
        file(WRITE "${LUA_OUT}/${name}.lua" "${full}")
    endif()
    set(no_writes false)
    if(DEFINED flags_${name} AND "${flags_${name}}" MATCHES "no-writes")
        set(no_writes true)
    endif()
    string(APPEND header "\n${params}inline constexpr Script k_${name}_script{\"${name}\", \"${sha}\", R\"lua(${full})lua\",\n"
                         "                                      \"${library_name}_${name}\", &k_library, ${no_writes},\n"
                         "                                      k_${name}_params};\n")
endforeach()
string(APPEND header "\n} // namespace redsem::scripts\n")
if(DEFINED LUA_OUT)
    file(WRITE "${LUA_OUT}/library.lua" "${library}")
    # The protocol's constants and every module, alone: what tests/lua/check_records.lua
    # runs the modules' parsers with, under lua5.1.
    file(WRITE "${LUA_OUT}/modules.lua" "${lib_body}")
endif()
# Only rewrite when changed, so an unchanged script does not trigger a rebuild.
if(EXISTS "${OUT}")
    file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${header}")
    file(WRITE "${OUT}" "${header}")
endif()
