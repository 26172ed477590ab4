#include "redis/server_connection.hpp"

#include "util/duration.hpp"
#include "util/errors.hpp"
#include "util/name.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <hiredis/hiredis.h>

namespace redsem {

// What the reply being read holds so far: elements, and bytes of its strings.
struct ReplyBudget {
    long long elements = 0;
    std::size_t bytes = 0;
    bool exceeded = false;
};

namespace {

// An error reply to AUTH without the password: Redis quotes the arguments of a command it does
// not know ("unknown command 'AUTH', with args beginning with: 'secret'"), and a server that is
// not Redis may echo anything: a reply that still holds it is not shown at all.
std::string without_secret(std::string text, const std::string& password) {
    const std::size_t args = text.find(", with args beginning with:");
    if (args != std::string::npos) {
        text.erase(args);
    }
    if (!password.empty() && text.find(password) != std::string::npos) {
        // Not masked where it appears (which would show where, and so what, it is).
        return "(a reply not shown: it may hold the password)";
    }
    return text;
}

// AUTH refused: a wrong password or user is the login's (77); anything else means a server
// that does not take AUTH as Redis does (renamed away, or not Redis at all).
[[noreturn]] void throw_auth_error(const RedisUrl& url, const std::string& error) {
    const ReplyErrorMeaning meaning = classify_reply_error(error);
    if (meaning.code == ExitCode::denied) {
        // Named: on a Redis Cluster it may be a node a MOVED reply sent us to.
        throw Error(meaning.code, fmt::format("{}: {}", url.describe(), meaning.message));
    }
    if (meaning.transience == Transience::transient) {
        throw Error(meaning.code, meaning.message, meaning.transience);
    }
    throw UnavailableError(fmt::format("{} did not accept AUTH as Redis does (is AUTH renamed "
                                       "away, or is this not Redis?): {}",
                                       url.describe(), printable(error, 200)));
}

// What a reply may hold. redsem's largest replies (status of a semaphore at its limit of
// 100,000 holders, with as many waiters; a page of history; CLUSTER SLOTS) are far below
// these, and a reply of this size is read in well under a second: what a server declares
// beyond them is refused at once rather than allocated, buffered or walked.
constexpr long long k_max_reply_elements = 2'000'000;        // all nesting levels together
constexpr std::size_t k_max_reply_bytes = 128 * 1024 * 1024; // its strings together
// A line of RESP: a status or error text, or a type and a length. hiredis looks for its end
// from the line's start at every read, so a line that never ends would cost time squared.
constexpr std::size_t k_max_reply_line = 1024 * 1024;

// hiredis's own reply constructors, which the counting ones below call.
const redisReplyObjectFunctions* g_hiredis_functions = nullptr;

// Counts an element (and `bytes` of text) of the reply being read against its budget (the
// reader's privdata); false when the reply is over it, which makes hiredis fail the reply.
// `declared`: elements an array announces, which must fit too, before hiredis allocates room
// for them (they are counted as they come).
bool spend(const redisReadTask* task, std::size_t bytes = 0, long long declared = 0) {
    auto* budget = static_cast<ReplyBudget*>(task->privdata);
    budget->elements += 1;
    budget->bytes += bytes;
    budget->exceeded =
        budget->elements + declared > k_max_reply_elements || budget->bytes > k_max_reply_bytes;
    return !budget->exceeded;
}

void* counted_string(const redisReadTask* task, char* text, size_t length) {
    return spend(task, length) ? g_hiredis_functions->createString(task, text, length) : nullptr;
}

void* counted_array(const redisReadTask* task, int elements) {
    return spend(task, 0, std::max(static_cast<long long>(elements), 0LL))
               ? g_hiredis_functions->createArray(task, elements)
               : nullptr;
}

void* counted_integer(const redisReadTask* task, long long value) {
    return spend(task) ? g_hiredis_functions->createInteger(task, value) : nullptr;
}

void* counted_nil(const redisReadTask* task) {
    return spend(task) ? g_hiredis_functions->createNil(task) : nullptr;
}

redisReplyObjectFunctions g_counting_functions{};

// A reader whose replies are counted against `budget`.
redisReader* bounded_reader(void* budget) {
    redisReader* reader = redisReaderCreate();
    if (reader == nullptr) {
        return nullptr;
    }
    if (g_hiredis_functions == nullptr) {
        g_hiredis_functions = reader->fn;
        g_counting_functions = {.createString = counted_string,
                                .createArray = counted_array,
                                .createInteger = counted_integer,
                                .createNil = counted_nil,
                                .freeObject = reader->fn->freeObject};
    }
    reader->fn = &g_counting_functions;
    reader->privdata = budget;
    return reader;
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

} // namespace

ServerConnection::ServerConnection(const ConnectOptions& options)
    : m_connect_timeout(options.connect_timeout), m_command_timeout(options.command_timeout),
      m_tls(options.tls), m_open_transport(options.open_transport), m_server(options.url),
      m_reader(nullptr, redisReaderFree), m_budget(std::make_unique<ReplyBudget>()) {}

ServerConnection::~ServerConnection() = default;
ServerConnection::ServerConnection(ServerConnection&&) noexcept = default;
ServerConnection& ServerConnection::operator=(ServerConnection&&) noexcept = default;

void ServerConnection::close() noexcept {
    m_transport.reset();
    m_reader.reset();
    m_output.clear();
}

void ServerConnection::open(const RedisUrl& server) {
    open(server, m_connect_timeout);
}

void ServerConnection::open(const RedisUrl& server, Milliseconds connect_timeout) {
    close();
    m_server = server;
    m_first_reply_by = Clock::now() + connect_timeout;
    *m_budget = ReplyBudget{};
    ReaderPtr reader(bounded_reader(m_budget.get()), redisReaderFree);
    if (!reader) {
        throw InternalError("out of memory while connecting to Redis");
    }
    m_transport = m_open_transport(server, m_tls, connect_timeout);
    m_reader = std::move(reader);
    try {
        handshake();
    } catch (...) {
        close();
        throw;
    }
}

void ServerConnection::handshake() {
    const RedisUrl& url = m_server;
    if (url.password || url.user) {
        std::vector<std::string> auth{"AUTH"};
        if (url.user) {
            auth.push_back(*url.user);
        }
        auth.push_back(url.password.value_or(""));
        const Reply reply = exchange(auth);
        if (reply.is_error()) {
            throw_auth_error(url, without_secret(reply.text, url.password.value_or("")));
        }
    }
    if (url.db != 0) {
        const Reply reply = exchange({"SELECT", std::to_string(url.db)});
        if (reply.is_error()) {
            if (reply.text.find("not allowed in cluster mode") != std::string::npos) {
                throw ServerRefusal(fmt::format("Redis at {} is a Redis Cluster node, which has "
                                                "only database 0: leave /{} out of the URL",
                                                url.describe(), url.db));
            }
            if (reply.text.find("DB index") != std::string::npos) {
                throw ServerRefusal(fmt::format("Redis at {} has no database {} ({})",
                                                url.describe(), url.db,
                                                printable(reply.text, 100)));
            }
            throw_reply_error(reply.text);
        }
    }
}

std::optional<std::string> ServerConnection::hello_field(std::string_view field) {
    // Without a protocol version HELLO keeps RESP2, and answers a flat list of names and values.
    const Reply reply = exchange({"HELLO"});
    if (reply.type != Reply::Type::array) {
        return std::nullopt;
    }
    const std::vector<Reply>& pairs = reply.elements;
    for (std::size_t i = 0; i + 1 < pairs.size(); i += 2) {
        if (pairs[i].type == Reply::Type::string && pairs[i].text == field &&
            pairs[i + 1].type == Reply::Type::string) {
            return pairs[i + 1].text;
        }
    }
    return std::nullopt;
}

void ServerConnection::append(const std::vector<std::string>& args) {
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

void ServerConnection::flush() {
    try {
        m_transport->write_all(m_output, Clock::now() + m_command_timeout);
    } catch (const ConnectionLost&) {
        if (!m_first_reply_by) {
            close();
            throw;
        }
        // Before its first answer: a server that turns us away (maxclients) writes why and
        // closes, which may fail this write; read_reply() then reads why, or the close.
    } catch (...) {
        close();
        throw;
    }
    m_output.clear();
}

Reply ServerConnection::read_reply(Milliseconds blocking_for, int interrupt_fd) {
    const Clock::time_point deadline = reply_deadline(blocking_for);
    const std::string where = m_server.describe();
    void* raw = nullptr;
    for (;;) {
        if (redisReaderGetReply(m_reader.get(), &raw) != REDIS_OK) {
            if (m_budget->exceeded) {
                refuse_reply(m_budget->bytes > k_max_reply_bytes
                                 ? fmt::format("more than {} MiB", k_max_reply_bytes >> 20)
                                 : fmt::format("more than {} elements", k_max_reply_elements));
            }
            const std::string reason = m_reader->errstr;
            const bool never_answered = m_first_reply_by.has_value();
            close();
            const std::string message =
                fmt::format("the server at {} did not answer like a Redis server ({})", where,
                            printable(reason, 100));
            if (never_answered) {
                // Not Redis (another service, a TLS port): trying again changes nothing.
                throw Error(ExitCode::unavailable, message, Transience::permanent);
            }
            throw ConnectionLost(message);
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
            close();
            if (never_answered && !closed_hint().empty()) {
                // Still "broken": what we sent may have run before a CLIENT KILL or a restart.
                throw ConnectionLost(fmt::format("{}{}", error.what(), closed_hint()));
            }
            throw;
        } catch (...) {
            close();
            throw;
        }
        switch (read.status) {
        case ReadResult::Status::data:
            if (redisReaderFeed(m_reader.get(), buffer, read.size) != REDIS_OK) {
                close();
                throw InternalError("out of memory while reading a Redis reply");
            }
            check_unparsed();
            break;
        case ReadResult::Status::interrupted:
            close();
            throw WaitInterrupted();
        case ReadResult::Status::closed: {
            const bool never_answered = m_first_reply_by.has_value();
            close();
            if (never_answered) {
                // What we sent may have run (a CLIENT KILL, a restart): "broken", as below.
                throw ConnectionLost(fmt::format(
                    "Redis at {} closed the connection before answering{}", where, closed_hint()));
            }
            throw ConnectionLost(fmt::format(
                "Redis at {} closed the connection while reading a reply (a CLIENT KILL, a "
                "restart, or a client-output-buffer-limit smaller than the reply)",
                where));
        }
        case ReadResult::Status::timed_out: {
            // The connect timeout ran out (or a caller's deadline, which ends it sooner: see
            // set_latest_reply()), not the command's own (which may be the shorter).
            const bool never_answered =
                m_first_reply_by &&
                (deadline >= *m_first_reply_by || (m_latest_reply && deadline >= *m_latest_reply));
            close();
            if (never_answered) {
                throw UnavailableError(
                    fmt::format("Redis at {} accepted the connection but did not answer within {} "
                                "(--connect-timeout)",
                                where, format_duration(m_connect_timeout)));
            }
            throw ConnectionLost(fmt::format("Redis at {} did not answer in time", where));
        }
        }
    }
    m_first_reply_by.reset();
    *m_budget = ReplyBudget{};
    std::unique_ptr<redisReply, void (*)(void*)> reply(static_cast<redisReply*>(raw),
                                                       freeReplyObject);
    return convert(*reply);
}

void ServerConnection::check_answers(Milliseconds blocking_for, int interrupt_fd) {
    if (m_first_reply_by && blocking_for.count() > 0) {
        const Reply pong = exchange({"PING"}, Milliseconds{0}, interrupt_fd);
        if (pong.is_error()) {
            throw_reply_error(pong.text);
        }
    }
}

Reply ServerConnection::exchange(const std::vector<std::string>& argv, Milliseconds blocking_for,
                                 int interrupt_fd) {
    check_answers(blocking_for, interrupt_fd);
    append(argv);
    flush();
    return read_reply(blocking_for, interrupt_fd);
}

void ServerConnection::check_unparsed() {
    // What hiredis holds unparsed starts with the line of the element it reads now (a bulk
    // string's payload follows its length's line): a reply that never ends a line, or holds
    // more than a reply may, is refused here rather than scanned and buffered on and on.
    const std::string_view unparsed(m_reader->buf + m_reader->pos, m_reader->len - m_reader->pos);
    if (unparsed.size() > k_max_reply_bytes) {
        refuse_reply(fmt::format("more than {} MiB", k_max_reply_bytes >> 20));
    }
    if (unparsed.size() > k_max_reply_line &&
        unparsed.substr(0, k_max_reply_line).find('\n') == std::string_view::npos) {
        refuse_reply(fmt::format("a line longer than {} MiB", k_max_reply_line >> 20));
    }
}

void ServerConnection::refuse_reply(std::string_view what) {
    const std::string where = m_server.describe();
    close();
    // Permanent: the same server would send the same again.
    throw Error(ExitCode::unavailable,
                fmt::format("the server at {} sent a reply of {}, far more than redsem ever "
                            "asks for: not a Redis server to trust",
                            where, what),
                Transience::permanent);
}

std::string_view ServerConnection::closed_hint() const {
    // A TLS port resets a plain connection at its first request.
    const bool plain_tcp = !m_server.tls && m_server.kind == RedisUrl::Kind::tcp;
    return plain_tcp ? " (a TLS port? use rediss://; or a CLIENT KILL, a restart, or a "
                       "client-output-buffer-limit smaller than the reply)"
                     : " (a CLIENT KILL, a restart, or a client-output-buffer-limit smaller than "
                       "the reply)";
}

ServerConnection::Clock::time_point
ServerConnection::reply_deadline(Milliseconds blocking_for) const {
    auto deadline = Clock::now() + m_command_timeout + blocking_for;
    if (m_latest_reply) {
        deadline = std::min(deadline, *m_latest_reply);
    }
    return m_first_reply_by ? std::min(deadline, *m_first_reply_by) : deadline;
}

std::string hiredis_version() {
    return fmt::format("{}.{}.{}", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH);
}

} // namespace redsem
