#pragma once

namespace redsem {

// A Lua script embedded at build time (see cmake/embed_lua.cmake and lua/).
struct Script {
    const char* name;
    const char* sha1; // of `body`, computed by CMake, so EVALSHA needs no SCRIPT LOAD first
    const char* body;
};

} // namespace redsem
