# Prints how many compile jobs this machine can run at once, for `cmake --build -j`: one per
# core this process may use (nproc: CPU affinity and quotas), and no more than the memory that
# is available holds at 1 GiB each (a compile of redsem's sources peaks at 350-600 MB, and a
# machine has other work; an unbounded -j once started 80-96 compilers on 2 cores, issue 52).
# Usage: cmake --build build -j"$(cmake -P cmake/jobs.cmake)"
set(k_mib_per_job 1024)

execute_process(COMMAND nproc OUTPUT_VARIABLE cores OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE failed ERROR_QUIET)
if(failed OR NOT cores MATCHES "^[0-9]+$")
    cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)
endif()

# MemAvailable counts the page cache that can be given back; a cgroup (a container, a CI
# runner's slice) may allow less than the machine has.
set(available_mib "")
if(EXISTS /proc/meminfo)
    file(STRINGS /proc/meminfo line REGEX "^MemAvailable:")
    if(line MATCHES "([0-9]+) kB")
        math(EXPR available_mib "${CMAKE_MATCH_1} / 1024")
    endif()
endif()
if(available_mib STREQUAL "")
    cmake_host_system_information(RESULT available_mib QUERY AVAILABLE_PHYSICAL_MEMORY)
endif()
foreach(limit_file /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes)
    if(EXISTS ${limit_file})
        file(STRINGS ${limit_file} limit LIMIT_COUNT 1)
        # Numbers too large for CMake's math (no limit: "max", or 2^63) are no bound.
        string(LENGTH "${limit}" digits)
        if(limit MATCHES "^[0-9]+$" AND digits LESS 16)
            math(EXPR limit_mib "${limit} / 1048576")
            if(limit_mib LESS available_mib)
                set(available_mib ${limit_mib})
            endif()
        endif()
    endif()
endforeach()

math(EXPR by_memory "${available_mib} / ${k_mib_per_job}")
set(jobs ${cores})
if(by_memory LESS jobs)
    set(jobs ${by_memory})
endif()
if(jobs LESS 1)
    set(jobs 1)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E echo "${jobs}")
