#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/connection.hpp"
#include "semaphore/keys.hpp"
#include "semaphore/values.hpp"

namespace redsem {

namespace wire {
struct QueuedReply;
struct ConflictReply;
enum class PauseAction;
} // namespace wire

// Who releases a token: its own process (a holder done, a waiter that gives up), or somebody
// else (`redsem release`), whose release of a waiting token ends that waiter's acquire.
enum class Releaser { owner, someone_else };

// The client side of the protocol in lua/: every operation is one script and one round trip.
class Semaphore {
public:
    // `name` and `prefix` must already be valid (see util/name.hpp).
    Semaphore(Connection& connection, std::string_view prefix, std::string_view name);

    // Takes a slot under `token`. With options.wait == 0 tries once; otherwise queues in FIFO
    // order and blocks (woken by the release that gives this waiter its turn, or by the
    // earliest holder's deadline) until a slot is granted or the wait passes. A returned lease
    // has its ttl ahead by the local clock, less at most a safety margin: a grant that lost
    // more while this process was stopped (or that may have run out) is renewed first, or, if
    // it was lost, the caller queues again. Returns nullopt when no slot came in time, having left
    // the queue. Retrying with the same token never takes a second slot. Transient failures (a
    // broken connection, LOADING, BUSY) are retried within Connection::outage_window() (see
    // RetryPolicy). With options.replicas, the lease is renewed at once and returned only once that
    // many replicas have the renewal (and so the grant); when fewer confirm it in time, the slot is
    // given back and NotReplicatedError thrown. Throws ConflictError on a limit mismatch or a
    // foreign key, WaitInterrupted when options.interrupt_fd fired (after leaving the queue),
    // PlaceReleased when somebody else released the waiting token.
    std::optional<Lease> acquire(const AcquireOptions& options, const std::string& token);

    // Gives the token's slot back, or takes it out of the queue; never touches another token.
    // A waiting token released by somebody else ends its waiter (PlaceReleased).
    // `end`: how `run`'s command ended, kept with the released event. `once`: the
    // release of a `run --once-per`, whose success marks its occurrence done even after its
    // lease ran out, when nobody claimed the occurrence since (ReleaseOutcome::late_*).
    ReleaseOutcome release(const std::string& token, Releaser by = Releaser::owner,
                           const std::optional<CommandEnd>& end = std::nullopt, bool once = false);

    // Best-effort release, for cleaning up on a way out; ignores every failure.
    void release_quietly(const std::string& token) noexcept;

    // Extends the token's lease to server-now + ttl (nullopt: the lease's own ttl); nullopt
    // when the token holds nothing (its slot is lost); throws NotHeldError when it is still
    // queued (it holds nothing yet, and nothing is lost). With `replicas`, returns only once that
    // many replicas have the renewal, waiting up to replica_wait(ttl) for them; throws
    // NotReplicatedError when fewer confirm it (the renewal stands on the master, but may not
    // survive a failover).
    // `claimed`: the caller cannot know that the token ever held a slot (`redsem renew`), so
    // a token the semaphore does not have logs no `lost` event. When the slot is lost and
    // `loss` is given, it says why, as far as the server can tell.
    std::optional<Renewal> renew(const std::string& token,
                                 std::optional<Milliseconds> ttl = std::nullopt,
                                 long long replicas = 0, bool claimed = false,
                                 LeaseLoss* loss = nullptr);

    // How long --replicas waits for the replicas to confirm a write to a lease of `ttl`: a
    // quarter of it (so the lease is still good by the local clock), at most the command
    // timeout.
    Milliseconds replica_wait(Milliseconds ttl) const;

    // Reads the limit, or with `new_limit` changes it at once, in use or not: a higher limit
    // hands the new slots to waiters in FIFO order; after a lower one, holders keep their slots
    // and nobody is admitted until fewer than the limit hold.
    // With `history`, the history keeps that many events from now on (0: none). What is set
    // here stays, also on an idle semaphore (gc and key expiry keep it), until unset_limit().
    LimitInfo limit(std::optional<long long> new_limit = std::nullopt,
                    std::optional<long long> history = std::nullopt);
    // Gives up what limit() set: in use, the limit stays in force as a caller's (the next
    // acquire of an idle semaphore sets its own); idle, the semaphore is deleted as gc does. The
    // history's length is the default again.
    LimitInfo unset_limit();

    // Whether admission is closed after a possible loss of data. Changes nothing.
    AdmissionState admission();

    // Pauses admission (nobody new gets a slot; holders and waiters keep theirs) for `by`
    // (by.label: the reason), for `duration` (nullopt: until resumed). Pausing again replaces
    // who, why and how long; the pause keeps its start. Kept by gc and key expiry.
    PauseInfo pause(const HolderMeta& by, std::optional<Milliseconds> duration);
    // Ends the pause, if any (PauseInfo::pause: the one ended), handing the slots freed
    // meanwhile to the queue in FIFO order.
    PauseInfo resume(const HolderMeta& by);
    // The pause and the holders now, after what ran out (`drain`). Changes nothing else.
    PauseInfo look_at_pause();
    // Declares that Redis may have lost data (`redsem lost`): nobody new is admitted for the
    // loss grace, as after a restart, to every semaphore this one's epoch key vouches for
    // (all of the prefix on one server; this one alone on a Redis Cluster). Returns the loss
    // as recorded: lost_at_ms, and opens_at_ms for the grace every client has.
    LossDeclared declare_loss();
    // Blocks until a holder leaves the paused semaphore or the pause ends (true; a note may
    // also be older than this drain: look again), or `timeout` passes (false).
    // Throws WaitInterrupted when `interrupt_fd` becomes readable.
    bool wait_for_departure(Milliseconds timeout, int interrupt_fd);

    const std::string& name() const noexcept { return m_name; }
    const Keys& keys() const noexcept { return m_keys; }

private:
    std::optional<Lease> acquire_unreplicated(const AcquireOptions& options,
                                              const std::string& token);
    // How a script judges the epoch where INFO is denied (see epoch_proof.hpp).
    enum class Proof {
        none,   // it does not judge it
        admits, // it may admit somebody: it proves the server's identity, or records a loss
        reads   // it only reads (view.lua): it proves, or, unable to, writes nothing
    };
    // Runs `script` on the semaphore's keys with `args` after ARGV[1] and ARGV[2] (see
    // Keys::script_args()), proving the server's identity as `proof` says, calling again as
    // the script asks. With
    // Proof::reads, a server that cannot prove it (lacks the marker's script, or the epoch
    // has no marker) gives a NOSCRIPT error reply, returned as it is.
    Reply run(const Script& script, const std::vector<std::string>& args,
              Proof proof = Proof::none);
    // release() on the server this connection uses now, without asking the sentinels first.
    ReleaseOutcome release_here(const std::string& token, Releaser by = Releaser::owner,
                                const std::optional<CommandEnd>& end = std::nullopt,
                                bool once = false);
    // `first_answer_ms`: the server time of the first answer this acquire had (see
    // wire::AcquireArgs).
    Reply attempt(const AcquireOptions& options, const std::string& token, bool queue, bool known,
                  std::optional<long long> first_answer_ms);
    // Blocks on the waiter's wake list; returns the slot handed over to it, if any came.
    // Throws PlaceReleased when somebody else released the waiting token.
    // `queued` is the acquire reply that queued or refreshed the waiter, sent at `asked_at`.
    std::optional<Lease> wait_for_hand_over(const AcquireOptions& options, const std::string& token,
                                            Milliseconds timeout, BootClock::time_point asked_at,
                                            const wire::QueuedReply& queued);
    // Makes sure `lease` has its ttl ahead by the local clock, less at most a safety margin:
    // true at once when it has, else after a renewal confirmed it (updating it); false when
    // the server no longer has it as a holder (it lost the slot, or is queued again).
    bool confirm(Lease& lease);
    // pause.lua with `action`, for `by` (nullptr: nobody, a look).
    PauseInfo pause_call(wire::PauseAction action, const HolderMeta* by,
                         std::optional<Milliseconds> duration);
    // Tells options.on_closed whether the reply that refused a slot found admission closed.
    void report_closed(const AcquireOptions& options, const AdmissionClosed& closed) const;
    [[noreturn]] void throw_place_released(const std::string& token) const;
    // The note in the ":left" list of waiter `token` (wire::Left), read and so removed; nullopt
    // for a release's, or none.
    std::optional<Skip> read_left_note(const std::string& token);
    // The caller asks for more slots than `limit`: ConflictError.
    [[noreturn]] void throw_too_large(const AcquireOptions& options, long long limit) const;
    [[noreturn]] void throw_conflict(const wire::ConflictReply& conflict,
                                     std::optional<long long> wanted_limit) const;

    Connection& m_connection;
    std::string m_name;
    Keys m_keys;
    // The epoch marker the epoch key held when a script last said (nullopt: no script asked
    // for a proof yet, so INFO may be allowed; "": the key holds none).
    std::optional<std::string> m_epoch_marker;
};

} // namespace redsem
