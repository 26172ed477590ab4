#include "redis/connection.hpp"

#include "redis/cluster.hpp"
#include "redis/retry_policy.hpp"
#include "redis/topology.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>
#include <thread>

namespace redsem {

namespace {

// How many redirects (MOVED, ASK) one command follows before its last reply stands: a slot map
// that changes this often is a cluster being reconfigured faster than it settles.
constexpr int k_max_redirects = 16;
// How many times one script call is sent: FCALL, FCALL after loading the library, EVALSHA,
// EVAL, and once more with a cluster's keys.
constexpr int k_script_rounds = 5;
// The flags a script gets as its last argument, named "flags" (see lua/lib/call.lua).
enum ScriptFlag : int {
    by_body = 1,        // sent with EVAL: its text, not its SHA1
    asked = 2,          // resent to a cluster node importing the slot, after ASKING
    keys_span_slots = 4 // its keys hash to several slots: a Redis Cluster would have refused it
                        // (CROSSSLOT), so the server that runs it is not one
};

bool span_slots(const std::vector<std::string>& keys) {
    return std::any_of(keys.begin(), keys.end(), [&](const std::string& key) {
        return key_slot(key) != key_slot(keys.front());
    });
}

// How a script call is sent: as a function of redsem's library (FCALL), by its SHA1
// (EVALSHA), or by its text (EVAL).
enum class Way { function, sha, body };

Way first_way(const ScriptCall& call, bool functions) {
    switch (call.send) {
    case ScriptCall::Send::body_only:
        return Way::body;
    case ScriptCall::Send::sha_only:
        return Way::sha;
    case ScriptCall::Send::sha_then_body:
        break;
    }
    return functions && call.script.function != nullptr ? Way::function : Way::sha;
}

// FCALL, EVALSHA or EVAL of `call` with `keys` (its keys or its cluster keys), and last the
// argument "flags" and its value (ScriptFlag).
std::vector<std::string> script_argv(const ScriptCall& call, const std::vector<std::string>& keys,
                                     Way way) {
    std::vector<std::string> argv;
    argv.reserve(5 + keys.size() + call.args.size());
    switch (way) {
    case Way::function:
        argv.emplace_back("FCALL");
        argv.emplace_back(call.script.function);
        break;
    case Way::sha:
        argv.emplace_back("EVALSHA");
        argv.emplace_back(call.script.sha1);
        break;
    case Way::body:
        argv.emplace_back("EVAL");
        argv.emplace_back(call.script.body);
        break;
    }
    argv.push_back(std::to_string(keys.size()));
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), call.args.begin(), call.args.end());
    const int flags = (span_slots(keys) ? keys_span_slots : 0) | (way == Way::body ? by_body : 0);
    argv.emplace_back("flags");
    argv.push_back(std::to_string(flags));
    return argv;
}

// A copy of `argv` for a node that is importing its slot (after ASKING): a script learns from
// its argument "flags" that keys it builds itself may still be on the node the slot comes from.
std::vector<std::string> mark_asked(const std::vector<std::string>& argv) {
    std::vector<std::string> marked = argv;
    if (!marked.empty() &&
        (marked[0] == "FCALL" || marked[0] == "EVALSHA" || marked[0] == "EVAL")) {
        std::string& flags = marked.back();
        flags = std::to_string(std::stoi(flags) | asked);
    }
    return marked;
}

// The server lacks the function called (it never loaded redsem's library, or lost it).
bool is_missing_function(const Reply& reply) {
    return reply.is_error() && reply.text.rfind("ERR Function not found", 0) == 0;
}

// FCALL itself is refused: the user's ACL lacks it, or the server has no such command (before
// Redis 7, or renamed away). Not a refusal from inside a function, which names another command.
bool is_fcall_refused(const Reply& reply) {
    if (!reply.is_error() || !(is_error_code(reply, "NOPERM") ||
                               reply.text.find("unknown command") != std::string::npos)) {
        return false;
    }
    // "... run the 'fcall' command" (ACL); "unknown command 'FCALL'" (Redis 7, renamed away),
    // "unknown command `FCALL`" (Redis 6.2).
    for (const std::string_view name : {"'fcall'", "'FCALL'", "`FCALL`"}) {
        if (reply.text.find(name) != std::string::npos) {
            return true;
        }
    }
    return false;
}

} // namespace

Connection::Connection(ConnectOptions options)
    : m_options(std::move(options)), m_topology(make_topology(m_options)),
      m_functions(m_options.functions) {}

Connection::~Connection() = default;
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;

Topology& Connection::topology() {
    if (auto next = m_topology->take_successor()) {
        m_topology = std::move(next);
    }
    return *m_topology;
}

void Connection::connect() {
    topology().connect();
}

void Connection::disconnect() noexcept {
    m_topology->link().close();
}

bool Connection::connected() const noexcept {
    return m_topology->link().is_open();
}

void Connection::set_command_timeout(Milliseconds timeout) noexcept {
    m_options.command_timeout = timeout;
    m_topology->set_command_timeout(timeout);
}

std::string Connection::server() const {
    return m_topology->link().server().describe();
}

std::string Connection::describe() const {
    return m_topology->describe();
}

bool Connection::primary_changed(Milliseconds fresh) {
    return topology().primary_changed(fresh);
}

Milliseconds Connection::outage_window() const noexcept {
    return m_topology->outage_window();
}

std::vector<Endpoint> Connection::primaries() {
    std::vector<Endpoint> nodes = topology().primaries();
    topology(); // a server that turned out to be a cluster node hands over now
    return nodes;
}

void Connection::pin(const Endpoint& node) {
    topology().pin(node);
}

long long Connection::wait_for_replicas(long long replicas, Milliseconds timeout) {
    const Reply reply = command(
        std::vector<std::string>{"WAIT", std::to_string(replicas), std::to_string(timeout.count())},
        timeout);
    if (reply.is_error()) {
        throw_reply_error(reply.text);
    }
    return reply.as_integer();
}

std::optional<std::chrono::steady_clock::time_point> Connection::latest_reply() const {
    if (!m_retries_until) {
        return std::nullopt;
    }
    // The caller's deadline, and one connect timeout for the last request's answer.
    return std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(*m_retries_until -
                                                                           BootClock::now()) +
           m_options.connect_timeout;
}

void Connection::bound_replies() noexcept {
    if (m_topology) {
        m_topology->link().set_latest_reply(latest_reply());
    }
}

std::vector<Reply> Connection::send_all(const std::vector<Outgoing>& batch,
                                        Milliseconds blocking_for, int interrupt_fd) {
    std::vector<Reply> replies(batch.size());
    std::vector<std::optional<Hop>> hops(batch.size());
    std::vector<std::size_t> todo(batch.size());
    std::iota(todo.begin(), todo.end(), std::size_t{0});
    // A cluster mid-migration or mid-failover answers TRYAGAIN or CLUSTERDOWN: resent after
    // pauses, within the command timeout and the caller's deadline.
    RetryPolicy pauses(m_options.command_timeout, RetryPolicy::k_cluster_pauses, true);
    pauses.set_deadline(m_retries_until);
    // Redirects followed since the last pause: a migration bounces a command between ASK and
    // TRYAGAIN until it ends, which only the deadline bounds.
    int redirects = 0;
    topology().begin_batch();
    while (!todo.empty()) {
        topology().begin_round();
        std::vector<std::size_t> again;
        bool pause_first = false;
        while (!todo.empty()) {
            // The commands that go where the first one goes, in one write.
            auto destination = [&](std::size_t i) {
                return hops[i] ? std::optional<Endpoint>(hops[i]->to)
                               : topology().destination(*batch[i].key);
            };
            const std::optional<Endpoint> where = destination(todo.front());
            std::vector<std::size_t> group;
            std::vector<std::size_t> rest;
            for (const std::size_t i : todo) {
                const std::optional<Endpoint> to = destination(i);
                const bool same =
                    to.has_value() == where.has_value() && (!to || same_node(*to, *where));
                (same ? group : rest).push_back(i);
            }
            std::vector<Reply> got;
            try {
                topology().go_to(where);
                got = send_group(batch, group, hops, blocking_for, interrupt_fd);
            } catch (const Error&) {
                topology().failed(where);
            }
            for (std::size_t k = 0; k < group.size(); ++k) {
                const std::size_t i = group[k];
                replies[i] = std::move(got[k]);
                hops[i].reset();
                if (!replies[i].is_error()) {
                    continue;
                }
                const ReplyVerdict verdict = topology().judge(replies[i]);
                if (verdict.kind == ReplyVerdict::Kind::pause) {
                    pause_first = true;
                    again.push_back(i);
                } else if (verdict.kind != ReplyVerdict::Kind::stands &&
                           redirects < k_max_redirects) {
                    if (verdict.kind == ReplyVerdict::Kind::redirect) {
                        hops[i] = Hop{.to = verdict.to, .asking = verdict.asking};
                    }
                    again.push_back(i);
                }
                // else the last redirect stands
            }
            todo = std::move(rest);
        }
        if (pause_first) {
            const std::optional<Milliseconds> pause = pauses.after(Transience::transient);
            if (!pause) {
                break; // the last replies (TRYAGAIN, CLUSTERDOWN, ASK) stand
            }
            std::this_thread::sleep_for(*pause);
            redirects = 0;
        } else if (!again.empty()) {
            ++redirects;
        }
        todo = std::move(again);
    }
    return replies;
}

std::vector<Reply> Connection::send_group(const std::vector<Outgoing>& batch,
                                          const std::vector<std::size_t>& indices,
                                          const std::vector<std::optional<Hop>>& hops,
                                          Milliseconds blocking_for, int interrupt_fd) {
    ServerConnection& link = m_topology->link();
    bound_replies();
    // A blocking command first: make sure the server answers at all.
    link.check_answers(blocking_for, interrupt_fd);
    const auto asking = [&](std::size_t i) { return hops[i] && hops[i]->asking; };
    if (indices.size() == 1 && batch[indices.front()].atomic) {
        const std::size_t i = indices.front();
        return {send_transaction(*batch[i].atomic, asking(i), interrupt_fd)};
    }
    for (const std::size_t i : indices) {
        if (asking(i)) {
            link.append({"ASKING"});
            link.append(mark_asked(*batch[i].argv));
        } else {
            link.append(*batch[i].argv);
        }
    }
    link.flush();
    std::vector<Reply> replies;
    replies.reserve(indices.size());
    for (const std::size_t i : indices) {
        if (asking(i)) {
            Reply ok = link.read_reply(Milliseconds{0}, interrupt_fd);
            if (ok.is_error()) {
                replies.push_back(std::move(ok));
                link.read_reply(blocking_for, interrupt_fd); // the command's, not run
                continue;
            }
        }
        // Each reply gets the full command timeout: a batch is many small commands.
        replies.push_back(link.read_reply(blocking_for, interrupt_fd));
    }
    return replies;
}

Reply Connection::send_transaction(const std::vector<std::vector<std::string>>& commands,
                                   bool asking, int interrupt_fd) {
    ServerConnection& link = m_topology->link();
    bound_replies();
    // MULTI on its own first: were it refused (an ACL without it), the commands sent behind it
    // would run one by one, not as one.
    if (asking) {
        // Kept by the server for the whole transaction (ASKING before MULTI).
        link.append({"ASKING"});
    }
    link.append({"MULTI"});
    link.flush();
    if (asking) {
        Reply ok = link.read_reply(Milliseconds{0}, interrupt_fd);
        if (ok.is_error()) {
            link.read_reply(Milliseconds{0}, interrupt_fd); // MULTI's
            return ok;
        }
    }
    Reply multi = link.read_reply(Milliseconds{0}, interrupt_fd);
    if (multi.is_error()) {
        return multi;
    }
    for (const std::vector<std::string>& argv : commands) {
        link.append(asking ? mark_asked(argv) : argv);
    }
    link.append({"EXEC"});
    link.flush();
    std::optional<Reply> refused;
    for (std::size_t i = 0; i < commands.size(); ++i) {
        Reply queued = link.read_reply(Milliseconds{0}, interrupt_fd);
        if (queued.is_error() && !refused) {
            refused = std::move(queued);
        }
    }
    Reply exec = link.read_reply(Milliseconds{0}, interrupt_fd);
    // A refusal names its cause (NOPERM, OOM, MOVED ...); EXEC then says only EXECABORT. EXEC
    // refused itself (an ACL without it) says "EXECABORT ... because of: NOPERM ...".
    if (refused) {
        return std::move(*refused);
    }
    constexpr std::string_view k_because = "because of: ";
    if (is_error_code(exec, "EXECABORT") && exec.text.find(k_because) != std::string::npos) {
        exec.text.erase(0, exec.text.find(k_because) + k_because.size());
    }
    return exec;
}

Reply Connection::command(const Command& command, Milliseconds blocking_for, int interrupt_fd) {
    return std::move(
        send_all({Outgoing{&command.key, &command.argv}}, blocking_for, interrupt_fd).front());
}

Reply Connection::command(const std::vector<std::string>& argv, Milliseconds blocking_for,
                          int interrupt_fd) {
    static const std::string no_key;
    return std::move(send_all({Outgoing{&no_key, &argv}}, blocking_for, interrupt_fd).front());
}

Reply Connection::call(const Command& command) {
    return call(command.argv);
}

Reply Connection::call(const std::vector<std::string>& argv) {
    Reply reply = command(argv);
    if (reply.is_error()) {
        throw_reply_error(reply.text);
    }
    return reply;
}

std::vector<Reply> Connection::pipeline(const std::vector<Command>& commands) {
    std::vector<Outgoing> batch;
    batch.reserve(commands.size());
    for (const Command& command : commands) {
        batch.push_back(Outgoing{&command.key, &command.argv});
    }
    return send_all(batch);
}

Reply Connection::eval(ScriptCall call) {
    const Script& script = call.script;
    std::vector<ScriptCall> one;
    one.push_back(std::move(call));
    Reply reply = std::move(eval_pipeline(one).front());
    if (reply.is_error()) {
        throw_script_error(script, reply.text);
    }
    return reply;
}

struct Connection::Attempt {
    Way way;
    bool loaded = false;       // the library was loaded for it (FUNCTION LOAD)
    bool cluster_keys = false; // sent with its cluster keys
};

bool Connection::retry_script(const ScriptCall& call, Attempt& attempt, const Reply& reply,
                              const std::string& route) {
    if (attempt.way == Way::function) {
        if (is_fcall_refused(reply)) {
            m_functions = false;
            attempt.way = Way::sha;
            return true;
        }
        if (is_error_code(reply, "READONLY")) {
            // A replica (status may read there) refuses every function that may write; a
            // script sent by EVAL runs until it writes.
            attempt.way = Way::sha;
            return true;
        }
        if (is_missing_function(reply)) {
            // Where loading does not help (the library is refused, or a node importing the
            // slot lacks it while the load went to the slot's owner), the script itself goes.
            if (attempt.loaded || !load_library(*call.script.library, route)) {
                attempt.way = Way::sha;
            }
            attempt.loaded = true;
            return true;
        }
        return false;
    }
    if (attempt.way == Way::sha && is_error_code(reply, "NOSCRIPT") &&
        call.send == ScriptCall::Send::sha_then_body) {
        attempt.way = Way::body;
        return true;
    }
    return false;
}

bool Connection::load_library(const FunctionLibrary& library, const std::string& route) {
    const std::vector<std::string> argv{"FUNCTION", "LOAD", library.code};
    const Reply reply = std::move(send_all({Outgoing{&route, &argv}}).front());
    if (!reply.is_error() || reply.text.find("already exists") != std::string::npos) {
        return true; // loaded now, or by another client meanwhile
    }
    if (is_error_code(reply, "NOPERM") || reply.text.find("unknown") != std::string::npos) {
        m_functions = false; // no FUNCTION LOAD for this user, or no Functions at all
    }
    // Anything else (out of memory, a read-only replica) the script meets as well, and
    // reports.
    return false;
}

std::vector<Reply> Connection::eval_pipeline(const std::vector<ScriptCall>& calls) {
    std::vector<Reply> replies(calls.size());
    std::vector<Attempt> attempts;
    attempts.reserve(calls.size());
    for (const ScriptCall& call : calls) {
        attempts.push_back(Attempt{first_way(call, m_functions)});
    }
    std::vector<std::size_t> todo(calls.size());
    std::iota(todo.begin(), todo.end(), std::size_t{0});
    // At most k_script_rounds: with the cluster's keys after CROSSSLOT; after "Function not
    // found", once more with the library loaded, then by EVALSHA; with the body after
    // NOSCRIPT (the server lacks the script: it restarted, or never ran it).
    for (int round = 0; round < k_script_rounds && !todo.empty(); ++round) {
        std::vector<std::vector<std::string>> argvs;
        argvs.reserve(todo.size());
        std::vector<Outgoing> batch;
        batch.reserve(todo.size());
        for (const std::size_t i : todo) {
            const ScriptCall& call = calls[i];
            const bool cluster = topology().wants_cluster_keys() && !call.cluster_keys.empty();
            attempts[i].cluster_keys = cluster;
            const std::vector<std::string>& keys = cluster ? call.cluster_keys : call.keys;
            argvs.push_back(script_argv(call, keys, attempts[i].way));
            batch.push_back(Outgoing{&keys.front(), &argvs.back()});
        }
        std::vector<Reply> got = send_all(batch);
        std::vector<std::size_t> again;
        for (std::size_t k = 0; k < todo.size(); ++k) {
            const std::size_t i = todo[k];
            replies[i] = std::move(got[k]);
            const Reply& reply = replies[i];
            if (!reply.is_error()) {
                continue;
            }
            if (is_error_code(reply, "CROSSSLOT") && !attempts[i].cluster_keys &&
                topology().wants_cluster_keys() && !calls[i].cluster_keys.empty()) {
                // A cluster after all (send_all() handed over): its keys from now on.
                again.push_back(i);
            } else if (retry_script(calls[i], attempts[i], reply, *batch[k].key)) {
                again.push_back(i);
            }
        }
        todo = std::move(again);
    }
    return replies;
}

std::vector<Reply> Connection::eval_atomically(const std::vector<ScriptCall>& calls) {
    std::vector<Attempt> attempts;
    attempts.reserve(calls.size());
    for (const ScriptCall& call : calls) {
        attempts.push_back(Attempt{first_way(call, m_functions)});
    }
    // At most k_script_rounds, as in eval_pipeline().
    bool cluster_keys_tried = false;
    for (int round = 1;; ++round) {
        const bool cluster = topology().wants_cluster_keys() && !calls.front().cluster_keys.empty();
        cluster_keys_tried = cluster_keys_tried || cluster;
        std::vector<std::vector<std::string>> argvs;
        argvs.reserve(calls.size());
        for (std::size_t i = 0; i < calls.size(); ++i) {
            const ScriptCall& call = calls[i];
            const bool own = cluster && !call.cluster_keys.empty();
            argvs.push_back(
                script_argv(call, own ? call.cluster_keys : call.keys, attempts[i].way));
        }
        const std::string& route =
            cluster ? calls.front().cluster_keys.front() : calls.front().keys.front();
        Reply reply = std::move(send_all({Outgoing{&route, nullptr, &argvs}}).front());
        if (reply.is_error()) {
            if (round < k_script_rounds && is_error_code(reply, "CROSSSLOT") &&
                !cluster_keys_tried && topology().wants_cluster_keys() &&
                !calls.front().cluster_keys.empty()) {
                continue; // a cluster after all (send_all() handed over)
            }
            if (round < k_script_rounds && is_fcall_refused(reply)) {
                // FCALL refused as the transaction was queued: none of it ran.
                for (std::size_t i = 0; i < calls.size(); ++i) {
                    retry_script(calls[i], attempts[i], reply, route);
                }
                continue;
            }
            return std::vector<Reply>(calls.size(), reply);
        }
        std::vector<Reply> replies = std::move(reply.elements);
        if (replies.size() != calls.size()) {
            throw InternalError(fmt::format("EXEC answered {} replies for {} commands",
                                            replies.size(), calls.size()));
        }
        bool again = false;
        for (std::size_t i = 0; i < calls.size(); ++i) {
            again =
                (replies[i].is_error() && retry_script(calls[i], attempts[i], replies[i], route)) ||
                again;
        }
        if (!again || round == k_script_rounds) {
            return replies;
        }
    }
}

void throw_script_error(const Script& script, const std::string& error) {
    const ReplyErrorMeaning meaning = classify_reply_error(error);
    if (meaning.code == ExitCode::internal) {
        throw InternalError(
            fmt::format("the {} script failed in Redis: {}", script.name, printable(error, 300)));
    }
    throw Error(meaning.code, meaning.message, meaning.transience);
}

} // namespace redsem
