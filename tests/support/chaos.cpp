#include "support/chaos.hpp"

#include "support/build_paths.hpp"
#include "support/clock.hpp"
#include "support/helpers.hpp"
#include "support/prerequisites.hpp"
#include "support/redis_server.hpp"

#include "redis/url.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <spawn.h>
#include <sstream>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace redsem::test::chaos {

namespace {

using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

const std::vector<std::string> k_clock_skews{"-1h", "+1h", "+1h x1.05", "-1h x0.95"};
// The observer's clock: the machine's real one, whatever clock the client was given. A
// client without libfaketime has neither variable (they are taken out of the harness's
// environment), so its plain `date` reads the real clock too, and one process cheaper. The
// stamp ignores SIGTERM: `redsem run` stops its command with a SIGTERM to the whole process
// group, which must not kill the `date` of the line being written (an entry or exit without
// its time); the trap then logs T.
constexpr const char* k_stamp_skewed =
    "$(trap \"\" TERM; exec env -u LD_PRELOAD -u FAKETIME date +%s%N)";
constexpr const char* k_stamp_real = "$(trap \"\" TERM; exec date +%s%N)";

// The command's exit line. The stamp is taken first and the line written only with it: a
// stamp process killed on the way (by the group's SIGKILL, in the tight window after the
// command's work) leaves no line, and the harness bounds the exit by the death it saw,
// instead of a line without a time.
std::string exit_line(const std::string& tag, const std::string& stamp) {
    return "t=" + stamp + "; if [ -n \"$t\" ]; then echo \"E " + tag + " $t\" >> \"$L\"; fi";
}

// The command's start line, with its slot and fence (shell words) and its shell's pid. As
// for the exit line, the stamp is taken first and the line written only with it: a stamp
// process killed on the way (by run's SIGTERM, before it could ignore it) would otherwise
// leave a line whose fields have slid one place; the shell's TERM trap then writes T, and
// without an S the client was never inside.
std::string start_line(const std::string& tag, const std::string& slot, const std::string& fence,
                       const std::string& stamp) {
    return "s=" + stamp + "; if [ -n \"$s\" ]; then echo \"S " + tag + " " + slot + " " + fence +
           " $s $$\" >> \"$L\"; fi; ";
}

std::string ms_arg(Milliseconds duration) {
    return std::to_string(duration.count()) + "ms";
}

// "0.045" for sleep(1).
std::string seconds_arg(Milliseconds duration) {
    std::ostringstream out;
    out << duration.count() / 1000 << "." << std::setw(3) << std::setfill('0')
        << duration.count() % 1000;
    return out.str();
}

// ---- /proc ------------------------------------------------------------------------------

std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

// The children of every thread of `pid`.
std::vector<pid_t> children_of(pid_t pid) {
    std::vector<pid_t> children;
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    DIR* dir = opendir(tasks.c_str());
    if (dir == nullptr) {
        return children;
    }
    while (const dirent* entry = readdir(dir)) {
        if (entry->d_name[0] == '.') {
            continue;
        }
        std::istringstream list(slurp(tasks + "/" + entry->d_name + "/children"));
        pid_t child = 0;
        while (list >> child) {
            children.push_back(child);
        }
    }
    closedir(dir);
    return children;
}

std::string comm_of(pid_t pid) {
    std::string comm = slurp("/proc/" + std::to_string(pid) + "/comm");
    while (!comm.empty() && (comm.back() == '\n' || comm.back() == ' ')) {
        comm.pop_back();
    }
    return comm;
}

// The state letter of /proc/PID/stat ('R', 'S', 'T', 'Z', ...); 0 when the process is gone.
char state_of(pid_t pid) {
    const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size()) {
        return 0;
    }
    return stat[paren + 2];
}

// The process group of `pid` (the fifth field of /proc/PID/stat); 0 when it is gone.
pid_t process_group_of(pid_t pid) {
    const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    if (paren == std::string::npos) {
        return 0;
    }
    std::istringstream fields(stat.substr(paren + 1));
    std::string state;
    pid_t parent = 0;
    pid_t group = 0;
    fields >> state >> parent >> group;
    return group;
}

bool holds_socket(pid_t pid) {
    const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
    std::error_code error;
    for (std::filesystem::directory_iterator it(fds, error), end; !error && it != end;
         it.increment(error)) {
        std::error_code unreadable;
        const auto target = std::filesystem::read_symlink(it->path(), unreadable);
        if (!unreadable && target.native().rfind("socket:", 0) == 0) {
            return true;
        }
    }
    return false;
}

// The process groups (each client leads one) in which a process of one of the binaries `exes`
// holds a socket now: redsem opens sockets only to Redis, so these clients have reached it.
std::set<pid_t> groups_in_contact(const std::vector<std::string>& exes) {
    std::set<pid_t> groups;
    std::error_code error;
    for (std::filesystem::directory_iterator it("/proc", error), end; !error && it != end;
         it.increment(error)) {
        const std::string name = it->path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        const pid_t pid = std::stoi(name);
        std::error_code unreadable;
        const std::string exe = std::filesystem::read_symlink(it->path() / "exe", unreadable);
        if (unreadable || std::find(exes.begin(), exes.end(), exe) == exes.end() ||
            !holds_socket(pid)) {
            continue;
        }
        if (const pid_t group = process_group_of(pid); group > 0) {
            groups.insert(group);
        }
    }
    return groups;
}

bool is_stopped_or_gone(pid_t pid) {
    const char state = state_of(pid);
    return state == 0 || state == 'T' || state == 't' || state == 'Z' || state == 'X';
}

bool is_dead(pid_t pid) {
    const char state = state_of(pid);
    return state == 0 || state == 'Z' || state == 'X';
}

// Waits (bounded) until the signal sent to each of `pids` has taken effect.
template <typename Predicate>
void await_all(const std::vector<pid_t>& pids, Predicate done, Milliseconds timeout) {
    const auto give_up = Steady::now() + timeout;
    for (pid_t pid : pids) {
        while (!done(pid) && Steady::now() < give_up) {
            std::this_thread::sleep_for(200us);
        }
    }
}

// All descendants of `root` (not `root`), parents before children.
std::vector<pid_t> descendants_of(pid_t root) {
    std::vector<pid_t> found;
    std::vector<pid_t> frontier{root};
    std::set<pid_t> seen{root};
    while (!frontier.empty()) {
        std::vector<pid_t> next;
        for (pid_t pid : frontier) {
            for (pid_t child : children_of(pid)) {
                if (seen.insert(child).second) {
                    found.push_back(child);
                    next.push_back(child);
                }
            }
        }
        frontier = std::move(next);
    }
    return found;
}

// SIGSTOPs `root` and then all its descendants, again until no new one appears, and waits
// until they are all stopped. Returns them, `root` first; `last_signal_ns` is when the last
// SIGSTOP was sent (once kill() has returned, its target runs no more code of its own).
std::vector<pid_t> stop_tree(pid_t root, long long& last_signal_ns) {
    std::vector<pid_t> stopped{root};
    std::set<pid_t> seen{root};
    kill(root, SIGSTOP);
    last_signal_ns = real_now_ns();
    for (int round = 0; round < 8; ++round) {
        bool more = false;
        for (std::size_t i = 0; i < stopped.size(); ++i) {
            for (pid_t child : children_of(stopped[i])) {
                if (seen.insert(child).second) {
                    kill(child, SIGSTOP);
                    last_signal_ns = real_now_ns();
                    stopped.push_back(child);
                    more = true;
                }
            }
        }
        await_all(stopped, is_stopped_or_gone, 200ms);
        if (!more) {
            break;
        }
    }
    return stopped;
}

// ---- client processes --------------------------------------------------------------------

// Sets NAME=value in `env`, in place of any value it had.
void set_env(std::vector<std::string>& env, const std::string& name, const std::string& value) {
    std::erase_if(env, [&](const std::string& entry) { return entry.rfind(name + "=", 0) == 0; });
    env.push_back(name + "=" + value);
}

// Connects as "app", the ACL user without @dangerous, to `server`.
void as_app_user(std::vector<std::string>& env, const RedisServer& server) {
    set_env(env, "REDSEM_URL", "unix://app@" + server.socket_url().substr(7));
    set_env(env, "REDSEM_PASSWORD", "app-pw");
}

// Starts argv[0] (a path) in a process group of its own, stdin on /dev/null, stdout into
// `out_path`, stderr into `err_path`, default signal dispositions and an empty mask.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& err_path, const std::string& out_path = "/dev/null") {
    std::vector<char*> args;
    for (const auto& arg : argv) {
        args.push_back(const_cast<char*>(arg.c_str()));
    }
    args.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& entry : env) {
        envp.push_back(const_cast<char*>(entry.c_str()));
    }
    envp.push_back(nullptr);

    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&files, STDOUT_FILENO, out_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&files, STDERR_FILENO, err_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                              POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attributes, 0);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attributes, &none);
    sigset_t all;
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    posix_spawnattr_setsigdefault(&attributes, &all);
    pid_t pid = -1;
    const int error = posix_spawn(&pid, args[0], &files, &attributes, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&files);
    posix_spawnattr_destroy(&attributes);
    if (error != 0) {
        throw std::runtime_error(std::string("posix_spawn failed: ") + std::strerror(error));
    }
    return pid;
}

std::string last_line(const std::string& text) {
    std::string trimmed = text;
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == '\r')) {
        trimmed.pop_back();
    }
    const auto newline = trimmed.rfind('\n');
    return newline == std::string::npos ? trimmed : trimmed.substr(newline + 1);
}

// "3,4" (a weighted client's S line) or "3": the slots, in order; empty when malformed.
std::vector<long long> parse_slots(const std::string& text) {
    std::vector<long long> slots;
    std::size_t from = 0;
    for (;;) {
        const std::size_t comma = text.find(',', from);
        const std::string word =
            text.substr(from, comma == std::string::npos ? comma : comma - from);
        if (word.empty() || word.size() > 9 ||
            word.find_first_not_of("0123456789") != std::string::npos) {
            return {};
        }
        slots.push_back(std::stoll(word));
        if (comma == std::string::npos) {
            return slots;
        }
        from = comma + 1;
    }
}

std::string joined(const std::vector<long long>& slots) {
    std::string text;
    for (const long long slot : slots) {
        text += (text.empty() ? "" : ",") + std::to_string(slot);
    }
    return text;
}

enum class PauseKind { waiter, holder, supervisor };

const char* name_of(PauseKind kind) {
    switch (kind) {
    case PauseKind::waiter:
        return "waiter";
    case PauseKind::holder:
        return "holder";
    case PauseKind::supervisor:
        return "supervisor";
    }
    return "?";
}

Fault fault_of(PauseKind kind) {
    switch (kind) {
    case PauseKind::waiter:
        return Fault::stop_waiter;
    case PauseKind::holder:
        return Fault::stop_holder;
    case PauseKind::supervisor:
        return Fault::stop_supervisor;
    }
    return Fault::stop_waiter;
}

bool is_restart(Fault fault) {
    return fault == Fault::restart_kept || fault == Fault::restart_wiped ||
           fault == Fault::restart_rolled_back;
}

struct Client {
    int id = 0;
    int semaphore = 0; // index into Config::semaphores
    bool run_form = false;
    bool older = false;                    // runs the previous release
    int weight = 1;                        // the slots it asks for (`run --slots`)
    bool supersede = false;                // `run --supersede`
    std::optional<Milliseconds> max_run{}; // `run --max-run`, shorter than its hold
    std::string skew;                      // FAKETIME, empty when the real clock
    Milliseconds hold{0};
    bool long_hold = false;
    pid_t pid = -1; // redsem run, or the shell; leader of its own process group
    long long spawned_ns = 0;
    long long deadline_ms = 0; // a bare acquire's: the lease's end acquire printed; 0: none
    bool done = false;
    long long reaped_ns = 0;
    int exit_code = -1;   // 128+N when killed by signal N
    std::string err_last; // last line of stderr, kept for failures

    // The harness's SIGKILL (of the client's redsem or its shell), when it struck.
    long long killed_ns = 0;
    std::string killed_what;
    bool hung = false; // still running after the grace, killed then

    // Stopped with SIGSTOP (at most once per client).
    bool paused = false;
    bool pause_active = false;
    PauseKind pause_kind = PauseKind::waiter;
    bool reclassified = false;
    long long pause_start_ns = 0;
    long long pause_end_ns = 0;
    // From here on, what the client did is "fencing-only": not in the overlap count.
    long long fencing_from_ns = 0;

    // What its command logged: the slots of its grant (the first is `slot`), its fence.
    bool has_s = false;
    long long s_ns = 0;
    long long slot = -1;
    std::vector<long long> slots;
    long long fence = -1;
    bool has_e = false;
    long long e_ns = 0;
    bool has_t = false;
    long long t_ns = 0;
    // `redsem run`'s command (the shell that logs) was seen gone at this time (0: not seen).
    long long command_gone_ns = 0;
};

struct Pause {
    int client = 0;
    bool group = false; // SIGCONT with kill(-pgid)
    pid_t pgid = 0;
    std::vector<pid_t> pids; // SIGCONT each, in this order
    Steady::time_point resume_at;
};

// A round of a fault, from its start to its end by the real clock.
struct Window {
    Fault fault = Fault::sigkill;
    long long begin_ns = 0;
    long long end_ns = 0;
    int semaphore = -1; // the one it acted on; -1: all
    // Restarts: the clients (process groups) that had reached Redis as it went down.
    std::set<pid_t> in_contact;
};

// A time the stored limit of a semaphore carried `word` ("paused", "weighted"), as the harness
// polled it: from the last poll that did not see it to the first that no longer did.
struct MarkSpan {
    int semaphore = 0;
    std::string word;
    long long begin_ns = 0;
    long long end_ns = 0;
};

// How often the stored limits of the semaphores older clients use are polled.
constexpr Milliseconds k_mark_poll{50};

// State shared with the thread that acts on Redis.
struct Shared {
    std::mutex mutex;
    std::condition_variable wake;
    bool stop_actions = false; // the chaos phase is over
    bool finish = false;       // the harness is done with Redis: the thread may end
    std::atomic<bool> redis_down{false};
    std::vector<Window> windows;
    std::vector<MarkSpan> marks;
    std::vector<std::string> messages;
    std::map<Fault, int> rounds;
    long long connections_killed = 0;
    long long evicted_keys = 0;
    int evictable_in_use = 0;
    long long flip_evicted_keys = 0;
    int flip_states_lost = 0;
    int older_limits_skipped = 0;
    int older_commands_failed = 0;
    int flips_declared = 0;
    // The previous release sees no eviction policy: until when (real ns) no client of it
    // starts, around an eviction flip, and how many of its clients have not logged their entry
    // (waiting, or about to), which a flip waits to see at 0 (see flip_eviction()).
    std::atomic<long long> older_barred_until_ns{0};
    std::atomic<int> older_unentered{0};
    int errors = 0;
    // Per semaphore: until when (real ns) a weighted client of the harness's may hold there,
    // and whether an older `limit` runs there now (no weighted client starts meanwhile).
    std::vector<long long> weighted_until_ns;
    std::vector<bool> older_limit_running;
};

// What explains a survivor's exit besides the client itself: the faults' windows (weighted
// clients' lives included, as windows of Fault::weighted), the marks polled.
struct Evidence {
    std::vector<Window> windows;
    std::vector<MarkSpan> marks;
    long long state_gone_after_ns = 0; // how long after a flip a semaphore may lack its state

    // Whether `client` lived during a window of `fault` (on its semaphore when `same`),
    // taken to end `after_ns` later.
    bool during(const Client& client, Fault fault, long long after_ns = 0,
                bool same = false) const {
        return std::any_of(windows.begin(), windows.end(), [&](const Window& w) {
            return w.fault == fault && (!same || w.semaphore == client.semaphore) &&
                   client.spawned_ns <= w.end_ns + after_ns && client.reaped_ns >= w.begin_ns;
        });
    }
    // Whether its semaphore's stored limit carried `word` while `client` lived.
    bool marked(const Client& client, const std::string& word) const {
        return std::any_of(marks.begin(), marks.end(), [&](const MarkSpan& span) {
            return span.semaphore == client.semaphore && span.word == word &&
                   client.spawned_ns <= span.end_ns && client.reaped_ns >= span.begin_ns;
        });
    }
};

bool said(const Client& client, const char* text) {
    return client.err_last.find(text) != std::string::npos;
}

// A kind of survivor's exit, and the fault that explains it (k_faults says which).
struct ExitRule {
    const char* what; // as summary() prints it
    int Result::*counter;
    std::function<bool(const Client&)> explains;
};

// Every exit a survivor may have, in the order summary() prints them. (summary() asks with
// empty evidence, for the names alone.)
std::vector<ExitRule> exit_rules(const Evidence& seen) {
    // A CLIENT PAUSE longer than redsem's patience (the 5s command timeout, then 4s of
    // reconnecting) may end a client with 69 "did not answer in time", as documented.
    constexpr long long k_patience_ns = 10'000'000'000LL;
    return {
        {"0", &Result::exit_ok,
         [](const Client& c) { return c.exit_code == 0 && c.has_s && c.has_e; }},
        {"76", &Result::exit_fenced,
         [](const Client& c) { return c.exit_code == 76 && c.run_form; }},
        {"1(release found no lease)", &Result::exit_release_lost,
         [](const Client& c) { return c.exit_code == 1 && !c.run_form && c.has_s && c.has_e; }},
        // Unreachable at its first contact, which is reported at once: alive while Redis
        // was down, without having reached it before (a client that had reached Redis rides
        // a restart out). Not a guess from when it started: a loaded machine may take
        // seconds to start a sanitized binary.
        {"69(first contact during a restart)", &Result::exit_refused_at_restart,
         [&seen](const Client& c) {
             return c.exit_code == 69 && !c.has_s && said(c, "cannot connect") &&
                    std::any_of(seen.windows.begin(), seen.windows.end(), [&](const Window& w) {
                        return is_restart(w.fault) && c.spawned_ns <= w.end_ns &&
                               c.reaped_ns >= w.begin_ns && w.in_contact.count(c.pid) == 0;
                    });
         }},
        {"69(no answer through a CLIENT PAUSE)", &Result::exit_unanswered_in_pause,
         [&seen](const Client& c) {
             return c.exit_code == 69 && said(c, "did not answer") &&
                    std::any_of(seen.windows.begin(), seen.windows.end(), [&](const Window& w) {
                        return w.fault == Fault::client_pause && c.spawned_ns <= w.end_ns &&
                               c.reaped_ns >= w.begin_ns && c.reaped_ns <= w.end_ns + k_patience_ns;
                    });
         }},
        // As documented for a --url that names a replica.
        {"69(READONLY in a failback)", &Result::exit_readonly_in_failback,
         [&seen](const Client& c) {
             return c.exit_code == 69 && said(c, "read-only replica") &&
                    seen.during(c, Fault::failback);
         }},
        // Its write came while Redis was full (used memory above maxmemory, before eviction
        // made room, or with volatile-lru back and the flip's keys not flushed yet).
        {"69(OOM in an eviction)", &Result::exit_oom_in_eviction,
         [&seen](const Client& c) {
             return c.exit_code == 69 && said(c, "out of memory") &&
                    (seen.during(c, Fault::eviction) || seen.during(c, Fault::eviction_flip));
         }},
        {"69(EVICTING in a flip)", &Result::exit_evicting_in_flip,
         [&seen](const Client& c) {
             return c.exit_code == 69 && said(c, "admits nobody on this Redis") &&
                    seen.during(c, Fault::eviction_flip);
         }},
        // Holders without a state hash: refused until they leave (the longest hold, and a
        // lease of one stopped or killed meanwhile), or for as long as the poll saw holders
        // without a limit (waiters queued before the loss are still handed slots, one by one).
        // Also after an eviction round: a state hash an older release made anew, with a TTL,
        // may be evicted (the poll does not run while a round does).
        {"65(state hash gone after a flip)", &Result::exit_state_gone_after_flip,
         [&seen](const Client& c) {
             return c.exit_code == 65 && said(c, "state key") && said(c, "is gone") &&
                    (seen.during(c, Fault::eviction_flip, seen.state_gone_after_ns) ||
                     seen.during(c, Fault::eviction, seen.state_gone_after_ns) ||
                     seen.marked(c, "gone"));
         }},
        // The previous release cannot read a marked limit ("1 paused", "10 weighted").
        {"older 65(paused)", &Result::older_refused_paused,
         [&seen](const Client& c) {
             return c.older && c.exit_code == 65 && said(c, "is not a number") &&
                    (seen.during(c, Fault::pause, 0, true) || seen.marked(c, "paused"));
         }},
        {"older 65(weighted)", &Result::older_refused_weighted,
         [&seen](const Client& c) {
             return c.older && c.exit_code == 65 && said(c, "is not a number") &&
                    (seen.during(c, Fault::weighted, 0, true) || seen.marked(c, "weighted"));
         }},
        // Newest wins: a newer superseding client took its place before it held.
        {"80(superseded)", &Result::exit_superseded,
         [](const Client& c) { return c.exit_code == 80 && c.supersede && !c.has_s; }},
        // Stopped at its deadline, after its command entered.
        {"124(--max-run)", &Result::exit_max_run,
         [](const Client& c) { return c.exit_code == 124 && c.max_run && c.has_s; }},
    };
}

class Harness {
public:
    explicit Harness(const Config& config)
        : m_config(config), m_out(config.out != nullptr ? *config.out : std::cout),
          m_random(config.seed), m_actions_random(config.seed ^ 0x9e3779b97f4a7c15ULL) {}
    ~Harness() {
        // Only on a way out that skipped the orderly end: the thread must not outlive us.
        if (m_actions.joinable()) {
            {
                std::lock_guard lock(m_shared.mutex);
                m_shared.stop_actions = true;
                m_shared.finish = true;
            }
            m_shared.wake.notify_all();
            m_actions.join();
        }
        stop_death_watcher();
        for (const pid_t pid : m_history) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
        if (m_log_fd >= 0) {
            close(m_log_fd);
        }
    }
    Harness(const Harness&) = delete;
    Harness& operator=(const Harness&) = delete;

    Result run();

private:
    // setup
    void prepare();
    // A client's environment: its clock skew (libfaketime), and for a semaphore without INFO
    // the ACL user and prefix.
    std::vector<std::string> environment_for(const std::string& skew, bool without_info) const;
    // Runs `argv` (stderr to `err`, stdout to `out`) for up to 30s; its exit code (-1: killed
    // at 30s).
    int run_for_exit(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                     const std::string& err, const std::string& out = "/dev/null") const;
    // The same; whether it exited 0.
    bool run_to_end(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    const std::string& err) const {
        return run_for_exit(argv, env, err) == 0;
    }
    // A client on the semaphore with the fewest, or a weighted one on `weighted_on`.
    void spawn_client(int weighted_on = -1);
    // the loop
    void tail_log();
    void reap();
    void reaped(Client& client);
    void sweep_group(Client& client);
    void resume_due(bool all);
    void drain_messages();
    void progress(bool force);
    void finish_stragglers();
    void watch_death(Client& client, pid_t shell);
    void death_watcher();
    void stop_death_watcher();
    // Faults on the clients (k_faults, FaultSide::clients), from the loop.
    void act_on_clients(Fault fault);
    void kill_one();
    void pause_one(PauseKind kind);
    // Spawns a weighted client on a semaphore that takes one; false when none can start now.
    bool spawn_weighted();
    std::vector<int> weighted_candidates() const;
    // Faults on Redis (FaultSide::redis), on their own thread.
    void redis_actions();
    bool applies(Fault fault) const;
    void act_on_redis(Fault fault);
    void note_round(Fault fault, const Window* window = nullptr);
    void client_pause();
    void client_kill();
    void evict();
    std::vector<std::string> evictable_in_use(Connection& admin) const;
    void flip_eviction();
    void unbar_older_once_recorded(long long bar, long long began_ms, long long evicted_total);
    void pause_semaphore();
    void older_gc();
    void older_limit();
    void restart(Fault kind);
    void fail_back();
    // `redsem lost` for the prefix whose clients cannot read INFO (none: nothing).
    void declare_loss(bool for_older) const;
    // A connection to database `db` of the server (it stays there when it reconnects).
    Connection connect_db(int db) const;
    // The stored limits of the semaphores older clients use, polled for their marks.
    void poll_marks();
    void close_marks();
    // after
    void check_keys();
    // `redsem log --follow --json` of both prefixes, into the log directory (kept when the
    // verdict is bad): the histories across restarts that lose them, and past their cap.
    void start_history();
    void stop_history();
    // The observer's checks over what the commands logged (analyse() runs them all).
    struct Observed;
    void analyse();
    void collect(std::vector<Observed>& observed);
    void check_overlap(const SemaphoreSpec& spec, const Observed& seen);
    void check_slots(const SemaphoreSpec& spec, Observed& seen);
    void check_fences(const SemaphoreSpec& spec, Observed& seen);
    void check_late_entries(const SemaphoreSpec& spec, Observed& seen);
    void report(const std::string& kind, const std::string& text);
    std::string describe_pair(int first, int second) const;
    void classify_exits();
    std::string describe(const Client& client) const;
    double rel(long long ns) const { return static_cast<double>(ns - m_start_ns) / 1e9; }
    const std::string& prefix_of(const SemaphoreSpec& spec) const;

    template <typename T> T uniform(T low, T high) { return uniform(m_random, low, high); }
    // (The thread that acts on Redis draws from m_actions_random, the loop from m_random.)
    template <typename T> static T uniform(std::mt19937_64& random, T low, T high) {
        if (high <= low) {
            return low;
        }
        if constexpr (std::is_integral_v<T>) {
            return std::uniform_int_distribution<T>(low, high)(random);
        } else {
            return std::uniform_real_distribution<T>(low, high)(random);
        }
    }
    Milliseconds uniform_ms(Milliseconds low, Milliseconds high) {
        return Milliseconds{uniform<long long>(low.count(), high.count())};
    }
    bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(m_random) < p; }
    static Steady::time_point next_after(std::mt19937_64& random, Steady::time_point from,
                                         Milliseconds mean) {
        if (mean.count() <= 0) {
            return Steady::time_point::max();
        }
        return from + Milliseconds{static_cast<long long>(static_cast<double>(mean.count()) *
                                                          uniform<double>(random, 0.5, 1.5))};
    }

    const Config& m_config;
    std::ostream& m_out;
    std::mt19937_64 m_random;
    std::mt19937_64 m_actions_random;
    Result m_result;
    std::unique_ptr<RedisServer> m_server;
    std::unique_ptr<RedisServer> m_standby; // a replica of m_server, for failbacks
    std::string m_redsem;
    std::string m_redsem_exe; // the same, as /proc/PID/exe names it
    std::string m_older;      // the previous release's, empty when none runs
    std::string m_older_exe;
    std::string m_dir;
    std::string m_log;
    int m_log_fd = -1;
    std::string m_log_partial;
    std::vector<std::string> m_base_env;
    bool m_have_faketime = false;
    std::string m_faketime_lib; // its path when m_have_faketime
    std::vector<Client> m_clients;
    std::vector<int> m_active; // ids of clients not reaped yet
    std::vector<Pause> m_pauses;
    std::vector<int> m_weighted_active; // per semaphore: weighted clients not reaped yet
    std::vector<pid_t> m_history;       // the `redsem log --follow` processes
    long long m_start_ns = 0;
    Steady::time_point m_chaos_end;
    Shared m_shared;
    std::thread m_actions;
    Steady::time_point m_next_progress;
    // The thread that acts on Redis: what it does later (a `redsem resume`), and its poll of
    // the marks (per semaphore and word: since when it has seen it).
    std::vector<std::pair<Steady::time_point, std::function<void()>>> m_followups;
    std::unique_ptr<Connection> m_poll;
    long long m_last_poll_ns = 0;
    std::map<std::pair<int, std::string>, long long> m_marked_since;
    // When `redsem run`'s commands die: their pidfds in an epoll set, and a thread that takes
    // the time as soon as one becomes readable.
    int m_epoll = -1;
    std::atomic<bool> m_stop_watching{false};
    std::mutex m_deaths_mutex;
    std::map<int, long long> m_deaths; // client id -> when its command was seen gone
    std::thread m_watcher;
};

const std::string& Harness::prefix_of(const SemaphoreSpec& spec) const {
    static const std::string plain = "redsem";
    static const std::string without_info = k_no_info_prefix;
    return spec.without_info ? without_info : plain;
}

// ---- setup --------------------------------------------------------------------------------

void Harness::prepare() {
    m_redsem = m_config.redsem.empty() ? redsem_binary() : m_config.redsem;
    if (access(m_redsem.c_str(), X_OK) != 0) {
        throw std::runtime_error("redsem binary not executable: " + m_redsem);
    }
    m_redsem_exe = std::filesystem::canonical(m_redsem);
    if (m_config.older_share > 0) {
        const std::string older =
            m_config.older_redsem.empty() ? redsem_previous_binary() : m_config.older_redsem;
        if (access(older.c_str(), X_OK) == 0) {
            m_older = older;
            m_older_exe = std::filesystem::canonical(older);
            m_result.older_release = older;
        } else {
            m_out << "chaos: the previous release is not built (" << older
                  << "): no client runs it, and no older gc or limit\n";
        }
    }
    if (m_config.skew) {
        m_faketime_lib = find_libfaketime().value_or("");
    }
    m_have_faketime = !m_faketime_lib.empty();
    if (m_config.skew && !m_have_faketime) {
        m_out << "chaos: libfaketime is not installed (Debian package faketime): clocks are "
                 "not skewed\n";
    }
    m_weighted_active.assign(m_config.semaphores.size(), 0);
    m_shared.weighted_until_ns.assign(m_config.semaphores.size(), 0);
    m_shared.older_limit_running.assign(m_config.semaphores.size(), false);
    std::string pattern = (std::filesystem::temp_directory_path() / "redsem-chaos-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
        throw std::runtime_error("mkdtemp failed");
    }
    m_dir = pattern;
    m_result.directory = m_dir;
    std::filesystem::create_directories(m_dir + "/err");
    std::filesystem::create_directories(m_dir + "/grant");
    m_log = m_dir + "/inside.log";
    { std::ofstream(m_log).flush(); }
    m_log_fd = open(m_log.c_str(), O_RDONLY | O_CLOEXEC);
    if (m_log_fd < 0) {
        throw std::runtime_error("cannot open " + m_log);
    }

    RedisServer::Options options;
    // (A replica's full sync starts at once, not after the 5s Redis waits for more replicas.)
    options.extra_args = {
        "--appendonly", "yes", "--appendfsync", "always", "--repl-diskless-sync-delay", "0"};
    // The user of the semaphores without INFO, on both nodes (ACLs are not replicated).
    const std::vector<std::string> app_user = {
        "--user", "app",   "on",         ">app-pw", std::string("~") + k_no_info_prefix + ":*",
        "&*",     "+@all", "-@dangerous"};
    options.extra_args.insert(options.extra_args.end(), app_user.begin(), app_user.end());
    options.tcp = true; // for the standby to replicate it
    m_server = std::make_unique<RedisServer>(options);
    if (m_config.restarts >= 4) { // one of them fails back (see redis_actions())
        RedisServer::Options standby;
        standby.tcp = true;
        standby.extra_args = {"--repl-diskless-sync-delay", "0"};
        standby.extra_args.insert(standby.extra_args.end(), app_user.begin(), app_user.end());
        m_standby = std::make_unique<RedisServer>(standby);
        m_standby->admin().call({"REPLICAOF", "127.0.0.1", std::to_string(m_server->port())});
    }

    std::string_view asan_options;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        const std::string_view text(*entry);
        if (text.rfind("REDSEM_", 0) == 0 || text.rfind("REDIS_URL=", 0) == 0 ||
            text.rfind("LD_PRELOAD=", 0) == 0 || text.rfind("FAKETIME", 0) == 0) {
            continue;
        }
        if (text.rfind("ASAN_OPTIONS=", 0) == 0) {
            asan_options = text.substr(13);
            continue;
        }
        m_base_env.emplace_back(text);
    }
    // (A build without AddressSanitizer ignores this.) LeakSanitizer's check at exit stops the
    // process's threads under ptrace from a helper process; a SIGSTOP from the harness landing
    // in it has left clients spinning for minutes. Leaks are the rest of the sanitized suite's
    // business.
    m_base_env.push_back("ASAN_OPTIONS=" + std::string(asan_options) + ":detect_leaks=0");
    m_base_env.push_back("REDSEM_URL=" + m_server->socket_url());
    // A client that first connects during a CLIENT PAUSE waits it out rather than failing
    // with 69 after the default 2s: the pause tests stalls, not the connect timeout.
    const auto connect_timeout = m_config.client_pause + 4s;
    m_base_env.push_back("REDSEM_CONNECT_TIMEOUT=" + std::to_string(connect_timeout.count()) +
                         "ms");
}

std::vector<std::string> Harness::environment_for(const std::string& skew,
                                                  bool without_info) const {
    std::vector<std::string> env = m_base_env;
    if (without_info) {
        as_app_user(env, *m_server);
        set_env(env, "REDSEM_PREFIX", k_no_info_prefix);
    }
    if (skew.empty()) {
        return env;
    }
    env.push_back("LD_PRELOAD=" + m_faketime_lib);
    env.push_back("FAKETIME=" + skew);
    env.emplace_back("FAKETIME_NO_CACHE=1");
    // Skew between hosts is a wall-clock matter; a faked monotonic clock breaks waits.
    env.emplace_back("FAKETIME_DONT_FAKE_MONOTONIC=1");
    // A sanitized build refuses a preloaded library unless told it may.
    std::string asan;
    for (auto it = env.begin(); it != env.end(); ++it) {
        if (it->rfind("ASAN_OPTIONS=", 0) == 0) {
            asan = it->substr(13);
            env.erase(it);
            break;
        }
    }
    env.push_back("ASAN_OPTIONS=" + asan + ":verify_asan_link_order=0");
    return env;
}

void Harness::spawn_client(int weighted_on) {
    Client client;
    client.id = static_cast<int>(m_clients.size());
    if (weighted_on >= 0) {
        client.semaphore = weighted_on;
        client.weight = m_config.weighted_slots;
        client.run_form = true;
    } else {
        // The semaphore with the fewest clients running: each keeps its share of the load
        // (were they drawn at random, the slowest would gather nearly every client).
        std::vector<int> running(m_config.semaphores.size(), 0);
        for (int id : m_active) {
            running[static_cast<std::size_t>(m_clients[static_cast<std::size_t>(id)].semaphore)] +=
                1;
        }
        const int fewest = *std::min_element(running.begin(), running.end());
        std::vector<int> least;
        for (std::size_t s = 0; s < running.size(); ++s) {
            if (running[s] == fewest) {
                least.push_back(static_cast<int>(s));
            }
        }
        client.semaphore = least[uniform<std::size_t>(0, least.size() - 1)];
        client.run_form = chance(0.5);
    }
    const SemaphoreSpec& spec = m_config.semaphores[static_cast<std::size_t>(client.semaphore)];
    // The previous release needs INFO (it has no proof by the script cache), and has no
    // --slots.
    client.older = !m_older.empty() && !spec.without_info && client.weight == 1 &&
                   real_now_ns() >= m_shared.older_barred_until_ns && chance(m_config.older_share);
    if (m_have_faketime && chance(0.5)) {
        client.skew = k_clock_skews[uniform<std::size_t>(0, k_clock_skews.size() - 1)];
    }
    if (client.run_form && chance(m_config.long_hold_share)) {
        client.long_hold = true;
        client.hold = uniform_ms(m_config.long_hold_min, m_config.long_hold_max);
        if (!client.older && chance(m_config.max_run_share)) {
            client.max_run = client.hold / 2;
        }
    } else {
        Milliseconds high = m_config.short_hold_max;
        if (!client.run_form) {
            high = std::min(high, m_config.ttl / 4);
        }
        client.hold = chance(m_config.zero_hold_share)
                          ? Milliseconds{0}
                          : uniform_ms(std::min(m_config.short_hold_min, high), high);
    }
    const std::string& binary = client.older ? m_older : m_redsem;
    const std::string tag = spec.name + " " + std::to_string(client.id);
    const std::string limit = std::to_string(spec.limit);
    const std::string label = "chaos " + std::to_string(client.id);
    const std::string stamp = client.skew.empty() ? k_stamp_real : k_stamp_skewed;
    const std::string sleep =
        client.hold.count() > 0 ? "sleep " + seconds_arg(client.hold) + "; " : std::string();
    const std::string trap =
        "trap 'echo \"T " + tag + " " + stamp + "\" >> \"$L\"; exit 143' TERM; ";
    std::vector<std::string> argv;
    if (client.run_form) {
        // A grant of several slots logs them all, "3,4" (REDSEM_SLOTS is "3 4").
        const std::string list_slots =
            client.weight > 1
                ? "set -f; set -- $REDSEM_SLOTS; sl=$1; shift; for x; do sl=$sl,$x; done; "
                : "";
        const std::string slots = client.weight > 1 ? "$sl" : "$REDSEM_SLOT";
        const std::string body = "L=" + m_log + "; " + trap + list_slots +
                                 start_line(tag, slots, "$REDSEM_FENCE", stamp) + sleep +
                                 exit_line(tag, stamp);
        argv = {binary, "run", spec.name, "-n", limit};
        if (client.weight > 1) {
            argv.insert(argv.end(), {"--slots", std::to_string(client.weight)});
        }
        client.supersede = !client.older && chance(m_config.supersede_share);
        if (client.supersede) {
            argv.emplace_back("--supersede");
        }
        if (client.max_run) {
            argv.insert(argv.end(), {"--max-run", ms_arg(*client.max_run), "--kill-after", "1s"});
        }
        argv.insert(argv.end(),
                    {"--ttl", ms_arg(m_config.ttl), "--loss-grace", ms_arg(m_config.loss_grace),
                     "-q", "--label", label, "--", "/bin/sh", "-c", body});
    } else {
        const std::string grant = m_dir + "/grant/" + std::to_string(client.id);
        // The grant goes to a file (not a pipe), so that the harness can tell, once it has
        // stopped the client, whether acquire had already handed the slot to the script.
        const std::string script =
            "L=" + m_log + "; G=" + grant + "; " + binary + " acquire " + spec.name + " -n " +
            limit + " --ttl " + ms_arg(m_config.ttl) + " --loss-grace " +
            ms_arg(m_config.loss_grace) + " -q --json --label '" + label +
            "' > \"$G\" || exit $?\n"
            "read -r j < \"$G\"\n"
            "tok=${j#*\\\"token\\\":\\\"}; tok=${tok%%\\\"*}\n"
            "slot=${j#*\\\"slot\\\":}; slot=${slot%%,*}\n"
            "fence=${j#*\\\"fence\\\":}; fence=${fence%%,*}\n" +
            trap + "\n" + start_line(tag, "$slot", "$fence", stamp) + "\n" + sleep + "\n" +
            exit_line(tag, stamp) +
            "\n"
            // A release that finds Redis restarting (69) is tried again, as a careful script
            // would; 1 means the lease was gone already.
            "n=0\nwhile :; do " +
            binary + " release " + spec.name +
            " \"$tok\"; rc=$?; if [ $rc -ne 69 ] || [ $n -ge 20 ]; then exit $rc; fi; "
            "n=$((n+1)); sleep 0.25; done\n";
        argv = {"/bin/sh", "-c", script};
    }
    client.spawned_ns = real_now_ns();
    client.pid = spawn(argv, environment_for(client.skew, spec.without_info),
                       m_dir + "/err/" + std::to_string(client.id));
    m_result.clients_started += 1;
    m_result.clients_skewed += client.skew.empty() ? 0 : 1;
    m_result.clients_older += client.older ? 1 : 0;
    m_shared.older_unentered += client.older ? 1 : 0;
    m_result.clients_weighted += client.weight > 1 ? 1 : 0;
    m_result.clients_superseding += client.supersede ? 1 : 0;
    m_result.clients_deadline += client.max_run ? 1 : 0;
    m_active.push_back(client.id);
    m_clients.push_back(std::move(client));
}

// ---- the loop -----------------------------------------------------------------------------

void Harness::tail_log() {
    char buffer[65536];
    for (;;) {
        const ssize_t got = read(m_log_fd, buffer, sizeof(buffer));
        if (got <= 0) {
            break;
        }
        m_log_partial.append(buffer, static_cast<std::size_t>(got));
    }
    std::size_t begin = 0;
    for (;;) {
        const auto newline = m_log_partial.find('\n', begin);
        if (newline == std::string::npos) {
            break;
        }
        const std::string line = m_log_partial.substr(begin, newline - begin);
        begin = newline + 1;
        std::istringstream fields(line);
        std::string kind, semaphore;
        long long id = -1;
        fields >> kind >> semaphore >> id;
        const bool known_id = id >= 0 && id < static_cast<long long>(m_clients.size());
        Client* client = known_id ? &m_clients[static_cast<std::size_t>(id)] : nullptr;
        const bool same_semaphore =
            client != nullptr &&
            m_config.semaphores[static_cast<std::size_t>(client->semaphore)].name == semaphore;
        long long b = 0, when = 0;
        bool ok = same_semaphore;
        if (ok && kind == "S") {
            std::string slot_list;
            ok = static_cast<bool>(fields >> slot_list >> b >> when) && !client->has_s;
            const std::vector<long long> slots =
                ok ? parse_slots(slot_list) : std::vector<long long>{};
            ok = ok && !slots.empty();
            if (ok) {
                m_shared.older_unentered -= client->older ? 1 : 0;
                client->has_s = true;
                client->slots = slots;
                client->slot = slots.front();
                client->fence = b;
                client->s_ns = when;
                long long shell = 0;
                if (fields >> shell && shell > 0 && client->run_form) {
                    watch_death(*client, static_cast<pid_t>(shell));
                }
                const std::set<long long> distinct(slots.begin(), slots.end());
                if (static_cast<int>(distinct.size()) != client->weight ||
                    distinct.size() != slots.size()) {
                    // Its weight is what it asked for: a grant of other slots is redsem's fault.
                    m_result.slot_violations += 1;
                    report("slot", "a grant of " + std::to_string(slots.size()) +
                                       " slots for --slots " + std::to_string(client->weight) +
                                       ": " + line);
                }
            }
        } else if (ok && (kind == "E" || kind == "T")) {
            ok = static_cast<bool>(fields >> when);
            if (ok && kind == "E" && !client->has_e) {
                client->has_e = true;
                client->e_ns = when;
            } else if (ok && kind == "T" && !client->has_t) {
                client->has_t = true;
                client->t_ns = when;
            } else {
                ok = false;
            }
        } else {
            ok = false;
        }
        if (!ok) {
            m_result.malformed_lines += 1;
            m_result.violations.push_back({"malformed", "unexpected log line: " + line});
        }
    }
    m_log_partial.erase(0, begin);
}

// Kills what is left of a SIGKILLed client's process group (an orphaned `redsem acquire`
// or sleep of its shell): the group still exists, so its id is still this client's.
void Harness::sweep_group(Client& client) {
    if (client.killed_ns != 0 && kill(-client.pid, 0) == 0) {
        kill(-client.pid, SIGKILL);
    }
}

// A weighted client's lease may outlive it (SIGKILLed) by a ttl: an older `limit` waits
// that long after the last one there (see older_limit()).
void Harness::reaped(Client& client) {
    if (client.weight <= 1) {
        return;
    }
    const auto s = static_cast<std::size_t>(client.semaphore);
    m_weighted_active[s] -= 1;
    if (m_weighted_active[s] == 0) {
        std::lock_guard lock(m_shared.mutex);
        m_shared.weighted_until_ns[s] =
            client.reaped_ns + std::chrono::nanoseconds(m_config.ttl + 1s).count();
    }
}

namespace {

// "deadline_ms" of what `redsem acquire --json` printed (both releases print it); 0 when
// there is none (it printed nothing, or was killed first).
long long printed_deadline_ms(const std::string& json) {
    const std::string field = "\"deadline_ms\":";
    const auto at = json.find(field);
    if (at == std::string::npos) {
        return 0;
    }
    return std::strtoll(json.c_str() + at + field.size(), nullptr, 10);
}

} // namespace

void Harness::reap() {
    for (auto it = m_active.begin(); it != m_active.end();) {
        Client& client = m_clients[static_cast<std::size_t>(*it)];
        int status = 0;
        const pid_t got = waitpid(client.pid, &status, WNOHANG);
        if (got != client.pid) {
            ++it;
            continue;
        }
        client.done = true;
        client.reaped_ns = real_now_ns();
        client.exit_code = WIFEXITED(status) ? WEXITSTATUS(status)
                                             : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1);
        sweep_group(client);
        m_shared.older_unentered -= client.older && !client.has_s ? 1 : 0;
        const std::string err = m_dir + "/err/" + std::to_string(client.id);
        client.err_last = last_line(slurp(err));
        std::error_code ignored;
        std::filesystem::remove(err, ignored);
        const std::string grant = m_dir + "/grant/" + std::to_string(client.id);
        if (!client.run_form) {
            client.deadline_ms = printed_deadline_ms(slurp(grant));
        }
        std::filesystem::remove(grant, ignored);
        reaped(client);
        it = m_active.erase(it);
    }
}

void Harness::resume_due(bool all) {
    const auto now = Steady::now();
    for (auto it = m_pauses.begin(); it != m_pauses.end();) {
        if (!all && it->resume_at > now) {
            ++it;
            continue;
        }
        if (it->group) {
            kill(-it->pgid, SIGCONT);
        }
        for (pid_t pid : it->pids) {
            kill(pid, SIGCONT);
        }
        Client& client = m_clients[static_cast<std::size_t>(it->client)];
        client.pause_active = false;
        client.pause_end_ns = real_now_ns();
        it = m_pauses.erase(it);
    }
}

void Harness::act_on_clients(Fault fault) {
    switch (fault) {
    case Fault::sigkill:
        kill_one();
        break;
    case Fault::stop_waiter:
        pause_one(PauseKind::waiter);
        break;
    case Fault::stop_holder:
        pause_one(PauseKind::holder);
        break;
    case Fault::stop_supervisor:
        pause_one(PauseKind::supervisor);
        break;
    case Fault::weighted:
        spawn_weighted();
        break;
    default:
        throw std::logic_error(std::string("not a fault on the clients: ") + entry_of(fault).name);
    }
}

void Harness::kill_one() {
    std::vector<int> candidates;
    for (int id : m_active) {
        const Client& client = m_clients[static_cast<std::size_t>(id)];
        if (!client.pause_active && client.killed_ns == 0) {
            candidates.push_back(id);
        }
    }
    if (candidates.empty()) {
        return;
    }
    Client& client = m_clients[static_cast<std::size_t>(
        candidates[uniform<std::size_t>(0, candidates.size() - 1)])];
    pid_t target = client.pid;
    std::string what = client.run_form ? "redsem run" : "shell";
    std::vector<pid_t> dies_later; // processes the kill ends only indirectly
    if (chance(0.5)) {
        // The other process: run's command, or the shell's redsem (acquire or release).
        for (pid_t child : children_of(client.pid)) {
            if (client.run_form || comm_of(child) == "redsem") {
                target = child;
                what = client.run_form ? "command" : "redsem";
                break;
            }
        }
    } else if (client.run_form) {
        // Its command dies with it, by the parent-death signal, once redsem is dead.
        dies_later = children_of(client.pid);
    }
    kill(target, SIGKILL);
    // Once kill() has returned, the target runs no more code of its own (a process running
    // elsewhere is interrupted at once; one waiting for a CPU dies before it gets back to user
    // space): its time inside ends here. Not later: a command killed under `redsem run` is
    // reaped and its slot released within milliseconds, while this thread may be waiting for
    // a CPU. A command that dies with its redsem dies only once redsem has: wait for that.
    client.killed_ns = real_now_ns();
    if (!dies_later.empty()) {
        await_all(dies_later, is_dead, 500ms);
        client.killed_ns = real_now_ns();
    }
    client.killed_what = what;
    m_result.rounds[Fault::sigkill] += 1;
    m_result.sigkill_targets[what] += 1;
}

void Harness::pause_one(PauseKind kind) {
    int paused_now = 0;
    for (const Client& client : m_clients) {
        paused_now += client.pause_active ? 1 : 0;
    }
    if (paused_now >= m_config.max_paused) {
        return;
    }
    std::vector<int> candidates;
    for (int id : m_active) {
        const Client& client = m_clients[static_cast<std::size_t>(id)];
        if (client.paused || client.killed_ns != 0) {
            continue;
        }
        const bool inside = client.has_s && !client.has_e && !client.has_t;
        switch (kind) {
        case PauseKind::waiter:
            if (!client.has_s) {
                // Waiting: run has not started its command; the script's acquire runs.
                const std::vector<pid_t> children = children_of(client.pid);
                const bool waiting =
                    client.run_form
                        ? children.empty()
                        : std::any_of(children.begin(), children.end(),
                                      [](pid_t child) { return comm_of(child) == "redsem"; });
                if (waiting) {
                    candidates.push_back(id);
                }
            }
            break;
        case PauseKind::holder:
            if (inside) {
                candidates.push_back(id);
            }
            break;
        case PauseKind::supervisor:
            if (inside && client.run_form) {
                candidates.push_back(id);
            }
            break;
        }
    }
    if (candidates.empty()) {
        return;
    }
    Client& client = m_clients[static_cast<std::size_t>(
        candidates[uniform<std::size_t>(0, candidates.size() - 1)])];
    Pause pause;
    pause.client = client.id;
    pause.pgid = client.pid;
    PauseKind actual = kind;
    // When the last SIGSTOP went out: from then on the client does nothing.
    long long stopped_at = 0;
    if (kind == PauseKind::supervisor) {
        kill(client.pid, SIGSTOP);
        stopped_at = real_now_ns();
        pause.pids = {client.pid};
        await_all(pause.pids, is_stopped_or_gone, 200ms);
    } else if (!client.run_form) {
        // The script is its own group leader: stop the whole group at once.
        kill(-client.pid, SIGSTOP);
        stopped_at = real_now_ns();
        pause.group = true;
        std::vector<pid_t> tree{client.pid};
        for (pid_t pid : descendants_of(client.pid)) {
            tree.push_back(pid);
        }
        await_all(tree, is_stopped_or_gone, 200ms);
    } else if (kind == PauseKind::holder) {
        pause.pids = stop_tree(client.pid, stopped_at);
    } else {
        // A waiting `redsem run`: it has no child yet, so stopping it stops the client.
        kill(client.pid, SIGSTOP);
        stopped_at = real_now_ns();
        pause.pids = {client.pid};
        await_all(pause.pids, is_stopped_or_gone, 200ms);
        if (!children_of(client.pid).empty()) {
            // It had started its command after all: stop that too.
            pause.pids = stop_tree(client.pid, stopped_at);
        }
    }
    if (kind == PauseKind::waiter) {
        // Stopped now, so nothing changes under us: did it hold its slot already?
        tail_log();
        bool holding = client.has_s;
        if (client.run_form) {
            holding = holding || pause.pids.size() > 1;
        } else {
            struct stat grant {};
            const std::string path = m_dir + "/grant/" + std::to_string(client.id);
            holding = holding || (stat(path.c_str(), &grant) == 0 && grant.st_size > 0);
        }
        if (holding) {
            actual = PauseKind::holder;
            client.reclassified = true;
            m_result.pauses_reclassified += 1;
        }
    }
    client.paused = true;
    client.pause_active = true;
    client.pause_kind = actual;
    client.pause_start_ns = stopped_at;
    if (actual != PauseKind::waiter) {
        // A stopped process does nothing: its time inside ends here. What it does after
        // SIGCONT (holder), or what its command does meanwhile (supervisor), only fencing can
        // make safe.
        client.fencing_from_ns = stopped_at;
    }
    m_result.rounds[fault_of(actual)] += 1;
    pause.resume_at = Steady::now() + uniform_ms(m_config.pause_min, m_config.pause_max);
    m_pauses.push_back(std::move(pause));
}

std::vector<int> Harness::weighted_candidates() const {
    std::vector<int> candidates;
    for (std::size_t s = 0; s < m_config.semaphores.size(); ++s) {
        if (m_config.semaphores[s].weighted &&
            m_config.semaphores[s].limit >= std::max(3, m_config.weighted_slots + 1)) {
            candidates.push_back(static_cast<int>(s));
        }
    }
    return candidates;
}

bool Harness::spawn_weighted() {
    const std::vector<int> candidates = weighted_candidates();
    if (candidates.empty() || m_shared.redis_down) {
        return false;
    }
    const int s = candidates[uniform<std::size_t>(0, candidates.size() - 1)];
    {
        std::lock_guard lock(m_shared.mutex);
        if (m_shared.older_limit_running[static_cast<std::size_t>(s)]) {
            return false; // (see older_limit())
        }
        m_shared.weighted_until_ns[static_cast<std::size_t>(s)] = LLONG_MAX;
    }
    m_weighted_active[static_cast<std::size_t>(s)] += 1;
    spawn_client(s);
    m_result.rounds[Fault::weighted] += 1;
    return true;
}

void Harness::drain_messages() {
    std::vector<std::string> messages;
    {
        std::lock_guard lock(m_shared.mutex);
        messages.swap(m_shared.messages);
    }
    for (const auto& message : messages) {
        m_out << "chaos: " << message << "\n";
    }
    if (!messages.empty()) {
        m_out.flush();
    }
}

void Harness::progress(bool force) {
    if (m_config.progress_every.count() <= 0 && !force) {
        return;
    }
    const auto now = Steady::now();
    if (!force && now < m_next_progress) {
        return;
    }
    m_next_progress = now + m_config.progress_every;
    int cycles = 0;
    for (const Client& client : m_clients) {
        cycles += client.has_e ? 1 : 0;
    }
    std::lock_guard lock(m_shared.mutex);
    const auto rounds = [&](Fault fault) {
        const auto it = m_shared.rounds.find(fault);
        return it == m_shared.rounds.end() ? 0 : it->second;
    };
    m_out << "chaos: " << std::fixed << std::setprecision(1) << rel(real_now_ns())
          << "s: " << m_result.clients_started << " clients, " << cycles << " cycles, "
          << m_active.size() << " running, " << m_pauses.size() << " stopped, "
          << m_result.rounds_of(Fault::sigkill) << " SIGKILLs, restarts "
          << rounds(Fault::restart_kept) << "/" << rounds(Fault::restart_wiped) << "/"
          << rounds(Fault::restart_rolled_back) << ", failbacks " << rounds(Fault::failback)
          << ", flips " << rounds(Fault::eviction_flip) << ", pauses " << rounds(Fault::pause)
          << "\n"
          << std::defaultfloat;
    m_out.flush();
}

void Harness::finish_stragglers() {
    resume_due(true);
    for (int id : m_active) {
        Client& client = m_clients[static_cast<std::size_t>(id)];
        client.hung = true;
        std::vector<pid_t> tree = descendants_of(client.pid);
        kill(-client.pid, SIGKILL);
        kill(client.pid, SIGKILL);
        for (pid_t pid : tree) {
            kill(pid, SIGKILL);
        }
        int status = 0;
        waitpid(client.pid, &status, 0);
        client.done = true;
        client.reaped_ns = real_now_ns();
        client.exit_code = WIFEXITED(status) ? WEXITSTATUS(status)
                                             : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1);
        client.err_last = last_line(slurp(m_dir + "/err/" + std::to_string(client.id)));
        reaped(client);
    }
    m_active.clear();
}

// A run client's command dies without a word when redsem SIGKILLs it (the lease's end came
// before its TERM trap could log). The time it was seen gone bounds its time inside far more
// tightly than the time redsem was reaped: redsem releases the slot before it exits, and the
// next holder may enter before this loop gets to reap it. Its pid comes from its S line; a
// pidfd then tells when it ends, also for a process that is not our child.
void Harness::watch_death(Client& client, pid_t shell) {
    const int fd = static_cast<int>(syscall(SYS_pidfd_open, shell, 0));
    if (fd < 0) {
        if (errno == ESRCH) {
            client.command_gone_ns = real_now_ns(); // gone already
        }
        return;
    }
    // The pid must still be that command: a child of this client's redsem.
    const std::string stat = slurp("/proc/" + std::to_string(shell) + "/stat");
    const auto paren = stat.rfind(')');
    std::istringstream fields(paren == std::string::npos ? "" : stat.substr(paren + 1));
    std::string state;
    pid_t parent = 0;
    fields >> state >> parent;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.u64 = static_cast<std::uint64_t>(client.id) << 32 | static_cast<std::uint32_t>(fd);
    if (parent != client.pid || epoll_ctl(m_epoll, EPOLL_CTL_ADD, fd, &event) != 0) {
        close(fd);
    }
}

void Harness::death_watcher() {
    epoll_event events[64];
    while (!m_stop_watching) {
        const int ready = epoll_wait(m_epoll, events, 64, 50);
        const long long now = real_now_ns();
        for (int i = 0; i < ready; ++i) {
            const int id = static_cast<int>(events[i].data.u64 >> 32);
            const int fd = static_cast<int>(events[i].data.u64 & 0xffffffffU);
            epoll_ctl(m_epoll, EPOLL_CTL_DEL, fd, nullptr);
            close(fd);
            std::lock_guard lock(m_deaths_mutex);
            m_deaths.emplace(id, now);
        }
    }
}

void Harness::stop_death_watcher() {
    if (m_watcher.joinable()) {
        m_stop_watching = true;
        m_watcher.join();
    }
    if (m_epoll >= 0) {
        close(m_epoll); // pidfds still in it are closed with the process
        m_epoll = -1;
    }
    std::lock_guard lock(m_deaths_mutex);
    for (const auto& [id, when] : m_deaths) {
        Client& client = m_clients[static_cast<std::size_t>(id)];
        if (client.command_gone_ns == 0) {
            client.command_gone_ns = when;
        }
    }
}

// ---- Redis actions ------------------------------------------------------------------------

namespace {

// The number `field` of INFO `section` (0 when it has none).
long long info_number(Connection& admin, const std::string& section, const std::string& field) {
    const std::string info = admin.call({"INFO", section}).as_string();
    const std::size_t at = info.find("\n" + field + ":");
    return at == std::string::npos ? 0LL : std::stoll(info.substr(at + field.size() + 2));
}

// INFO replication field `field` of the server behind `admin` ("" when it has none).
std::string replication_field(Connection& admin, const std::string& field) {
    const std::string info = admin.call({"INFO", "replication"}).as_string();
    const std::size_t at = info.find("\n" + field + ":");
    if (at == std::string::npos) {
        return "";
    }
    const std::size_t from = at + field.size() + 2;
    return info.substr(from, info.find_first_of("\r\n", from) - from);
}

// Waits up to 20s for the replica behind `admin` to have an up link to its master.
void wait_for_link(Connection& admin) {
    const auto give_up = Steady::now() + 20s;
    while (replication_field(admin, "master_link_status") != "up") {
        if (Steady::now() > give_up) {
            throw std::runtime_error("a replica's link to its master did not come up in 20s");
        }
        std::this_thread::sleep_for(10ms);
    }
}

// Takes back what an eviction round changed (maxmemory, the cache in database 15), also when
// the round failed half-way: a Redis left evicting or full would fail every client after it.
class MemoryRestored {
public:
    MemoryRestored(Connection& admin, Connection& cache) : m_admin(admin), m_cache(cache) {}
    ~MemoryRestored() {
        if (!m_done) {
            try {
                undo();
            } catch (const std::exception&) {
                // The round's own error is the one reported.
            }
        }
    }
    MemoryRestored(const MemoryRestored&) = delete;
    MemoryRestored& operator=(const MemoryRestored&) = delete;
    // volatile-lru (the keys in use have no TTL), database 15 emptied, no maxmemory.
    void undo() {
        m_admin.call({"CONFIG", "SET", "maxmemory-policy", "volatile-lru"});
        m_cache.call({"FLUSHDB"});
        m_admin.call({"CONFIG", "SET", "maxmemory", "0"});
        m_done = true;
    }

private:
    Connection& m_admin;
    Connection& m_cache;
    bool m_done = false;
};

} // namespace

Connection Harness::connect_db(int db) const {
    ConnectOptions options{parse_redis_url(m_server->socket_url() + "?db=" + std::to_string(db))};
    return Connection(std::move(options));
}

void Harness::note_round(Fault fault, const Window* window) {
    std::lock_guard lock(m_shared.mutex);
    m_shared.rounds[fault] += 1;
    if (window != nullptr) {
        m_shared.windows.push_back(*window);
    }
}

bool Harness::applies(Fault fault) const {
    switch (fault) {
    case Fault::older_gc:
    case Fault::older_limit:
        return !m_older.empty();
    case Fault::failback:
        return m_standby != nullptr;
    default:
        return true;
    }
}

void Harness::act_on_redis(Fault fault) {
    switch (fault) {
    case Fault::client_pause:
        client_pause();
        break;
    case Fault::client_kill:
        client_kill();
        break;
    case Fault::eviction:
        evict();
        break;
    case Fault::eviction_flip:
        flip_eviction();
        break;
    case Fault::pause:
        pause_semaphore();
        break;
    case Fault::older_gc:
        older_gc();
        break;
    case Fault::older_limit:
        older_limit();
        break;
    case Fault::restart_kept:
    case Fault::restart_wiped:
    case Fault::restart_rolled_back:
        restart(fault);
        break;
    case Fault::failback:
        fail_back();
        break;
    default:
        throw std::logic_error(std::string("not a fault on Redis: ") + entry_of(fault).name);
    }
}

void Harness::client_pause() {
    Connection admin = m_server->admin();
    Window window;
    window.fault = Fault::client_pause;
    window.begin_ns = real_now_ns();
    admin.call({"CLIENT", "PAUSE", std::to_string(m_config.client_pause.count()), "ALL"});
    window.end_ns = real_now_ns() + std::chrono::nanoseconds(m_config.client_pause).count();
    note_round(Fault::client_pause, &window);
    // Nothing else on Redis until the pause is over (a fault overdue meanwhile comes next).
    std::this_thread::sleep_for(m_config.client_pause + 100ms);
}

void Harness::client_kill() {
    Connection admin = m_server->admin();
    const Reply killed = admin.call({"CLIENT", "KILL", "TYPE", "normal"});
    note_round(Fault::client_kill);
    std::lock_guard lock(m_shared.mutex);
    m_shared.connections_killed += killed.as_integer();
}

// The keys of semaphores in use (somebody holds or waits) that have a TTL now: under
// volatile-lru Redis may evict them, which "no TTL while in use" (README) rules out. Read in one
// script, so that a release that leaves a semaphore idle (and its keys with a TTL) between the
// reads is not taken for one in use.
std::vector<std::string> Harness::evictable_in_use(Connection& admin) const {
    static const std::string k_exposed = R"lua(
if redis.call('ZCARD', KEYS[2]) == 0 and redis.call('ZCARD', KEYS[4]) == 0 then
    return {}
end
local exposed = {}
for _, key in ipairs(KEYS) do
    if redis.call('PTTL', key) > 0 then
        exposed[#exposed + 1] = key
    end
end
return exposed
)lua";
    std::vector<std::string> found;
    for (const SemaphoreSpec& spec : m_config.semaphores) {
        const std::string base = prefix_of(spec) + ":{" + spec.name + "}:";
        std::vector<std::string> command{"EVAL", k_exposed, "6"};
        for (const char* part : {"state", "holders", "info", "queue", "alive", "slots"}) {
            command.push_back(base + part);
        }
        const Reply exposed = admin.call(command);
        for (const Reply& key : exposed.as_array()) {
            found.push_back(key.as_string());
        }
    }
    return found;
}

void Harness::evict() {
    Connection admin = m_server->admin();
    Connection cache = connect_db(15); // the cache entries go to 15, the clients' keys are in 0
    const std::vector<std::string> exposed = evictable_in_use(admin);
    const long long before = info_number(admin, "stats", "evicted_keys");
    const long long used = info_number(admin, "memory", "used_memory");
    Window window;
    window.fault = Fault::eviction;
    window.begin_ns = real_now_ns();
    MemoryRestored restored(admin, cache);
    admin.call({"CONFIG", "SET", "maxmemory-policy", "volatile-lru"});
    // Room for the clients' own growth (connections, buffers), which Redis cannot evict.
    admin.call({"CONFIG", "SET", "maxmemory", std::to_string(used + 4 * 1024 * 1024)});
    const std::string value(16 * 1024, 'x');
    for (int i = 0; i < 1024 && info_number(admin, "stats", "evicted_keys") == before; ++i) {
        for (int j = 0; j < 16; ++j) {
            cache.command(std::vector<std::string>{"SET", "cache:" + std::to_string(i * 16 + j),
                                                   value, "PX", "60000"});
        }
    }
    const long long evicted = info_number(admin, "stats", "evicted_keys") - before;
    restored.undo(); // (volatile-lru stays)
    window.end_ns = real_now_ns();
    note_round(Fault::eviction, &window);
    std::lock_guard lock(m_shared.mutex);
    m_shared.evicted_keys += evicted;
    m_shared.evictable_in_use += static_cast<int>(exposed.size());
    if (!exposed.empty()) {
        std::ostringstream message;
        message << std::fixed << std::setprecision(3) << "eviction t=" << rel(window.begin_ns)
                << "s..t=" << rel(window.end_ns) << "s: " << evicted
                << " keys evicted; keys of semaphores in use had a TTL as it began:";
        for (const std::string& key : exposed) {
            message << " " << key;
        }
        m_shared.messages.push_back(message.str());
    }
}

// Runs `redsem lost` as an operator would before and during an eviction flip, for the
// prefix without INFO, and for the other one too when `for_older` (NEWS: while the
// previous release remains, as for a user without INFO).
void Harness::declare_loss(bool for_older) const {
    std::vector<std::pair<std::string, std::vector<std::string>>> prefixes;
    const bool any = std::any_of(m_config.semaphores.begin(), m_config.semaphores.end(),
                                 [](const SemaphoreSpec& spec) { return spec.without_info; });
    if (any) {
        prefixes.emplace_back("lost.err", environment_for("", true));
    }
    if (for_older) {
        prefixes.emplace_back("lost-older.err", m_base_env);
    }
    for (const auto& [file, env] : prefixes) {
        const std::string err = m_dir + "/" + file;
        if (!run_to_end({m_redsem, "lost", "-q"}, env, err)) {
            throw std::runtime_error("redsem lost failed: " + last_line(slurp(err)));
        }
    }
}

void Harness::flip_eviction() {
    // The previous release sees no policy (NEWS): a client of it admitted while keys go, or
    // after, before a call of this release recorded the loss, may join a holder whose keys
    // went. None starts from now until such a call has, or the loss grace after the flip, by
    // when every such holder has stopped. Those already started have a moment to enter or
    // end; if some still wait, the operator declares the loss for them too, as NEWS tells.
    m_shared.older_barred_until_ns = LLONG_MAX;
    // A round that fails half-way bars them for the loss grace from then.
    struct BarLapses {
        std::atomic<long long>& barred_until_ns;
        Milliseconds grace;
        ~BarLapses() {
            long long forever = LLONG_MAX;
            barred_until_ns.compare_exchange_strong(
                forever, real_now_ns() + std::chrono::nanoseconds(grace).count());
        }
    } lapses{m_shared.older_barred_until_ns, m_config.loss_grace};
    const auto older_deadline = Steady::now() + m_config.flip_older_wait;
    while (m_shared.older_unentered > 0 && Steady::now() < older_deadline) {
        std::this_thread::sleep_for(20ms);
    }
    const bool for_older = m_shared.older_unentered > 0;
    if (for_older) {
        std::lock_guard lock(m_shared.mutex);
        m_shared.flips_declared += 1;
    }
    // Clients without INFO cannot see a policy (README, "Least privilege"): the operator
    // declares the loss, before the policy allows it (closing admission for the flip: again
    // each half grace while it lasts) and after.
    declare_loss(for_older);
    auto declared = Steady::now();
    Connection admin = m_server->admin();
    Connection cache = connect_db(15);
    // The state hashes and epoch keys there are now, to tell afterwards which the flip took:
    // nothing else deletes them while the semaphores are in use (gc runs on this thread).
    std::vector<std::string> watched{"redsem:epoch", std::string(k_no_info_prefix) + ":epoch"};
    const Reply states = admin.call({"KEYS", "*:state"});
    for (const Reply& key : states.as_array()) {
        watched.push_back(key.as_string());
    }
    std::erase_if(watched, [&](const std::string& key) {
        return admin.call({"EXISTS", key}).as_integer() == 0;
    });
    const long long before = info_number(admin, "stats", "evicted_keys");
    // What Redis counts against maxmemory (not the AOF's and replicas' buffers).
    const long long used = info_number(admin, "memory", "used_memory") -
                           info_number(admin, "memory", "mem_not_counted_for_evict");
    Window window;
    window.fault = Fault::eviction_flip;
    window.begin_ns = real_now_ns();
    const long long flip_began_ms = server_time_ms(admin);
    MemoryRestored restored(admin, cache);
    admin.call({"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
    admin.call({"CONFIG", "SET", "maxmemory", std::to_string(used + 1024 * 1024)});
    // Keys without a TTL: under allkeys-lru any key may go to make room for them. Sixteen at
    // a time: with appendfsync always, each write alone would wait for its own fsync.
    const std::string value(8 * 1024, 'x');
    const auto give_up = Steady::now() + m_config.flip_max;
    long long evicted = 0;
    for (int i = 0; evicted < m_config.flip_evictions && Steady::now() < give_up; ++i) {
        std::vector<Command> writes;
        for (int j = 0; j < 16; ++j) {
            const std::string key = "flip:" + std::to_string(i * 16 + j);
            writes.emplace_back(key, std::vector<std::string>{"SET", key, value});
        }
        cache.pipeline(writes);
        evicted = info_number(admin, "stats", "evicted_keys") - before;
        if (Steady::now() - declared > m_config.loss_grace / 2) {
            declare_loss(for_older);
            declared = Steady::now();
        }
    }
    restored.undo(); // volatile-lru, FLUSHDB of 15, maxmemory 0
    window.end_ns = real_now_ns();
    if (!for_older) {
        // Older clients may start again once a call of this release has recorded the loss
        // after the last key went (they read lost_at), or else the loss grace after the flip.
        const long long bar = window.end_ns + std::chrono::nanoseconds(m_config.loss_grace).count();
        m_shared.older_barred_until_ns = bar;
        unbar_older_once_recorded(bar, flip_began_ms, info_number(admin, "stats", "evicted_keys"));
    }
    evicted = info_number(admin, "stats", "evicted_keys") - before;
    std::vector<std::string> gone;
    for (const std::string& key : watched) {
        if (admin.call({"EXISTS", key}).as_integer() == 0) {
            gone.push_back(key);
        }
    }
    note_round(Fault::eviction_flip, &window);
    {
        std::lock_guard lock(m_shared.mutex);
        m_shared.flip_evicted_keys += evicted;
        m_shared.flip_states_lost += static_cast<int>(gone.size());
        std::ostringstream message;
        message << std::fixed << std::setprecision(3) << "eviction flip t=" << rel(window.begin_ns)
                << "s..t=" << rel(window.end_ns) << "s: " << evicted << " keys evicted";
        for (std::size_t i = 0; i < gone.size(); ++i) {
            message << (i == 0 ? ", gone: " : " ") << gone[i];
        }
        m_shared.messages.push_back(message.str());
    }
    declare_loss(for_older);
    if (for_older) {
        m_shared.older_barred_until_ns = 0;
    }
}

// Lifts the bar on older clients that flip_eviction() set (`bar`, unless another flip has set
// its own since) once the epoch key shows a call of this release that saw the flip's last
// eviction: its lost_at is from the flip (begun at server time `began_ms`) or later, and the
// evictions it counted are all there were (`evicted_total`). Looks again every 50 ms, on
// this thread (a follow-up), until the bar lapses or the chaos ends.
void Harness::unbar_older_once_recorded(long long bar, long long began_ms,
                                        long long evicted_total) {
    if (m_shared.older_barred_until_ns != bar || real_now_ns() >= bar ||
        Steady::now() >= m_chaos_end) {
        return;
    }
    try {
        Connection admin = m_server->admin();
        const Reply epoch = admin.call({"HMGET", "redsem:epoch", "lost_at", "evicted"});
        const auto& fields = epoch.as_array();
        if (!fields[0].is_nil() && !fields[1].is_nil() &&
            std::stoll(fields[0].as_string()) >= began_ms &&
            std::stoll(fields[1].as_string()) == evicted_total) {
            m_shared.older_barred_until_ns = 0;
            std::lock_guard lock(m_shared.mutex);
            std::ostringstream message;
            message << std::fixed << std::setprecision(3)
                    << "older clients start again t=" << rel(real_now_ns())
                    << "s: the loss is on record";
            m_shared.messages.push_back(message.str());
            return;
        }
    } catch (const std::exception&) {
        // (Redis restarting, or the connection killed): the bar stands, and the next look says
    }
    m_followups.emplace_back(Steady::now() + 50ms, [this, bar, began_ms, evicted_total] {
        unbar_older_once_recorded(bar, began_ms, evicted_total);
    });
}

void Harness::pause_semaphore() {
    const int s =
        uniform<int>(m_actions_random, 0, static_cast<int>(m_config.semaphores.size()) - 1);
    const SemaphoreSpec& spec = m_config.semaphores[static_cast<std::size_t>(s)];
    const std::vector<std::string> env = environment_for("", spec.without_info);
    // --for: a pause whose resume a restart rolled back still ends.
    const Milliseconds bound = m_config.semaphore_pause + 10s;
    Window window;
    window.fault = Fault::pause;
    window.semaphore = s;
    window.begin_ns = real_now_ns();
    const std::string err = m_dir + "/pause.err";
    if (!run_to_end({m_redsem, "pause", spec.name, "--for", ms_arg(bound), "--reason", "chaos"},
                    env, err)) {
        window.end_ns = window.begin_ns + std::chrono::nanoseconds(bound).count();
        note_round(Fault::pause, &window);
        throw std::runtime_error("redsem pause " + spec.name + " failed: " + last_line(slurp(err)));
    }
    m_followups.emplace_back(
        Steady::now() + m_config.semaphore_pause,
        [this, window, env, bound, name = spec.name]() mutable {
            const std::string resume_err = m_dir + "/resume.err";
            const bool resumed = run_to_end({m_redsem, "resume", name, "-q"}, env, resume_err);
            window.end_ns =
                resumed ? real_now_ns() : window.begin_ns + std::chrono::nanoseconds(bound).count();
            note_round(Fault::pause, &window);
            if (!resumed) {
                throw std::runtime_error("redsem resume " + name +
                                         " failed: " + last_line(slurp(resume_err)));
            }
        });
}

void Harness::older_gc() {
    const std::string err = m_dir + "/older.err";
    const int code = run_for_exit({m_older, "gc"}, m_base_env, err);
    note_round(Fault::older_gc);
    if (code != 0) {
        std::lock_guard lock(m_shared.mutex);
        m_shared.older_commands_failed += 1;
        m_shared.messages.push_back("the previous release's gc exited " + std::to_string(code) +
                                    ": " + last_line(slurp(err)));
    }
}

void Harness::older_limit() {
    std::vector<int> candidates;
    for (std::size_t s = 0; s < m_config.semaphores.size(); ++s) {
        if (!m_config.semaphores[s].without_info) {
            candidates.push_back(static_cast<int>(s));
        }
    }
    if (candidates.empty()) {
        return;
    }
    const auto s = static_cast<std::size_t>(
        candidates[uniform<std::size_t>(m_actions_random, 0, candidates.size() - 1)]);
    const SemaphoreSpec& spec = m_config.semaphores[s];
    {
        std::lock_guard lock(m_shared.mutex);
        if (m_shared.weighted_until_ns[s] > real_now_ns()) {
            m_shared.older_limits_skipped += 1;
            return;
        }
        m_shared.older_limit_running[s] = true;
    }
    const std::string err = m_dir + "/older.err";
    const int code =
        run_for_exit({m_older, "limit", spec.name, std::to_string(spec.limit)}, m_base_env, err);
    note_round(Fault::older_limit);
    std::lock_guard lock(m_shared.mutex);
    m_shared.older_limit_running[s] = false;
    if (code != 0) {
        m_shared.older_commands_failed += 1;
        m_shared.messages.push_back("the previous release's limit " + spec.name + " " +
                                    std::to_string(spec.limit) + " exited " + std::to_string(code) +
                                    ": " + last_line(slurp(err)));
    }
}

void Harness::restart(Fault kind) {
    Connection admin = m_server->admin();
    const long long keys_before = admin.call({"DBSIZE"}).as_integer();
    if (kind != Fault::restart_kept) {
        // What happens next is not written down: Redis comes back without it.
        admin.call({"CONFIG", "SET", "appendonly", "no"});
        if (kind == Fault::restart_wiped) {
            std::error_code ignored;
            std::filesystem::remove_all(m_server->dir() + "/appendonlydir", ignored);
        } else {
            std::this_thread::sleep_for(m_config.rollback_window);
        }
    }
    admin.disconnect();
    Window window;
    window.fault = kind;
    window.in_contact = groups_in_contact({m_redsem_exe, m_older_exe});
    window.begin_ns = real_now_ns();
    m_shared.redis_down = true;
    try {
        m_server->restart(); // SIGTERM; with the AOF on, it keeps what was written
    } catch (...) {
        m_shared.redis_down = false;
        throw;
    }
    window.end_ns = real_now_ns();
    m_shared.redis_down = false;
    m_poll.reset();
    Connection after = m_server->admin();
    const long long keys_after = after.call({"DBSIZE"}).as_integer();
    const Reply appendonly = after.call({"CONFIG", "GET", "appendonly"});
    if (appendonly.as_array().size() < 2 || appendonly.as_array()[1].as_string() != "yes") {
        after.call({"CONFIG", "SET", "appendonly", "yes"});
    }
    note_round(kind, &window);
    std::lock_guard lock(m_shared.mutex);
    std::ostringstream message;
    message << std::fixed << std::setprecision(3) << "Redis " << entry_of(kind).name
            << " t=" << rel(window.begin_ns) << "s..t=" << rel(window.end_ns)
            << "s: " << keys_before << " keys before, " << keys_after << " right after";
    m_shared.messages.push_back(message.str());
}

// A failback behind a fixed address: the standby is promoted (a failover nobody's clients
// follow), the master takes writes for rollback_window, then follows the standby, whose data
// replaces its own (the writes of that window are lost), and is promoted back: the same
// Redis process, a new replication history. While it is a replica, clients get READONLY.
void Harness::fail_back() {
    Connection standby = m_standby->admin();
    wait_for_link(standby);
    standby.call({"REPLICAOF", "NO", "ONE"});
    // A call without INFO that may admit reaches the promoted standby, as when clients follow
    // a failover: it draws a new epoch marker there. (Had none reached it, the master, which
    // still has the old marker's script cached, could not tell the failback: the documented
    // case that only INFO sees.)
    std::vector<std::string> env = m_base_env;
    as_app_user(env, *m_standby);
    set_env(env, "REDSEM_LOSS_GRACE", "0");
    run_to_end({m_redsem, "acquire", "failback-probe", "--prefix", k_no_info_prefix, "-w", "0",
                "--ttl", "1s"},
               env, m_dir + "/probe.err");
    std::this_thread::sleep_for(m_config.rollback_window);
    Connection master = m_server->admin();
    Window window;
    window.fault = Fault::failback;
    window.begin_ns = real_now_ns();
    master.call({"REPLICAOF", "127.0.0.1", std::to_string(m_standby->port())});
    wait_for_link(master);
    master.call({"REPLICAOF", "NO", "ONE"});
    window.end_ns = real_now_ns();
    standby.call({"REPLICAOF", "127.0.0.1", std::to_string(m_server->port())});
    note_round(Fault::failback, &window);
    std::lock_guard lock(m_shared.mutex);
    std::ostringstream message;
    message << std::fixed << std::setprecision(3) << "Redis failed back t=" << rel(window.begin_ns)
            << "s..t=" << rel(window.end_ns) << "s";
    m_shared.messages.push_back(message.str());
}

void Harness::poll_marks() {
    try {
        if (!m_poll) {
            m_poll = std::make_unique<Connection>(m_server->admin());
        }
        const long long now = real_now_ns();
        for (std::size_t s = 0; s < m_config.semaphores.size(); ++s) {
            const SemaphoreSpec& spec = m_config.semaphores[s];
            const std::string keys = prefix_of(spec) + ":{" + spec.name + "}:";
            // The limit, and whether anybody holds, at one instant.
            const Reply read = m_poll->call({"EVAL",
                                             "return {redis.call('HGET', KEYS[1], 'limit') or '', "
                                             "redis.call('ZCARD', KEYS[2])}",
                                             "2", keys + "state", keys + "holders"});
            const std::string& text = read.at(0).as_string();
            // Marks only older clients are refused by, where they run; and holders without a
            // limit (a state hash evicted, or made anew by an older release's setting), which
            // every client is refused by until they leave.
            std::vector<std::pair<std::string, bool>> words{
                {"gone", text.empty() && read.at(1).as_integer() > 0}};
            if (!m_older.empty() && !spec.without_info) {
                words.emplace_back("paused", text.find("paused") != std::string::npos);
                words.emplace_back("weighted", text.find("weighted") != std::string::npos);
            }
            for (const auto& [word, marked] : words) {
                const auto key = std::make_pair(static_cast<int>(s), word);
                const auto on = m_marked_since.find(key);
                if (marked && on == m_marked_since.end()) {
                    m_marked_since.emplace(key, m_last_poll_ns > 0 ? m_last_poll_ns : now);
                } else if (!marked && on != m_marked_since.end()) {
                    std::lock_guard lock(m_shared.mutex);
                    m_shared.marks.push_back({static_cast<int>(s), word, on->second, now});
                    m_marked_since.erase(on);
                }
            }
        }
        m_last_poll_ns = now;
    } catch (const std::exception&) {
        m_poll.reset(); // (Redis restarting, or the connection killed): the next poll says
    }
}

void Harness::close_marks() {
    const long long now = real_now_ns();
    std::lock_guard lock(m_shared.mutex);
    for (const auto& [key, since] : m_marked_since) {
        m_shared.marks.push_back({key.first, key.second, since, now});
    }
    m_marked_since.clear();
}

void Harness::redis_actions() {
    auto jitter = [&](Milliseconds mean) {
        return next_after(m_actions_random, Steady::now(), mean);
    };
    const auto start = Steady::now();
    // Restarts: spread evenly over the chaos phase, their kinds in turn.
    const std::vector<Fault> kinds{Fault::restart_kept, Fault::restart_wiped,
                                   Fault::restart_rolled_back, Fault::failback};
    std::vector<std::pair<Steady::time_point, Fault>> restarts;
    const int count = std::max(0, m_config.restarts);
    for (int i = 0; i < count; ++i) {
        const double slice = static_cast<double>(m_config.duration.count()) / count;
        const double at = slice * (i + 0.5) + slice * uniform<double>(m_actions_random, -0.2, 0.2);
        restarts.emplace_back(start + Milliseconds{static_cast<long long>(at)},
                              kinds[static_cast<std::size_t>(i) % kinds.size()]);
    }
    std::size_t next_restart = 0;
    // The others: each after a mean interval of its own.
    std::vector<std::pair<Fault, Steady::time_point>> next;
    for (const FaultEntry& entry : k_faults) {
        if (entry.side == FaultSide::redis && entry.every != nullptr && applies(entry.fault)) {
            next.emplace_back(entry.fault, jitter(m_config.*entry.every));
        }
    }
    std::vector<bool> ran(next.size(), false);
    auto next_poll = Steady::now();
    // Runs `what` (a round of `fault`), reporting what it threw.
    auto attempt = [&](const std::string& doing, const std::function<void()>& what) {
        try {
            what();
        } catch (const std::exception& error) {
            std::lock_guard lock(m_shared.mutex);
            m_shared.errors += 1;
            m_shared.messages.push_back("harness error during " + doing + ": " + error.what());
        }
    };
    for (;;) {
        auto due = next_restart < restarts.size() ? restarts[next_restart].first
                                                  : Steady::time_point::max();
        std::size_t which = next.size(); // next.size(): the restart
        for (std::size_t i = 0; i < next.size(); ++i) {
            // A kind overdue that has not run yet goes first: the slow rounds of a sanitized
            // build must not crowd it out of the chaos phase.
            const bool first_overdue = !ran[i] && next[i].second <= Steady::now();
            const auto at = first_overdue ? start : next[i].second;
            if (at < due) {
                due = at;
                which = i;
            }
        }
        std::size_t followup = m_followups.size();
        auto followup_at = Steady::time_point::max();
        for (std::size_t i = 0; i < m_followups.size(); ++i) {
            if (m_followups[i].first < followup_at) {
                followup_at = m_followups[i].first;
                followup = i;
            }
        }
        const auto poll_at = next_poll;
        {
            std::unique_lock lock(m_shared.mutex);
            const auto until = std::min({due, followup_at, poll_at, m_chaos_end});
            m_shared.wake.wait_until(lock, until, [&] { return m_shared.stop_actions; });
            if (m_shared.stop_actions || Steady::now() >= m_chaos_end) {
                break;
            }
        }
        const auto now = Steady::now();
        if (now >= poll_at) {
            poll_marks();
            next_poll = Steady::now() + k_mark_poll;
        }
        if (now >= followup_at) {
            auto action = std::move(m_followups[followup].second);
            m_followups.erase(m_followups.begin() + static_cast<std::ptrdiff_t>(followup));
            attempt("a follow-up", action);
            continue;
        }
        if (now < due) {
            continue;
        }
        if (which == next.size()) {
            const Fault kind = restarts[next_restart].second;
            ++next_restart;
            attempt(entry_of(kind).name, [&] {
                if (applies(kind)) {
                    act_on_redis(kind);
                }
            });
        } else {
            const Fault fault = next[which].first;
            next[which].second = jitter(m_config.*entry_of(fault).every);
            ran[which] = true;
            attempt(entry_of(fault).name, [&] { act_on_redis(fault); });
        }
    }
    // The chaos phase is over: what a round began is ended (a paused semaphore resumed).
    for (auto& [at, action] : m_followups) {
        attempt("a follow-up", action);
    }
    m_followups.clear();
    // Redis was (re)started by this thread, and dies with it (PR_SET_PDEATHSIG follows the
    // thread that forked): stay until the harness is done with it, polling the marks for the
    // survivors meanwhile.
    std::unique_lock lock(m_shared.mutex);
    while (!m_shared.finish) {
        m_shared.wake.wait_for(lock, k_mark_poll, [&] { return m_shared.finish; });
        if (!m_shared.finish) {
            lock.unlock();
            poll_marks();
            lock.lock();
        }
    }
    lock.unlock();
    close_marks();
    m_poll.reset();
}

// ---- after the chaos ----------------------------------------------------------------------

int Harness::run_for_exit(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          const std::string& err, const std::string& out) const {
    const pid_t pid = spawn(argv, env, err, out);
    int status = 0;
    const auto deadline = Steady::now() + 30s;
    pid_t got = 0;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && Steady::now() < deadline) {
        std::this_thread::sleep_for(5ms);
    }
    if (got == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return -1;
    }
    if (got != pid) {
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status)
                             : (WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1);
}

// A waiter's ":left" note (lua/release.lua) outlives its semaphore on purpose: a waiter stopped
// while `release` took it out of the queue must still find it when it wakes, so gc leaves it
// to expire. It must have a TTL, at most the longest place a waiter keeps in the queue (15
// minutes far back, lua/acquire.lua) and 60s more, and it only exists for a token no longer
// queued.
namespace {
bool is_bounded_left_note(Connection& admin, const std::string& key) {
    const long long ttl_ms = admin.call({"PTTL", key}).as_integer();
    if (ttl_ms <= 0 || ttl_ms > (15 * 60 + 60 + 60) * 1000LL) {
        return false;
    }
    const std::string::size_type wake = key.rfind(":wake:");
    if (wake == std::string::npos) {
        return false;
    }
    const std::string token = key.substr(wake + 6, key.size() - wake - 6 - 5);
    const std::string queue = key.substr(0, wake) + ":queue";
    return admin.call({"ZSCORE", queue, token}).is_nil();
}

// A holder that leaves a paused semaphore pushes to "<wake prefix>drained" for a draining
// client (lua/lib/queue.lua, tell_drainer()), with an expiry of 60s, and nobody pops it when
// nobody drains (the harness pauses, it never drains). gc does not delete it; it expires.
bool is_bounded_drain_nudge(Connection& admin, const std::string& key) {
    const long long ttl_ms = admin.call({"PTTL", key}).as_integer();
    return key.ends_with(":wake:drained") && ttl_ms > 0 && ttl_ms <= 60'000 &&
           admin.call({"TYPE", key}).as_string() == "list";
}
} // namespace

void Harness::check_keys() {
    // Waiters drop after 5s, uncollected hand-overs after 3s, leases after the ttl, a pause
    // left by a rolled-back resume after its --for; then gc removes every semaphore. Poll
    // rather than sleep for the longest of them.
    const auto give_up = Steady::now() + 15s + 2 * m_config.ttl + m_config.loss_grace;
    for (;;) {
        const std::string err = m_dir + "/gc.err";
        m_result.gc_ok =
            run_to_end({m_redsem, "gc"}, m_base_env, err) &&
            run_to_end({m_redsem, "gc", "--prefix", k_no_info_prefix}, m_base_env, err);
        if (!m_result.gc_ok) {
            m_out << "chaos: redsem gc failed: " << last_line(slurp(err)) << "\n";
        }
        Connection admin = m_server->admin();
        std::vector<Reply> keys = admin.call({"KEYS", "redsem:*"}).as_array();
        const Reply more = admin.call({"KEYS", std::string(k_no_info_prefix) + ":*"});
        keys.insert(keys.end(), more.as_array().begin(), more.as_array().end());
        m_result.keys_left = 0;
        m_result.keys_left_names.clear();
        for (const Reply& key : keys) {
            if (key.as_string() == "redsem:epoch" ||
                key.as_string() == std::string(k_no_info_prefix) + ":epoch") {
                continue; // the loss marker: no TTL by design
            }
            if (key.as_string().ends_with(":log") &&
                admin.call({"PTTL", key.as_string()}).as_integer() > 0) {
                continue; // a history: gc leaves it, to expire as the semaphore's keys would
            }
            if (key.as_string().ends_with(":left") &&
                is_bounded_left_note(admin, key.as_string())) {
                continue; // a note to a waiter that `release` took out of the queue: it expires
            }
            if (is_bounded_drain_nudge(admin, key.as_string())) {
                continue; // a note to a drainer nobody ran: it expires
            }
            m_result.keys_left += 1;
            if (m_result.keys_left <= 12) {
                m_result.keys_left_names += (m_result.keys_left > 1 ? " " : "") + key.as_string();
            }
        }
        if (m_result.keys_left == 0 || Steady::now() > give_up) {
            return;
        }
        std::this_thread::sleep_for(250ms);
    }
}

void Harness::start_history() {
    for (const bool without_info : {false, true}) {
        const std::string name =
            without_info ? std::string("history-") + k_no_info_prefix : std::string("history");
        m_history.push_back(spawn({m_redsem, "log", "--follow", "--json"},
                                  environment_for("", without_info), m_dir + "/" + name + ".err",
                                  m_dir + "/" + name + ".jsonl"));
    }
}

void Harness::stop_history() {
    // It follows on from the last event after an outage; it reads what is there before it
    // stops (a SIGTERM ends it between rounds).
    std::this_thread::sleep_for(200ms);
    for (const pid_t pid : m_history) {
        kill(pid, SIGTERM);
    }
    for (const pid_t pid : m_history) {
        int status = 0;
        const auto give_up = Steady::now() + 5s;
        while (waitpid(pid, &status, WNOHANG) == 0 && Steady::now() < give_up) {
            std::this_thread::sleep_for(10ms);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    m_history.clear();
}

std::string Harness::describe(const Client& client) const {
    const SemaphoreSpec& spec = m_config.semaphores[static_cast<std::size_t>(client.semaphore)];
    std::ostringstream out;
    out << std::fixed << std::setprecision(3);
    out << "client " << client.id << " (" << (client.run_form ? "run" : "acquire/release")
        << (client.older ? ", previous release" : "")
        << (client.weight > 1 ? ", --slots " + std::to_string(client.weight) : "")
        << (client.skew.empty() ? "" : ", FAKETIME=" + client.skew) << ", hold "
        << client.hold.count() << "ms, spawned t=" << rel(client.spawned_ns) << "s";
    if (client.has_s) {
        out << "; S " << spec.name << " " << client.id << " " << joined(client.slots) << " "
            << client.fence << " " << client.s_ns << " (t=" << rel(client.s_ns) << "s)";
    }
    if (client.has_t) {
        out << "; T " << spec.name << " " << client.id << " " << client.t_ns
            << " (t=" << rel(client.t_ns) << "s)";
    }
    if (client.has_e) {
        out << "; E " << spec.name << " " << client.id << " " << client.e_ns
            << " (t=" << rel(client.e_ns) << "s)";
    }
    if (client.paused) {
        out << "; SIGSTOP " << name_of(client.pause_kind)
            << (client.reclassified ? " (chosen as waiter)" : "")
            << " t=" << rel(client.pause_start_ns) << "s..t=" << rel(client.pause_end_ns) << "s";
    }
    if (client.command_gone_ns != 0 && !client.has_e && !client.has_t) {
        out << "; command seen gone t=" << rel(client.command_gone_ns) << "s";
    }
    if (client.killed_ns != 0) {
        out << "; SIGKILL of its " << client.killed_what << " t=" << rel(client.killed_ns) << "s";
    }
    out << "; exit " << client.exit_code << " reaped t=" << rel(client.reaped_ns) << "s)";
    return out.str();
}

void Harness::classify_exits() {
    Evidence seen;
    {
        std::lock_guard lock(m_shared.mutex);
        seen.windows = m_shared.windows;
        seen.marks = m_shared.marks;
    }
    // A weighted client's life: the stored limit is marked from its request on.
    for (const Client& client : m_clients) {
        if (client.weight > 1) {
            Window life;
            life.fault = Fault::weighted;
            life.begin_ns = client.spawned_ns;
            life.end_ns = client.reaped_ns;
            life.semaphore = client.semaphore;
            seen.windows.push_back(life);
        }
    }
    seen.state_gone_after_ns =
        std::chrono::nanoseconds(m_config.long_hold_max + 2 * m_config.ttl + 1s).count();
    const std::vector<ExitRule> rules = exit_rules(seen);
    for (const Client& client : m_clients) {
        m_result.exits[client.exit_code] += 1;
        if (client.killed_ns != 0) {
            continue; // SIGKILLed by the harness: any outcome
        }
        m_result.survivors += 1;
        std::string problem;
        if (client.hung) {
            m_result.survivors_hung += 1;
            problem = "did not finish within the grace";
        } else if (const auto rule =
                       std::find_if(rules.begin(), rules.end(),
                                    [&](const ExitRule& r) { return r.explains(client); });
                   rule != rules.end()) {
            m_result.*(rule->counter) += 1;
        } else if (client.exit_code == 0) {
            m_result.exit_other += 1;
            problem = "exit 0 without both S and E logged";
        } else {
            if (client.exit_code == 75) {
                m_result.exit_75 += 1;
            } else {
                m_result.exit_other += 1;
            }
            problem = "exit " + std::to_string(client.exit_code);
        }
        if (!problem.empty()) {
            if (!client.hung) {
                m_result.survivors_failed += 1;
            }
            m_result.failures.push_back(problem + ": " + describe(client) + "; stderr: " +
                                        (client.err_last.empty() ? "(empty)" : client.err_last));
        }
    }
}

// ---- analysis: what the observer saw -------------------------------------------------------

namespace {

// A command's time inside, from its entry to its exit (or the best upper bound of its end),
// and the slots it held meanwhile.
struct Interval {
    long long start = 0;
    long long end = 0;
    int client = 0;
    int weight = 1;
};

// A command's entry with the fence it was given.
struct Entry {
    long long at = 0;
    long long fence = 0;
    int client = 0;
};

} // namespace

// What the commands of one semaphore logged, sorted for the checks. A grant of several slots
// is one interval inside (of its weight) and one entry on each of its slots.
struct Harness::Observed {
    std::vector<Interval> inside;                       // counted for overlap
    std::map<long long, std::vector<Interval>> by_slot; // the same, per slot
    std::map<long long, std::vector<Entry>> entries;    // per slot
    std::vector<Entry> late;                            // fencing-only entries
    std::vector<Entry> grants;                          // every entry, once
};

void Harness::analyse() {
    std::vector<Observed> observed(m_config.semaphores.size());
    collect(observed);
    for (std::size_t s = 0; s < observed.size(); ++s) {
        const SemaphoreSpec& spec = m_config.semaphores[s];
        check_overlap(spec, observed[s]);
        check_slots(spec, observed[s]);
        check_fences(spec, observed[s]);
        check_late_entries(spec, observed[s]);
    }
    if (m_result.late_entries > 0) {
        m_out << "chaos: " << m_result.late_entries << " late entries, "
              << m_result.late_entries_refused << " of them behind a newer fence\n";
    }
}

void Harness::collect(std::vector<Observed>& observed) {
    for (const Client& client : m_clients) {
        if (client.has_e) {
            m_result.cycles_completed += 1;
            m_result.cycles_skewed += client.skew.empty() ? 0 : 1;
            m_result.cycles_older += client.older ? 1 : 0;
            m_result.cycles_weighted += client.weight > 1 ? 1 : 0;
            m_result.long_holds_completed += client.long_hold ? 1 : 0;
        }
        if (!client.has_s) {
            continue;
        }
        Observed& seen = observed[static_cast<std::size_t>(client.semaphore)];
        seen.grants.push_back({client.s_ns, client.fence, client.id});
        long long end = 0;
        if (client.has_e) {
            end = client.e_ns;
        } else if (client.has_t) {
            end = client.t_ns;
        } else {
            // It died without a word: by the harness's SIGKILL, by the time its command was
            // seen gone, at the latest by the time it was reaped. Each is an upper bound.
            end = client.reaped_ns;
            m_result.silent_ends += 1;
            m_result.silent_ends_seen += client.command_gone_ns != 0 ? 1 : 0;
            if (client.killed_ns != 0 && client.killed_ns >= client.s_ns) {
                end = std::min(end, client.killed_ns);
            }
            if (client.command_gone_ns != 0 && client.command_gone_ns >= client.s_ns) {
                end = std::min(end, client.command_gone_ns);
            }
        }
        if (client.fencing_from_ns != 0 && client.s_ns >= client.fencing_from_ns) {
            // It took its slot, was stopped before it could log its entry, and entered only
            // after SIGCONT, long past its lease: only fencing protects that. Counted apart.
            seen.late.push_back({client.s_ns, client.fence, client.id});
            continue;
        }
        for (const long long slot : client.slots) {
            seen.entries[slot].push_back({client.s_ns, client.fence, client.id});
        }
        long long overlap_end =
            client.fencing_from_ns != 0 ? std::min(end, client.fencing_from_ns) : end;
        // A bare acquire's lease is never renewed after acquire returned: it ends at the
        // deadline acquire printed (its grant file, read at reaping: the lease it was given,
        // renewed first if it had aged), else at the latest a ttl after the script logged its
        // entry. What the script does past that (starved of the CPU for longer than the lease
        // on a loaded machine, before or after it logged its entry), only fencing can make
        // safe, as after a SIGSTOP. Counted apart, and named.
        long long lease_end = client.s_ns + m_config.ttl.count() * 1'000'000;
        if (client.deadline_ms > 0) {
            lease_end = std::min(lease_end, client.deadline_ms * 1'000'000);
        }
        if (!client.run_form && overlap_end > lease_end) {
            overlap_end = lease_end;
            m_result.outstayed_leases += 1;
            m_out << "chaos: stayed inside past its lease (a bare acquire's script, starved "
                  << std::fixed << std::setprecision(3)
                  << static_cast<double>(end - lease_end) / 1e9 << "s): " << describe(client)
                  << "\n";
        }
        if (overlap_end > client.s_ns) {
            const int weight = static_cast<int>(client.slots.size());
            seen.inside.push_back(
                {client.s_ns, overlap_end, client.id, std::max(weight, client.weight)});
            for (const long long slot : client.slots) {
                seen.by_slot[slot].push_back({client.s_ns, overlap_end, client.id, 1});
            }
        }
    }
}

void Harness::report(const std::string& kind, const std::string& text) {
    m_result.violations.push_back({kind, text});
}

std::string Harness::describe_pair(int first, int second) const {
    return "\n    " + describe(m_clients[static_cast<std::size_t>(first)]) + "\n    " +
           describe(m_clients[static_cast<std::size_t>(second)]);
}

void Harness::check_overlap(const SemaphoreSpec& spec, const Observed& seen) {
    // A sweep over entries (+weight) and exits (-weight), exits first at equal times.
    std::vector<std::tuple<long long, int, int>> events;
    for (const Interval& interval : seen.inside) {
        events.emplace_back(interval.start, +interval.weight, interval.client);
        events.emplace_back(interval.end, -interval.weight, interval.client);
    }
    std::sort(events.begin(), events.end());
    std::set<int> inside;
    int held = 0;
    int most = 0;
    for (const auto& [at, delta, id] : events) {
        held += delta;
        if (delta < 0) {
            inside.erase(id);
            continue;
        }
        inside.insert(id);
        most = std::max(most, held);
        if (held > spec.limit) {
            m_result.overlap_violations += 1;
            std::ostringstream text;
            text << "overlap on " << spec.name << " at t=" << std::fixed << std::setprecision(3)
                 << rel(at) << "s: " << held << " slots held by " << inside.size()
                 << " inside (limit " << spec.limit << "):";
            for (int other : inside) {
                text << "\n    " << describe(m_clients[static_cast<std::size_t>(other)]);
            }
            report("overlap", text.str());
        }
    }
    m_result.max_inside[spec.name] = most;
}

void Harness::check_slots(const SemaphoreSpec& spec, Observed& seen) {
    // One holder per slot at a time.
    for (auto& [slot, list] : seen.by_slot) {
        std::sort(list.begin(), list.end(),
                  [](const Interval& a, const Interval& b) { return a.start < b.start; });
        const Interval* latest = nullptr; // the one that ends last so far
        for (const Interval& interval : list) {
            if (latest != nullptr && interval.start < latest->end) {
                m_result.slot_violations += 1;
                report("slot", "slot " + std::to_string(slot) + " of " + spec.name +
                                   " shared:" + describe_pair(latest->client, interval.client));
            }
            if (latest == nullptr || interval.end > latest->end) {
                latest = &interval;
            }
        }
    }
}

void Harness::check_fences(const SemaphoreSpec& spec, Observed& seen) {
    // Per slot, in the order of entry, strictly increasing.
    for (auto& [slot, list] : seen.entries) {
        std::sort(list.begin(), list.end(),
                  [](const Entry& a, const Entry& b) { return a.at < b.at; });
        for (std::size_t i = 1; i < list.size(); ++i) {
            if (list[i].fence <= list[i - 1].fence) {
                m_result.fence_violations += 1;
                report("fence", "fence out of order on slot " + std::to_string(slot) + " of " +
                                    spec.name + ":" +
                                    describe_pair(list[i - 1].client, list[i].client));
            }
        }
    }
    // Unique per semaphore: one per grant, also for a grant of several slots.
    std::map<long long, int> owner;
    for (const Entry& grant : seen.grants) {
        const auto [it, fresh] = owner.emplace(grant.fence, grant.client);
        if (!fresh) {
            m_result.fence_violations += 1;
            report("fence", "fence " + std::to_string(grant.fence) + " of " + spec.name +
                                " given twice:" + describe_pair(it->second, grant.client));
        }
    }
}

void Harness::check_late_entries(const SemaphoreSpec& spec, Observed& seen) {
    (void)spec;
    // A fenced resource would refuse a late entry behind a newer fence on one of its slots.
    for (const Entry& entry : seen.late) {
        m_result.late_entries += 1;
        const Client& client = m_clients[static_cast<std::size_t>(entry.client)];
        bool behind = false;
        for (const long long slot : client.slots) {
            const auto& entered = seen.entries[slot];
            behind = behind || std::any_of(entered.begin(), entered.end(), [&](const Entry& e) {
                         return e.at < entry.at && e.fence > entry.fence;
                     });
        }
        m_result.late_entries_refused += behind ? 1 : 0;
        m_out << "chaos: late entry (stopped holding its grant before it logged S; "
              << (behind ? "a fenced resource refuses it: a newer fence entered before"
                         : "no newer fence had entered its slot")
              << "): " << describe(client) << "\n";
    }
}

Result Harness::run() {
    prepare();
    m_start_ns = real_now_ns();
    const auto start = Steady::now();
    m_chaos_end = start + m_config.duration;
    m_next_progress = start + m_config.progress_every;
    m_epoll = epoll_create1(EPOLL_CLOEXEC);
    if (m_epoll < 0) {
        throw std::runtime_error("epoll_create1 failed");
    }
    m_watcher = std::thread([this] { death_watcher(); });
    m_actions = std::thread([this] { redis_actions(); });
    start_history();

    // The faults on the clients, each after a mean interval of its own.
    std::vector<std::pair<Fault, Steady::time_point>> client_faults;
    for (const FaultEntry& entry : k_faults) {
        if (entry.side == FaultSide::clients && entry.every != nullptr) {
            client_faults.emplace_back(entry.fault,
                                       next_after(m_random, start, m_config.*entry.every));
        }
    }
    const auto grace_ends = m_chaos_end + m_config.survivor_grace;
    bool chaos_over = false;
    bool weighted_after_faults = false;
    try {
        for (;;) {
            tail_log();
            reap();
            resume_due(false);
            drain_messages();
            const auto now = Steady::now();
            if (now >= m_chaos_end && !chaos_over) {
                chaos_over = true;
                m_result.seconds = std::chrono::duration<double>(now - start).count();
                {
                    std::lock_guard lock(m_shared.mutex);
                    m_shared.stop_actions = true;
                }
                m_shared.wake.notify_all();
            }
            if (chaos_over) {
                // One weighted request after the faults, which must get through (those during
                // them may all end by a fault): spawned once no restart or older `limit`
                // stands in its way.
                if (!weighted_after_faults) {
                    weighted_after_faults = weighted_candidates().empty() || spawn_weighted();
                }
                if (m_active.empty() && m_pauses.empty() && weighted_after_faults) {
                    break;
                }
                if (now >= grace_ends) {
                    break;
                }
            } else {
                while (static_cast<int>(m_active.size()) < m_config.clients &&
                       !m_shared.redis_down) {
                    spawn_client();
                }
                for (auto& [fault, at] : client_faults) {
                    if (now >= at) {
                        act_on_clients(fault);
                        at = next_after(m_random, now, m_config.*entry_of(fault).every);
                    }
                }
            }
            progress(false);
            std::this_thread::sleep_for(3ms);
        }
    } catch (const std::exception& error) {
        m_result.harness_errors += 1;
        m_out << "chaos: harness error: " << error.what() << "\n";
    }
    if (!chaos_over) {
        m_result.seconds = std::chrono::duration<double>(Steady::now() - start).count();
        {
            std::lock_guard lock(m_shared.mutex);
            m_shared.stop_actions = true;
        }
        m_shared.wake.notify_all();
    }
    finish_stragglers();
    tail_log();
    stop_death_watcher();
    drain_messages();
    try {
        check_keys();
    } catch (const std::exception& error) {
        m_result.harness_errors += 1;
        m_result.gc_ok = false;
        m_out << "chaos: harness error while checking keys: " << error.what() << "\n";
    }
    stop_history(); // while Redis still runs (it ends with the thread that acts on it)
    {
        std::lock_guard lock(m_shared.mutex);
        m_shared.finish = true;
    }
    m_shared.wake.notify_all();
    m_actions.join();
    drain_messages();
    {
        std::lock_guard lock(m_shared.mutex);
        for (const auto& [fault, n] : m_shared.rounds) {
            m_result.rounds[fault] += n;
        }
        m_result.evicted_keys = m_shared.evicted_keys;
        m_result.evictable_in_use = m_shared.evictable_in_use;
        m_result.flip_evicted_keys = m_shared.flip_evicted_keys;
        m_result.flip_states_lost = m_shared.flip_states_lost;
        m_result.connections_killed = m_shared.connections_killed;
        m_result.older_limits_skipped = m_shared.older_limits_skipped;
        m_result.flips_declared = m_shared.flips_declared;
        m_result.older_commands_failed = m_shared.older_commands_failed;
        m_result.harness_errors += m_shared.errors;
    }

    analyse();
    classify_exits();
    const bool good = m_result.safe() && m_result.live() && m_result.clean();

    // The verdict and what it rests on.
    constexpr std::size_t k_most_printed = 40;
    for (std::size_t i = 0; i < m_result.violations.size() && i < k_most_printed; ++i) {
        m_out << "chaos: VIOLATION (" << m_result.violations[i].kind
              << "): " << m_result.violations[i].text << "\n";
    }
    for (std::size_t i = 0; i < m_result.failures.size() && i < k_most_printed; ++i) {
        m_out << "chaos: FAILED SURVIVOR: " << m_result.failures[i] << "\n";
    }
    if (m_result.keys_left > 0) {
        m_out << "chaos: keys left after gc: " << m_result.keys_left_names << "\n";
    }
    close(m_log_fd);
    m_log_fd = -1;
    m_standby.reset();
    m_server.reset();
    if (good || !m_config.keep_files_on_failure) {
        std::error_code ignored;
        std::filesystem::remove_all(m_dir, ignored);
        m_result.directory.clear();
    } else {
        m_out << "chaos: the log is kept in " << m_dir
              << "/inside.log, the semaphores' histories in " << m_dir << "/history*.jsonl\n";
    }
    m_out << m_result.summary() << "\n";
    m_out.flush();
    return m_result;
}

} // namespace

const FaultEntry& entry_of(Fault fault) {
    for (const FaultEntry& entry : k_faults) {
        if (entry.fault == fault) {
            return entry;
        }
    }
    throw std::logic_error("a fault without an entry in k_faults");
}

int Result::rounds_of(Fault fault) const {
    const auto it = rounds.find(fault);
    return it == rounds.end() ? 0 : it->second;
}

std::string Result::summary() const {
    std::ostringstream out;
    out << std::fixed << std::setprecision(1);
    out << "chaos: " << seconds << "s, " << clients_started << " clients (" << clients_skewed
        << " skewed, " << clients_older << " of the previous release, " << clients_weighted
        << " weighted, " << clients_superseding << " superseding, " << clients_deadline
        << " with --max-run), " << cycles_completed << " cycles (" << cycles_skewed << " skewed, "
        << cycles_older << " older, " << cycles_weighted << " weighted, " << long_holds_completed
        << " long) = " << (seconds > 0 ? static_cast<double>(cycles_completed) / seconds : 0.0)
        << "/s; survivors' exits";
    for (const ExitRule& rule : exit_rules(Evidence{})) {
        out << " " << rule.what << ":" << this->*(rule.counter);
    }
    out << " 75:" << exit_75 << " other:" << exit_other << "; all exits";
    for (const auto& [code, n] : exits) {
        out << " " << code << ":" << n;
    }
    out << "; faults:";
    for (const FaultEntry& entry : k_faults) {
        out << (entry.fault == k_faults.front().fault ? " " : ", ") << entry.name << " "
            << rounds_of(entry.fault);
        switch (entry.fault) {
        case Fault::sigkill:
            if (!sigkill_targets.empty()) {
                out << " (";
                bool first = true;
                for (const auto& [what, n] : sigkill_targets) {
                    out << (first ? "" : ", ") << what << " " << n;
                    first = false;
                }
                out << ")";
            }
            break;
        case Fault::stop_holder:
            out << " (" << pauses_reclassified << " chosen as waiters)";
            break;
        case Fault::client_kill:
            out << " (" << connections_killed << " connections)";
            break;
        case Fault::eviction:
            out << " (" << evicted_keys << " keys; " << evictable_in_use
                << " keys in use had a TTL as one began)";
            break;
        case Fault::eviction_flip:
            out << " (" << flip_evicted_keys << " keys, " << flip_states_lost
                << " state hashes or epoch keys; " << flips_declared
                << " declared for older clients waiting)";
            break;
        case Fault::older_limit:
            out << " (" << older_limits_skipped << " left out: weighted)";
            break;
        default:
            break;
        }
    }
    if (older_commands_failed > 0) {
        out << "; older commands failed " << older_commands_failed;
    }
    out << "; max slots held";
    for (const auto& [name, most] : max_inside) {
        out << " " << name << "=" << most;
    }
    out << "; died without a word " << silent_ends << " (" << silent_ends_seen
        << " seen by pidfd); late entries " << late_entries << " (" << late_entries_refused
        << " behind a newer fence); outstayed leases " << outstayed_leases;
    out << "; violations: overlap " << overlap_violations << ", slot " << slot_violations
        << ", fence " << fence_violations << ", malformed " << malformed_lines << "; survivors "
        << survivors << ", failed " << survivors_failed << ", hung " << survivors_hung
        << "; keys left " << keys_left << (gc_ok ? "" : " (gc failed)");
    if (harness_errors > 0) {
        out << "; harness errors " << harness_errors;
    }
    out << "; verdict: safety " << (safe() ? "OK" : "VIOLATED") << ", liveness "
        << (live() ? "OK" : "FAILED") << ", cleanup " << (clean() ? "OK" : "FAILED");
    return out.str();
}

Result run(const Config& config) {
    Harness harness(config);
    return harness.run();
}

} // namespace redsem::test::chaos
