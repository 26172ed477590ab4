#pragma once

#include <span>
#include <string_view>

namespace redsem {

// A Redis Functions library (Redis 7: FUNCTION LOAD, FCALL) of redsem's scripts, embedded at
// build time (see cmake/embed_lua.cmake). Its name carries its version: another release's
// scripts are another library, loaded beside this one.
struct FunctionLibrary {
    const char* name;
    const char* code; // FUNCTION LOAD's argument, "#!lua name=<name>" first
};

// A Lua script embedded at build time (see cmake/embed_lua.cmake and lua/).
struct Script {
    const char* name;
    const char* sha1; // of `body`, computed by CMake, so EVALSHA needs no SCRIPT LOAD first
    const char* body;
    // The same script as a function of `library`, called by FCALL; null for a script that is
    // no library's (it is sent by EVALSHA or EVAL only).
    const char* function = nullptr;
    const FunctionLibrary* library = nullptr;
    // Its function is registered no-writes (FUNCTION LOAD's flags): a call of it that must
    // write sends the script's text (EVALSHA, EVAL) instead.
    bool no_writes = false;
    // The names of its arguments, as its `--- @args` line declares them, in that order
    // (cmake/embed_lua.cmake): each call sends each name and its value.
    std::span<const std::string_view> params{};
};

} // namespace redsem
