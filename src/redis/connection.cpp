#include "redis/connection.hpp"

#include "redis/sentinel.hpp"
#include "util/duration.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <numeric>
#include <thread>

namespace redsem {

using Clock = std::chrono::steady_clock;

namespace {

// How many redirects (MOVED, ASK) one command follows before its last reply stands: a slot map
// that changes this often is a cluster being reconfigured faster than it settles.
constexpr int k_max_redirects = 16;
// The first pause before resending after TRYAGAIN or CLUSTERDOWN; it doubles up to the last.
constexpr Milliseconds k_first_cluster_pause{10};
constexpr Milliseconds k_max_cluster_pause{500};

bool starts_with(std::string_view text, std::string_view prefix) {
    return text.substr(0, prefix.size()) == prefix;
}

// The flags a script gets as its last argument (see lua/lib/call.lua).
enum ScriptFlag : int {
    sent_by_eval = 1,   // the server did not have the script cached
    asked = 2,          // resent to a cluster node importing the slot, after ASKING
    keys_span_slots = 4 // its keys hash to several slots: a Redis Cluster would have refused it
                        // (CROSSSLOT), so the server that runs it is not one
};

bool span_slots(const std::vector<std::string>& keys) {
    return std::any_of(keys.begin(), keys.end(), [&](const std::string& key) {
        return key_slot(key) != key_slot(keys.front());
    });
}

// EVALSHA (by_sha) or EVAL of `call` with `keys` (its keys or its cluster keys), and a last
// argument of flags (ScriptFlag).
std::vector<std::string> script_argv(const ScriptCall& call, const std::vector<std::string>& keys,
                                     bool by_sha) {
    std::vector<std::string> argv;
    argv.reserve(4 + keys.size() + call.args.size());
    argv.emplace_back(by_sha ? "EVALSHA" : "EVAL");
    argv.emplace_back(by_sha ? call.script.sha1 : call.script.body);
    argv.push_back(std::to_string(keys.size()));
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), call.args.begin(), call.args.end());
    const int flags = (by_sha ? 0 : sent_by_eval) | (span_slots(keys) ? keys_span_slots : 0);
    argv.push_back(std::to_string(flags));
    return argv;
}

// A copy of `argv` for a node that is importing its slot (after ASKING): a script learns from
// its last argument that keys it builds itself may still be on the node the slot comes from.
std::vector<std::string> mark_asked(const std::vector<std::string>& argv) {
    std::vector<std::string> marked = argv;
    if (!marked.empty() && (marked[0] == "EVALSHA" || marked[0] == "EVAL")) {
        std::string& flags = marked.back();
        flags = std::to_string(std::stoi(flags) | asked);
    }
    return marked;
}

Reply convert(const redisReply& raw) {
    Reply reply;
    switch (raw.type) {
    case REDIS_REPLY_STATUS:
        reply.type = Reply::Type::status;
        reply.text.assign(raw.str, raw.len);
        break;
    case REDIS_REPLY_ERROR:
        reply.type = Reply::Type::error;
        reply.text.assign(raw.str, raw.len);
        break;
    case REDIS_REPLY_STRING:
        reply.type = Reply::Type::string;
        reply.text.assign(raw.str, raw.len);
        break;
    case REDIS_REPLY_INTEGER:
        reply.type = Reply::Type::integer;
        reply.integer = raw.integer;
        break;
    case REDIS_REPLY_ARRAY:
        reply.type = Reply::Type::array;
        reply.elements.reserve(raw.elements);
        for (std::size_t i = 0; i < raw.elements; ++i) {
            reply.elements.push_back(convert(*raw.element[i]));
        }
        break;
    default:
        reply.type = Reply::Type::nil;
        break;
    }
    return reply;
}

// Through sentinels, a server that still is not the master after discovery: the sentinels
// have not caught up with a failover yet.
[[noreturn]] void throw_stale_master(const std::string& error) {
    throw Error(ExitCode::unavailable,
                fmt::format("the server the sentinels name as the master is not one ({}): a "
                            "failover under way?",
                            printable(error, 100)),
                Transience::transient);
}

} // namespace

Connection::Connection(ConnectOptions options)
    : m_options(std::move(options)), m_reader(nullptr, redisReaderFree) {}

Connection::~Connection() = default;
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;

void Connection::disconnect() noexcept {
    m_transport.reset();
    m_reader.reset();
    m_output.clear();
}

void Connection::connect() {
    if (m_transport) {
        if (through_sentinels()) {
            master_moved(k_master_recheck);
        }
        if (m_transport) {
            return;
        }
    }
    if (through_sentinels()) {
        open_master(find_master(m_options.url.sentinels.size(), m_options.connect_timeout));
    } else {
        open(m_home ? m_options.url.at(*m_home) : m_options.url);
    }
}

void Connection::go_to(const std::optional<Endpoint>& node) {
    if (!node) {
        connect();
        return;
    }
    if (m_transport && same_node(endpoint(), *node)) {
        return;
    }
    disconnect();
    open(m_options.url.at(*node));
}

void Connection::use_node(const Endpoint& node) {
    m_home = node;
    go_to(node);
}

std::vector<Endpoint> Connection::cluster_primaries() {
    if (through_sentinels() || m_options.url.kind == RedisUrl::Kind::unix_socket) {
        return {};
    }
    if (m_slots && m_slots_stale) {
        refresh_slots();
    }
    if (!m_slots) {
        connect();
        const Reply reply = exchange({"CLUSTER", "SLOTS"}, Milliseconds{0}, -1);
        if (reply.is_error()) {
            if (reply.text.find("cluster support disabled") != std::string::npos) {
                return {};
            }
            throw_reply_error(reply.text);
        }
        m_slots = SlotMap::from_cluster_slots(reply, endpoint());
    }
    return m_slots->primaries();
}

void Connection::refresh_slots() {
    std::vector<Endpoint> candidates{Endpoint{m_options.url.host, m_options.url.port}};
    for (const Endpoint& node : m_slots->nodes()) {
        if (!same_node(node, candidates.front())) {
            candidates.push_back(node);
        }
    }
    for (const Endpoint& node : candidates) {
        try {
            go_to(node);
            const Reply reply = exchange({"CLUSTER", "SLOTS"}, Milliseconds{0}, -1);
            if (!reply.is_error()) {
                m_slots = SlotMap::from_cluster_slots(reply, node);
                m_slots_stale = false;
                return;
            }
        } catch (const Error&) {
            disconnect(); // this node is down too: ask the next
        }
    }
}

bool Connection::master_moved(Milliseconds fresh) {
    if (!through_sentinels() || !m_transport || Clock::now() - m_checked_at < fresh) {
        return false;
    }
    // One sentinel, briefly: a renewal must not wait for sentinels that do not answer.
    Endpoint master;
    try {
        master = find_master(1, std::min(m_options.connect_timeout, k_recheck_timeout));
    } catch (const Error&) {
        m_checked_at = Clock::now(); // the next one is asked a while later
        return false;                // meanwhile, stay with the master we have
    }
    if (master.host == m_server.host && master.port == m_server.port) {
        return false;
    }
    disconnect();
    return true;
}

Endpoint Connection::find_master(std::size_t tries, Milliseconds timeout) {
    const auto asked_at = Clock::now();
    const Endpoint master = ask_sentinels(m_options, m_sentinel, tries, timeout);
    m_checked_at = asked_at;
    return master;
}

void Connection::open(const RedisUrl& server) {
    m_server = server;
    m_first_reply_by = Clock::now() + m_options.connect_timeout;
    ReaderPtr reader(redisReaderCreate(), redisReaderFree);
    if (!reader) {
        throw InternalError("out of memory while connecting to Redis");
    }
    m_transport = Transport::open(server, m_options.tls, m_options.connect_timeout);
    m_reader = std::move(reader);
    try {
        handshake();
    } catch (...) {
        disconnect();
        throw;
    }
}

void Connection::open_master(const Endpoint& master) {
    const std::string& name = m_options.url.master_name;
    // The sentinels may not have noticed yet that the master died, or that another took over.
    auto failover_under_way = [&](const std::string& what) {
        disconnect();
        return Error(ExitCode::unavailable,
                     fmt::format("the sentinels name {} as the master '{}', but {} (a failover "
                                 "under way?)",
                                 master.describe(), printable(name), what),
                     Transience::transient);
    };
    try {
        open(m_options.url.at(master));
    } catch (const Error& error) {
        if (error.transience() != Transience::unreachable &&
            error.transience() != Transience::broken) {
            throw; // refused (a password, a certificate): the same on any server
        }
        throw failover_under_way(fmt::format("it cannot be reached ({})", error.what()));
    }
    const Reply role = exchange({"ROLE"}, Milliseconds{0}, -1);
    if (role.is_error()) {
        disconnect();
        throw_reply_error(role.text);
    }
    const std::string& kind = role.at(0).as_string();
    if (kind != "master") {
        throw failover_under_way(fmt::format("its role is '{}'", printable(kind)));
    }
}

bool Connection::from_former_master(const Reply& reply) {
    if ((!through_sentinels() && !m_slots) || !reply.is_error()) {
        return false;
    }
    const bool former = starts_with(reply.text, "READONLY") || starts_with(reply.text, "UNBLOCKED");
    if (former) {
        disconnect();
        m_slots_stale = m_slots.has_value();
    }
    return former;
}

Milliseconds Connection::outage_window() const noexcept {
    // A cluster's failover takes its cluster-node-timeout and an election, as Sentinel's does.
    return through_sentinels() || m_slots ? k_failover_window : k_reconnect_window;
}

long long Connection::wait_for_replicas(long long replicas, Milliseconds timeout) {
    const Reply reply = command(std::vector<std::string>{"WAIT", std::to_string(replicas),
                                                         std::to_string(timeout.count())},
                                timeout);
    if (reply.is_error()) {
        throw_reply_error(reply.text);
    }
    return reply.as_integer();
}

void Connection::handshake() {
    const RedisUrl& url = m_server;
    if (url.password || url.user) {
        std::vector<std::string> auth{"AUTH"};
        if (url.user) {
            auth.push_back(*url.user);
        }
        auth.push_back(url.password.value_or(""));
        const Reply reply = exchange(auth, Milliseconds{0}, -1);
        if (reply.is_error()) {
            throw_reply_error(reply.text);
        }
    }
    if (url.db != 0) {
        const Reply reply = exchange({"SELECT", std::to_string(url.db)}, Milliseconds{0}, -1);
        if (reply.is_error()) {
            if (reply.text.find("DB index") != std::string::npos) {
                throw UsageError(fmt::format("Redis at {} has no database {} ({})", url.describe(),
                                             url.db, printable(reply.text, 100)));
            }
            throw_reply_error(reply.text);
        }
    }
}

void Connection::append(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    argv.reserve(args.size());
    lengths.reserve(args.size());
    for (const std::string& arg : args) {
        argv.push_back(arg.data());
        lengths.push_back(arg.size());
    }
    char* formatted = nullptr;
    const int length = redisFormatCommandArgv(&formatted, static_cast<int>(args.size()),
                                              argv.data(), lengths.data());
    if (length < 0) {
        throw InternalError("out of memory while preparing a Redis command");
    }
    m_output.append(formatted, static_cast<std::size_t>(length));
    redisFreeCommand(formatted);
}

void Connection::flush() {
    try {
        m_transport->write_all(m_output, Clock::now() + m_options.command_timeout);
    } catch (...) {
        disconnect();
        throw;
    }
    m_output.clear();
}

Reply Connection::read_reply(Clock::time_point deadline, int interrupt_fd) {
    const std::string where = m_server.describe();
    void* raw = nullptr;
    for (;;) {
        if (redisReaderGetReply(m_reader.get(), &raw) != REDIS_OK) {
            const std::string reason = m_reader->errstr;
            disconnect();
            throw ConnectionLost(fmt::format("the server at {} did not answer like a Redis "
                                             "server ({})",
                                             where, printable(reason, 100)));
        }
        if (raw != nullptr) {
            break;
        }
        char buffer[16 * 1024];
        ReadResult read;
        try {
            read = m_transport->read_some(buffer, sizeof(buffer), deadline, interrupt_fd);
        } catch (const ConnectionLost& error) {
            const bool never_answered = m_first_reply_by.has_value();
            disconnect();
            if (never_answered && !plain_to_tls_hint().empty()) {
                // Still "broken": what we sent may have run before a CLIENT KILL or a restart.
                throw ConnectionLost(fmt::format("{}{}", error.what(), plain_to_tls_hint()));
            }
            throw;
        } catch (...) {
            disconnect();
            throw;
        }
        switch (read.status) {
        case ReadResult::Status::data:
            if (redisReaderFeed(m_reader.get(), buffer, read.size) != REDIS_OK) {
                disconnect();
                throw InternalError("out of memory while reading a Redis reply");
            }
            break;
        case ReadResult::Status::interrupted:
            disconnect();
            throw WaitInterrupted();
        case ReadResult::Status::closed: {
            const bool never_answered = m_first_reply_by.has_value();
            disconnect();
            if (never_answered) {
                // What we sent may have run (a CLIENT KILL, a restart): "broken", as below.
                throw ConnectionLost(
                    fmt::format("Redis at {} closed the connection before answering{}", where,
                                plain_to_tls_hint()));
            }
            throw ConnectionLost(
                fmt::format("Redis at {} closed the connection while reading a reply", where));
        }
        case ReadResult::Status::timed_out: {
            // The connect timeout ran out, not the command's own (which may be the shorter).
            const bool never_answered = m_first_reply_by && deadline >= *m_first_reply_by;
            disconnect();
            if (never_answered) {
                throw UnavailableError(
                    fmt::format("Redis at {} accepted the connection but did not answer within {} "
                                "(--connect-timeout)",
                                where, format_duration(m_options.connect_timeout)));
            }
            throw ConnectionLost(fmt::format("Redis at {} did not answer in time", where));
        }
        }
    }
    m_first_reply_by.reset();
    std::unique_ptr<redisReply, void (*)(void*)> reply(static_cast<redisReply*>(raw),
                                                       freeReplyObject);
    return convert(*reply);
}

Reply Connection::exchange(const std::vector<std::string>& args, Milliseconds budget,
                           int interrupt_fd) {
    if (m_first_reply_by && budget.count() > 0) {
        // A blocking command first: make sure the server answers at all.
        const Reply pong = exchange({"PING"}, Milliseconds{0}, interrupt_fd);
        if (pong.is_error()) {
            throw_reply_error(pong.text);
        }
    }
    append(args);
    flush();
    return read_reply(reply_deadline(budget), interrupt_fd);
}

std::string_view Connection::plain_to_tls_hint() const {
    // A TLS port resets a plain connection at its first request.
    const bool plain_tcp = !m_server.tls && m_server.kind == RedisUrl::Kind::tcp;
    return plain_tcp ? " (a TLS port? use rediss://)" : "";
}

Connection::Clock::time_point Connection::reply_deadline(Milliseconds budget) const {
    const auto deadline = Clock::now() + m_options.command_timeout + budget;
    return m_first_reply_by ? std::min(deadline, *m_first_reply_by) : deadline;
}

std::optional<Endpoint> Connection::destination(const Outgoing& command,
                                                const std::optional<Hop>& hop) const {
    if (hop) {
        return hop->to;
    }
    if (command.key->empty()) {
        return m_home;
    }
    if (m_slots) {
        if (const Endpoint* owner = m_slots->owner(key_slot(*command.key))) {
            return *owner;
        }
    }
    return std::nullopt;
}

std::vector<Reply> Connection::send_all(const std::vector<Outgoing>& batch, Milliseconds budget,
                                        int interrupt_fd) {
    std::vector<Reply> replies(batch.size());
    std::vector<std::optional<Hop>> hops(batch.size());
    std::vector<std::size_t> todo(batch.size());
    std::iota(todo.begin(), todo.end(), std::size_t{0});
    const auto give_up_at = Clock::now() + m_options.command_timeout;
    Milliseconds pause = k_first_cluster_pause;
    bool found_master_anew = false;
    // Redirects followed since the last pause: a migration bounces a command between ASK and
    // TRYAGAIN until it ends, which only the deadline bounds.
    int redirects = 0;
    while (!todo.empty()) {
        if (m_slots && m_slots_stale) {
            refresh_slots();
        }
        std::vector<std::size_t> again;
        bool pause_first = false;
        while (!todo.empty()) {
            // The commands that go where the first one goes, in one write.
            const std::optional<Endpoint> where = destination(batch[todo.front()], hops[todo.front()]);
            std::vector<std::size_t> group;
            std::vector<std::size_t> rest;
            for (const std::size_t i : todo) {
                const std::optional<Endpoint> to = destination(batch[i], hops[i]);
                const bool same = to.has_value() == where.has_value() &&
                                  (!to || same_node(*to, *where));
                (same ? group : rest).push_back(i);
            }
            std::vector<Reply> got;
            try {
                go_to(where);
                got = send_group(batch, group, hops, budget, interrupt_fd);
            } catch (const Error& error) {
                m_slots_stale = m_slots.has_value(); // a replica may have taken over
                if (where && error.transience() == Transience::unreachable) {
                    // A node the cluster named (the seed was reached): it died, and a replica
                    // will take over, or the map is being refreshed.
                    throw Error(ExitCode::unavailable,
                                fmt::format("{} (a Redis Cluster failover under way?)",
                                            error.what()),
                                Transience::transient);
                }
                throw;
            }
            for (std::size_t k = 0; k < group.size(); ++k) {
                const std::size_t i = group[k];
                replies[i] = std::move(got[k]);
                const Reply& reply = replies[i];
                hops[i].reset();
                if (!reply.is_error()) {
                    continue;
                }
                if (const auto redirect = parse_redirect(reply.text, endpoint())) {
                    if (redirects >= k_max_redirects) {
                        continue; // the last redirect stands
                    }
                    const bool moved = redirect->kind == Redirect::Kind::moved;
                    if (moved) {
                        if (!m_slots) {
                            m_slots.emplace(); // a cluster after all: route from now on
                        }
                        m_slots->assign(redirect->slot, redirect->to);
                    }
                    hops[i] = Hop{.to = redirect->to, .asking = !moved};
                    again.push_back(i);
                } else if (starts_with(reply.text, "TRYAGAIN") ||
                           starts_with(reply.text, "CLUSTERDOWN")) {
                    pause_first = true;
                    again.push_back(i);
                } else if (redirects < k_max_redirects && from_former_master(reply)) {
                    if (through_sentinels() && found_master_anew) {
                        throw_stale_master(reply.text);
                    }
                    found_master_anew = true;
                    again.push_back(i);
                }
            }
            todo = std::move(rest);
        }
        if (pause_first) {
            if (Clock::now() + pause >= give_up_at) {
                break; // the last replies (TRYAGAIN, CLUSTERDOWN, ASK) stand
            }
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, k_max_cluster_pause);
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
                                          Milliseconds budget, int interrupt_fd) {
    if (m_first_reply_by && budget.count() > 0) {
        // A blocking command first: make sure the server answers at all.
        const Reply pong = exchange({"PING"}, Milliseconds{0}, interrupt_fd);
        if (pong.is_error()) {
            throw_reply_error(pong.text);
        }
    }
    const auto asking = [&](std::size_t i) { return hops[i] && hops[i]->asking; };
    for (const std::size_t i : indices) {
        if (asking(i)) {
            append({"ASKING"});
            append(mark_asked(*batch[i].argv));
        } else {
            append(*batch[i].argv);
        }
    }
    flush();
    std::vector<Reply> replies;
    replies.reserve(indices.size());
    for (const std::size_t i : indices) {
        if (asking(i)) {
            Reply ok = read_reply(reply_deadline(Milliseconds{0}), interrupt_fd);
            if (ok.is_error()) {
                replies.push_back(std::move(ok));
                read_reply(reply_deadline(budget), interrupt_fd); // the command's, not run
                continue;
            }
        }
        // Each reply gets the full command timeout: a batch is many small commands.
        replies.push_back(read_reply(reply_deadline(budget), interrupt_fd));
    }
    return replies;
}

std::string hiredis_version() {
    return fmt::format("{}.{}.{}", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
}

Reply Connection::command(const Command& command, Milliseconds blocking_for, int interrupt_fd) {
    return std::move(send_all({Outgoing{&command.key, &command.argv}}, blocking_for, interrupt_fd)
                         .front());
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

std::vector<Reply> Connection::eval_pipeline(const std::vector<ScriptCall>& calls) {
    std::vector<Reply> replies(calls.size());
    std::vector<bool> by_body(calls.size(), false);
    std::vector<std::size_t> todo(calls.size());
    std::iota(todo.begin(), todo.end(), std::size_t{0});
    // At most three rounds: EVALSHA; with the cluster's keys after CROSSSLOT; with the body
    // after NOSCRIPT (the server lacks the script: it restarted, or never ran it).
    for (int round = 0; round < 3 && !todo.empty(); ++round) {
        std::vector<std::vector<std::string>> argvs;
        argvs.reserve(todo.size());
        std::vector<Outgoing> batch;
        batch.reserve(todo.size());
        for (const std::size_t i : todo) {
            const ScriptCall& call = calls[i];
            const bool cluster = m_slots && !call.cluster_keys.empty();
            const std::vector<std::string>& keys = cluster ? call.cluster_keys : call.keys;
            argvs.push_back(script_argv(call, keys, !by_body[i]));
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
            if (starts_with(reply.text, "CROSSSLOT") && !m_slots &&
                !calls[i].cluster_keys.empty()) {
                m_slots.emplace(); // a cluster after all: its keys, and routing, from now on
                again.push_back(i);
            } else if (starts_with(reply.text, "NOSCRIPT") && !by_body[i]) {
                by_body[i] = true;
                again.push_back(i);
            }
        }
        todo = std::move(again);
    }
    return replies;
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
