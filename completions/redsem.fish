# fish completion for redsem(1), a counting semaphore on Redis.
#
# Install: copy to ~/.config/fish/completions/redsem.fish or
# /usr/share/fish/vendor_completions.d/redsem.fish.
#
# Semaphore names are read live with
#   redsem [--url URL] [--prefix P] [how to connect] status --names --connect-timeout 300ms
# (URL, prefix, and the password file and TLS options copied from the command line), bounded
# by `timeout 1`.

# Options that take a value, for subcommand $argv[1] (empty before the subcommand).
function __redsem_value_opts
    printf '%s\n' -u --url --prefix --connect-timeout --password-file --sentinel-password-file \
        --cacert --cacertdir --cert --key --sni
    switch "$argv[1]"
        case acquire
            printf '%s\n' -n --limit --slots --ttl -w --wait -E --conflict-exit-code --label --loss-grace \
                --replicas --while-pid --on-lost --kill-after --max-hold
        case renew
            printf '%s\n' --ttl --replicas
        case run
            printf '%s\n' -n --limit --slots --ttl -w --wait -E --conflict-exit-code --label --loss-grace \
                --replicas --on-lost --kill-after --max-run --lost-exit-code --once-per --attempts \
                -c --command
        case status
            printf '%s\n' --format
        case limit
            printf '%s\n' --history
        case pause
            printf '%s\n' --reason --for
        case drain
            printf '%s\n' --reason --for -w --wait
        case log
            printf '%s\n' --since --until
    end
end

# Parses the command line before the cursor and prints one field of it:
#   sub     the subcommand (nothing when there is none yet)
#   npos    how many positionals follow the subcommand
#   url     the value of -u/--url, prefix: the value of --prefix
#   connect the options that say how to connect (--password-file F, --cacert F, --insecure,
#           ...), one word per line
#   incmd   "1" when completing the COMMAND of `run` (after "--" or after NAME)
#   cmd     the COMMAND words typed so far, one per line
function __redsem_info --argument-names field
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l sub
    set -l npos 0
    set -l url
    set -l prefix
    set -l connect
    set -l pending 0
    set -l ddash 0
    set -l has_c 0
    set -l incmd 0
    set -l cmd
    set -l n (count $tokens)
    set -l i 1
    while test $i -le $n
        set -l t $tokens[$i]
        if test $incmd -eq 1
            set -a cmd $t
        else if test $ddash -eq 1
            # after "--": positionals only
            if test "$sub" = run; and test $has_c -eq 0; and test $npos -ge 1
                set incmd 1
                set -a cmd $t
            else
                set npos (math $npos + 1)
            end
        else if test "$t" = --
            set ddash 1
            if test "$sub" = run; and test $has_c -eq 0; and test $npos -ge 1
                set incmd 1
            end
        else if string match -q -- '--*=*' $t
            set -l kv (string split -m 1 = -- $t)
            switch $kv[1]
                case --url
                    set url $kv[2]
                case --prefix
                    set prefix $kv[2]
                case --command
                    set has_c 1
                case --password-file --sentinel-password-file --cacert --cacertdir --cert --key --sni
                    set -a connect $t
            end
        else if test "$t" = --insecure
            set -a connect $t
        else if string match -q -- '-?*' $t
            set -l vopts (__redsem_value_opts $sub)
            if contains -- $t $vopts
                set i (math $i + 1)
                test $i -gt $n; and set pending 1 # the word being completed is its value
                if test $i -le $n
                    switch $t
                        case -u --url
                            set url $tokens[$i]
                        case --prefix
                            set prefix $tokens[$i]
                        case -c --command
                            set has_c 1
                        case --password-file --sentinel-password-file --cacert --cacertdir --cert --key --sni
                            set -a connect $t $tokens[$i]
                    end
                end
            else if not string match -q -- '--*' $t; and contains -- (string sub -l 2 -- $t) $vopts
                # value attached to a short option: -uURL, -n5, -cCMD
                switch (string sub -l 2 -- $t)
                    case -u
                        set url (string sub -s 3 -- $t)
                    case -c
                        set has_c 1
                end
            end
        else if test -z "$sub"
            set sub $t
        else
            set npos (math $npos + 1)
            if test "$sub" = run; and test $has_c -eq 0; and test $npos -ge 2
                # run NAME COMMAND... without "--"
                set incmd 1
                set -a cmd $t
            end
        end
        set i (math $i + 1)
    end
    # run NAME COMMAND...: the word after NAME starts COMMAND, "--" or not, unless it is the
    # value of an option, or an option itself (it starts with '-' and no "--" came).
    if test "$sub" = run; and test $has_c -eq 0; and test $npos -ge 1; and test $pending -eq 0
        if test $ddash -eq 1; or not string match -q -- '-*' (commandline -ct)
            set incmd 1
        end
    end
    switch $field
        case sub
            test -n "$sub"; and echo $sub
        case npos
            echo $npos
        case url
            test -n "$url"; and echo $url
        case prefix
            test -n "$prefix"; and echo $prefix
        case connect
            test (count $connect) -gt 0; and printf '%s\n' $connect
        case incmd
            echo $incmd
        case cmd
            test (count $cmd) -gt 0; and printf '%s\n' $cmd
    end
    return 0
end

# True when the next word is the subcommand.
function __redsem_use_subcommand
    set -l sub (__redsem_info sub)
    test -z "$sub"
end

# True when the subcommand is one of $argv and we are not in run's COMMAND.
function __redsem_seen_subcommand_from
    set -l sub (__redsem_info sub)
    contains -- "$sub" $argv; and not __redsem_in_command
end

# True when completing the COMMAND of `redsem run NAME -- COMMAND...`.
function __redsem_in_command
    set -l incmd (__redsem_info incmd)
    test "$incmd" = 1
end

# True when redsem options may come (not inside run's COMMAND).
function __redsem_options_ok
    not __redsem_in_command
end

# True when the word being completed is a semaphore NAME.
function __redsem_wants_name
    set -l sub (__redsem_info sub)
    switch "$sub"
        case status gc log
            return 0
        case acquire release renew run limit pause resume drain
            set -l npos (__redsem_info npos)
            test "$npos" = 0
        case '*'
            return 1
    end
end

# Prints the semaphore names, one per line; prints nothing on any failure.
function __redsem_names
    set -l cmd redsem
    set -l url (__redsem_info url)
    set -l prefix (__redsem_info prefix)
    test -n "$url"; and set -a cmd --url $url
    test -n "$prefix"; and set -a cmd --prefix $prefix
    set -a cmd (__redsem_info connect)
    set -a cmd status --names --connect-timeout 300ms
    set -l names
    if command -q timeout
        set names (timeout 1 $cmd 2>/dev/null </dev/null)
    else
        set names (command $cmd 2>/dev/null </dev/null)
    end
    # status, gc and log take several names: skip the ones already given.
    set -l given
    set -l sub (__redsem_info sub)
    if contains -- "$sub" status gc log
        set given (commandline -opc)
    end
    for name in $names
        contains -- $name $given; or printf '%s\n' $name
    end
    return 0
end

# Completes run's COMMAND like a command line of its own.
function __redsem_complete_command
    __fish_complete_subcommand --commandline (__redsem_info cmd) (commandline -ct)
end

complete -c redsem -f

# Subcommands
complete -c redsem -n __redsem_use_subcommand -a acquire -d 'Take a slot and print its token'
complete -c redsem -n __redsem_use_subcommand -a release -d 'Give back the slot held by TOKEN'
complete -c redsem -n __redsem_use_subcommand -a renew -d 'Extend the lease of the slot held by TOKEN'
complete -c redsem -n __redsem_use_subcommand -a run -d 'Run COMMAND while holding a slot'
complete -c redsem -n __redsem_use_subcommand -a status -d 'Show holders and waiters'
complete -c redsem -n __redsem_use_subcommand -a limit -d 'Show or change how many may hold NAME'
complete -c redsem -n __redsem_use_subcommand -a pause -d 'Admit nobody new to NAME (a freeze)'
complete -c redsem -n __redsem_use_subcommand -a resume -d 'End the pause of NAME'
complete -c redsem -n __redsem_use_subcommand -a drain -d 'Pause NAME, then wait until nobody holds it'
complete -c redsem -n __redsem_use_subcommand -a lost -d 'Declare that Redis may have lost data: admit nobody for a while'
complete -c redsem -n __redsem_use_subcommand -a log -d 'Show who held and waited, when, and for how long'
complete -c redsem -n __redsem_use_subcommand -a gc -d 'Remove expired holders and dead waiters'
complete -c redsem -n __redsem_use_subcommand -a doctor -d 'Check whether a Redis is safe for redsem'

# Global options (before or after the subcommand)
complete -c redsem -n __redsem_options_ok -s h -l help -d 'Print help and exit'
complete -c redsem -n __redsem_use_subcommand -l version -d 'Print version and exit'
complete -c redsem -n __redsem_options_ok -s u -l url -x -a 'redis:// rediss:// redis-sentinel:// rediss-sentinel:// unix://' -d 'Redis URL'
complete -c redsem -n __redsem_options_ok -l prefix -x -d 'Prefix of the Redis keys'
complete -c redsem -n __redsem_options_ok -l connect-timeout -x -d 'How long to wait for the connection (DUR)'
complete -c redsem -n __redsem_options_ok -l password-file -r -F -d 'Read the Redis password from FILE'
complete -c redsem -n __redsem_options_ok -l sentinel-password-file -r -F -d 'redis-sentinel://: read the sentinels\' password from FILE'
complete -c redsem -n __redsem_options_ok -l cacert -r -F -d 'rediss://: trust the CAs in FILE'
complete -c redsem -n __redsem_options_ok -l cacertdir -x -a '(__fish_complete_directories)' -d 'rediss://: trust the CAs in DIR'
complete -c redsem -n __redsem_options_ok -l cert -r -F -d 'rediss://: client certificate'
complete -c redsem -n __redsem_options_ok -l key -r -F -d 'rediss://: private key of --cert'
complete -c redsem -n __redsem_options_ok -l sni -x -d 'rediss://: server name to ask for and verify'
complete -c redsem -n __redsem_options_ok -l insecure -d 'rediss://: do not verify the certificate (warns)'

# acquire and run
complete -c redsem -n '__redsem_seen_subcommand_from acquire run' -s n -l limit -x -d 'How many may hold NAME at once'
complete -c redsem -n '__redsem_seen_subcommand_from acquire run' -l slots -x -d 'Take K slots in one grant'
complete -c redsem -n '__redsem_seen_subcommand_from acquire run' -l exclusive -d 'Take every slot: run alone'
complete -c redsem -n '__redsem_seen_subcommand_from acquire run renew' -l ttl -x -d 'Lease length (DUR)'
complete -c redsem -n '__redsem_seen_subcommand_from acquire run' -s w -l wait -x -d 'Give up after DUR without a slot'
complete -c redsem -n '__redsem_seen_subcommand_from acquire run' -s E -l conflict-exit-code -x -d 'Exit status when no slot was had in time'
complete -c redsem -n '__redsem_seen_subcommand_from acquire run' -l label -x -d 'Text shown beside this holder in status (then no CI job is recorded)'
complete -c redsem -n '__redsem_seen_subcommand_from acquire run' -l loss-grace -x -d 'This call only: wait DUR (0-60s) after Redis may have lost data'
complete -c redsem -n '__redsem_seen_subcommand_from acquire run' -l through-loss -d 'With -w 0: wait for a closed admission to open, then try once'
complete -c redsem -n '__redsem_seen_subcommand_from acquire run renew' -l replicas -x -d 'Count a slot or renewal only once N replicas have it'
complete -c redsem -n '__redsem_seen_subcommand_from acquire run' -s q -l quiet -d 'Do not show the queue position'
complete -c redsem -n '__redsem_seen_subcommand_from acquire' -l json -d 'Print the result as JSON'
complete -c redsem -n '__redsem_seen_subcommand_from acquire' -l while-pid -x -a '(__fish_complete_pids)' -d 'Hold the slot for the life of process PID'
complete -c redsem -n '__redsem_seen_subcommand_from acquire' -l on-lost -x -a 'TERM INT HUP KILL USR1 USR2 QUIT ALRM none' -d 'Signal for PID when the lease is lost'
complete -c redsem -n '__redsem_seen_subcommand_from acquire' -l kill-after -x -d 'SIGKILL PID and its descendants this long after the --on-lost signal (DUR)'
complete -c redsem -n '__redsem_seen_subcommand_from acquire' -l max-hold -x -d 'hold the slot for at most DUR from its grant (no renewal past it)'
complete -c redsem -n '__redsem_seen_subcommand_from limit' -l history -x -d 'Events the history of NAME keeps (0: none)'
complete -c redsem -n '__redsem_seen_subcommand_from limit' -l unset -d 'Give up the limit and history length set here'
complete -c redsem -n '__redsem_seen_subcommand_from limit' -l json -d 'Print JSON'
complete -c redsem -n '__redsem_seen_subcommand_from pause drain' -l reason -x -d 'Why, shown to those kept out'
complete -c redsem -n '__redsem_seen_subcommand_from pause drain' -l for -x -d 'End the pause by itself after DUR'
complete -c redsem -n '__redsem_seen_subcommand_from drain' -s w -l wait -x -d 'Give up after DUR with holders left (75)'
complete -c redsem -n '__redsem_seen_subcommand_from resume drain lost' -s q -l quiet -d 'No notice on stderr'
complete -c redsem -n '__redsem_seen_subcommand_from pause resume drain lost' -l json -d 'Print JSON'

# run
complete -c redsem -n '__redsem_seen_subcommand_from run' -l on-lost -x -a 'term ignore' -d 'What to do when the slot is lost'
complete -c redsem -n '__redsem_seen_subcommand_from run' -l kill-after -x -d 'SIGKILL this long after SIGTERM (DUR)'
complete -c redsem -n '__redsem_seen_subcommand_from run' -l max-run -x -d 'Stop COMMAND after it ran this long (DUR, exit 124)'
complete -c redsem -n '__redsem_seen_subcommand_from run' -l lost-exit-code -x -d 'Exit status after the slot was lost'
complete -c redsem -n '__redsem_seen_subcommand_from run' -l once-per -x -d 'Run once per WINDOW across callers; skip (exit 0) within it'
complete -c redsem -n '__redsem_seen_subcommand_from run' -l at-most-once -d 'With --once-per: also skip an occurrence whose outcome is unknown'
complete -c redsem -n '__redsem_seen_subcommand_from run' -l attempts -x -d 'With --once-per: skip an occurrence after N runs failed'
complete -c redsem -n '__redsem_seen_subcommand_from run' -s c -l command -x -d 'Shell command line to run with /bin/sh -c'

# status and gc
complete -c redsem -n '__redsem_seen_subcommand_from status' -l json -d 'Print JSON'
complete -c redsem -n '__redsem_seen_subcommand_from status' -l format -x -a 'table json prometheus' -d 'Output format'
complete -c redsem -n '__redsem_seen_subcommand_from status' -l watch -d 'On a terminal, redraw as it changes'
complete -c redsem -n '__redsem_seen_subcommand_from status' -l names -d 'Print only the names of all semaphores'

# log
complete -c redsem -n '__redsem_seen_subcommand_from log' -l since -x -d 'Only events from WHEN on (24h, a time)'
complete -c redsem -n '__redsem_seen_subcommand_from log' -l until -x -d 'Only events up to WHEN'
complete -c redsem -n '__redsem_seen_subcommand_from log' -l json -d 'One JSON object per event'
complete -c redsem -n '__redsem_seen_subcommand_from log' -s f -l follow -d 'Print new events as they happen'
complete -c redsem -n '__redsem_seen_subcommand_from gc' -l dry-run -d 'Show what would be removed; change nothing'
complete -c redsem -n '__redsem_seen_subcommand_from gc' -l json -d 'Print JSON'

# doctor (takes no NAME)
complete -c redsem -n '__redsem_seen_subcommand_from doctor' -l json -d 'Print JSON'

# NAME positionals, read live from Redis
complete -c redsem -n '__redsem_wants_name; and not __redsem_in_command' -a '(__redsem_names)' -d Semaphore

# run NAME -- COMMAND...
complete -c redsem -n __redsem_in_command -a '(__redsem_complete_command)'
