# bash completion for redsem(1), a counting semaphore on Redis.
#
# Install: copy to /usr/share/bash-completion/completions/redsem (or source it
# from ~/.bashrc). Works with or without the bash-completion package: only
# COMP_WORDS, COMP_CWORD and, when set, COMP_LINE/COMP_POINT are used.
#
# Semaphore names are read live with
#   redsem [--url URL] [--prefix P] [TLS and password options] status --names
#     --connect-timeout 300ms
# (those options copied from the command line), bounded by `timeout 1`.

# Options that take a value, for subcommand $1 ("" before the subcommand).
_redsem_value_opts() {
    local opts='-u --url --prefix --connect-timeout --password-file --sentinel-password-file --cacert --cacertdir --cert --key --sni'
    case $1 in
        acquire) opts+=' -n --limit --slots --ttl -w --wait -E --conflict-exit-code --label --loss-grace --replicas --while-pid --on-lost --kill-after --max-hold' ;;
        renew) opts+=' --ttl --replicas' ;;
        run) opts+=' -n --limit --slots --ttl -w --wait -E --conflict-exit-code --label --loss-grace --replicas --on-lost --kill-after --max-run --lost-exit-code --once-per --attempts -c --command' ;;
        status) opts+=' --format' ;;
        limit) opts+=' --history' ;;
        pause) opts+=' --reason --for' ;;
        drain) opts+=' --reason --for -w --wait' ;;
        log) opts+=' --since --until' ;;
    esac
    printf '%s' "$opts"
}

# All options of subcommand $1 ("" for the top level).
_redsem_all_opts() {
    local opts='-h --help -u --url --prefix --connect-timeout --password-file --sentinel-password-file --cacert --cacertdir --cert --key --sni --insecure'
    case $1 in
        '') opts+=' --version' ;;
        acquire) opts+=' -n --limit --slots --exclusive --ttl -w --wait -E --conflict-exit-code --label --loss-grace --through-loss --replicas -q --quiet --json --while-pid --on-lost --kill-after --max-hold' ;;
        renew) opts+=' --ttl --replicas' ;;
        run) opts+=' -n --limit --slots --exclusive --ttl -w --wait -E --conflict-exit-code --label --loss-grace --through-loss --replicas -q --quiet --on-lost --kill-after --max-run --lost-exit-code --once-per --at-most-once --attempts -c --command' ;;
        status) opts+=' --json --format --watch --names' ;;
        log) opts+=' --since --until --json -f --follow' ;;
        gc) opts+=' --dry-run --json' ;;
        limit) opts+=' --history --unset --json' ;;
        pause) opts+=' --reason --for --json' ;;
        resume) opts+=' -q --quiet --json' ;;
        drain) opts+=' --reason --for -w --wait -q --quiet --json' ;;
        lost) opts+=' -q --quiet --json' ;;
        doctor) opts+=' --json' ;;
    esac
    printf '%s' "$opts"
}

# Removes shell quoting from $1 (simple cases) into REPLY.
_redsem_dequote() {
    local s=$1
    case $s in
        \'*\') s=${s:1:${#s}-2} ;;
        \"*\") s=${s:1:${#s}-2} ;;
        \'* | \"*) s=${s:1} ;;
        *)
            s=${s//\\\\/$'\001'}
            s=${s//\\/}
            s=${s//$'\001'/\\}
            ;;
    esac
    REPLY=$s
}

# Prints the semaphore names, one per line; prints nothing on any failure.
# $1: URL ("" for the default), $2: prefix ("" for the default), then options that say how to
# connect (--cacert FILE, --insecure, ...).
_redsem_names() {
    local -a cmd=(redsem)
    [[ -n $1 ]] && cmd+=(--url "$1")
    [[ -n $2 ]] && cmd+=(--prefix "$2")
    cmd+=("${@:3}")
    cmd+=(status --names --connect-timeout 300ms)
    if type -P timeout >/dev/null 2>&1; then
        timeout 1 "${cmd[@]}" 2>/dev/null </dev/null
    else
        command "${cmd[@]}" 2>/dev/null </dev/null
    fi
    return 0
}

_redsem() {
    COMPREPLY=()
    local wb=${COMP_WORDBREAKS-}
    [[ -z ${COMP_WORDBREAKS+set} ]] && wb='=:'

    # Rejoin words that bash split at '=' or ':' (COMP_WORDBREAKS), so that
    # "--url=unix:///x.sock" is one word again. COMP_LINE, when it is there,
    # tells whether two words touch; without it, words made only of '=' and
    # ':' are taken to touch their neighbours.
    local -a raw=("${COMP_WORDS[@]}") words=() first_raw=() # first_raw: word -> its COMP_WORDS index
    local rcword=$COMP_CWORD cword=0 i w prev_sep=0 sep adjacent
    local line=${COMP_LINE-} pos=0 use_line=0 rest trimmed skipped
    [[ -n $line ]] && use_line=1
    local rlword='' # the text bash will replace (the current word as bash split it)
    for ((i = 0; i < ${#raw[@]} && i <= rcword; i++)); do
        w=${raw[i]}
        adjacent=-1
        if ((use_line)); then
            rest=${line:pos}
            trimmed=${rest#"${rest%%[![:space:]]*}"}
            skipped=$((${#rest} - ${#trimmed}))
            if [[ $trimmed == "$w"* ]]; then
                adjacent=$((skipped == 0 && i > 0))
                if ((i == rcword)) && [[ -n ${COMP_POINT-} ]] &&
                    ((COMP_POINT >= pos + skipped && COMP_POINT < pos + skipped + ${#w})); then
                    w=${w:0:COMP_POINT-pos-skipped} # only the part before the cursor
                fi
                pos=$((pos + skipped + ${#w}))
            else
                use_line=0
            fi
        fi
        sep=0
        [[ -n $w && $w != *[!=:]* ]] && sep=1
        if ((i > 0 && (sep || prev_sep) && adjacent != 0)) && [[ $wb == *[=:]* ]]; then
            words[cword]+=$w
        else
            ((i > 0)) && ((cword++))
            words[cword]=$w
            first_raw[cword]=$i
        fi
        prev_sep=$sep
        if ((i == rcword)); then
            ((sep)) && rlword='' || rlword=$w
        fi
    done
    ((rcword >= ${#raw[@]})) && { ((cword++)); words[cword]=''; }
    local cur=${words[cword]}
    # Text before bash's own word; it must be cut from every candidate.
    local strip=${cur:0:${#cur}-${#rlword}}

    # Walk the words before the cursor.
    local sub='' url='' prefix='' dashdash=-1 npos=0 cmdstart=-1 has_c=0
    local -a conn=() # how to connect, for the names lookup
    local valopts opt
    for ((i = 1; i < cword; i++)); do
        ((cmdstart >= 0)) && break # the rest belongs to run's COMMAND
        w=${words[i]}
        if ((dashdash >= 0)); then
            # after "--": positionals only
            if [[ -z $sub ]]; then
                sub=$w
            else
                ((npos++))
                [[ $sub == run ]] && ((npos == 2 && cmdstart < 0)) && cmdstart=$i
            fi
            continue
        fi
        valopts=" $(_redsem_value_opts "$sub") "
        case $w in
            --)
                dashdash=$i
                ;;
            --*=*)
                opt=${w%%=*}
                case $opt in
                    --url) _redsem_dequote "${w#*=}"; url=$REPLY ;;
                    --prefix) _redsem_dequote "${w#*=}"; prefix=$REPLY ;;
                    --command) has_c=1 ;;
                    --password-file | --sentinel-password-file | --cacert | --cacertdir | --cert | --key | --sni)
                        _redsem_dequote "${w#*=}"; conn+=("$opt" "$REPLY") ;;
                esac
                ;;
            -?*)
                if [[ $valopts == *" $w "* ]]; then
                    if ((i + 1 < cword)); then
                        case $w in
                            -u | --url) _redsem_dequote "${words[i + 1]}"; url=$REPLY ;;
                            --prefix) _redsem_dequote "${words[i + 1]}"; prefix=$REPLY ;;
                            -c | --command) has_c=1 ;;
                            --password-file | --sentinel-password-file | --cacert | --cacertdir | --cert | --key | --sni)
                                _redsem_dequote "${words[i + 1]}"; conn+=("$w" "$REPLY") ;;
                        esac
                    fi
                    ((i++))
                elif [[ $w == --insecure ]]; then
                    conn+=(--insecure)
                elif [[ $w != --* && ${#w} -gt 2 && $valopts == *" ${w:0:2} "* ]]; then
                    case ${w:0:2} in # value attached: -uURL, -n5, -cCMD
                        -u) _redsem_dequote "${w:2}"; url=$REPLY ;;
                        -c) has_c=1 ;;
                    esac
                fi
                ;;
            *)
                if [[ -z $sub ]]; then
                    sub=$w
                else
                    ((npos++))
                    if [[ $sub == run ]] && ((npos == 2 && cmdstart < 0)); then
                        cmdstart=$i
                    fi
                fi
                ;;
        esac
    done

    local -a cands=()
    local prevw=${words[cword - 1]}
    local mode='' vopt=''

    if [[ $sub == run ]] && ((!has_c && (cmdstart >= 0 || (npos >= 1 && dashdash >= 0)))); then
        # run's COMMAND: after "--" (or after NAME), a command, then its arguments.
        if ((cmdstart >= 0)); then mode=files; else mode=cmdname; fi
    elif ((dashdash < 0)) && [[ $cur == --*=* ]]; then
        vopt=${cur%%=*}
        mode=value
    elif ((dashdash < 0 && cword > 1)) && [[ " $(_redsem_value_opts "$sub") " == *" $prevw "* ]]; then
        vopt=$prevw
        mode=value
    elif ((dashdash < 0)) && [[ $cur == -* ]]; then
        mode=options
    elif [[ -z $sub ]]; then
        ((dashdash < 0)) && mode=subcommands
    else
        case $sub in
            acquire) ((npos == 0)) && mode=names ;;
            release | renew | limit) ((npos == 0)) && mode=names ;; # then TOKEN or N: nothing
            pause | resume | drain) ((npos == 0)) && mode=names ;;
            run)
                if ((npos == 0)); then
                    mode=names
                elif ((!has_c)); then
                    mode=cmdname # "run NAME COMMAND" without "--"
                fi
                ;;
            status | gc | log) mode=names ;;
            doctor | lost) ;; # take no NAME
        esac
    fi

    local vcur=$cur vpre=''
    if [[ $mode == value && $cur == --*=* ]]; then
        vpre="${cur%%=*}="
        vcur=${cur#*=}
    fi

    case $mode in
        subcommands)
            for w in acquire release renew run status limit pause resume drain lost log gc doctor; do
                [[ $w == "$cur"* ]] && cands+=("$w")
            done
            ;;
        options)
            for w in $(_redsem_all_opts "$sub"); do
                [[ $w == "$cur"* ]] && cands+=("$w")
            done
            ;;
        value)
            case $vopt in
                --on-lost)
                    local actions='TERM INT HUP KILL USR1 USR2 QUIT ALRM none' # acquire
                    [[ $sub == run ]] && actions='term ignore'
                    for w in $actions; do
                        [[ $w == "$vcur"* ]] && cands+=("$vpre$w")
                    done
                    ;;
                -u | --url)
                    for w in redis:// rediss:// redis-sentinel:// rediss-sentinel:// unix://; do
                        [[ $w == "$vcur"* ]] && cands+=("$vpre$w")
                    done
                    ((${#cands[@]})) && compopt -o nospace 2>/dev/null
                    ;;
                --password-file | --sentinel-password-file | --cacert | --cert | --key)
                    compopt -o filenames 2>/dev/null
                    mapfile -t cands < <(compgen -f -- "$vcur")
                    ;;
                --cacertdir)
                    compopt -o filenames 2>/dev/null
                    mapfile -t cands < <(compgen -d -- "$vcur")
                    ;;
                --format)
                    for w in table json prometheus; do
                        [[ $w == "$vcur"* ]] && cands+=("$vpre$w")
                    done
                    ;;
            esac
            ;;
        names)
            local name q seen
            _redsem_dequote "$cur"
            local dcur=$REPLY
            # status, gc and log take several names: skip the ones already given.
            seen=' '
            if [[ $sub == status || $sub == gc || $sub == log ]]; then
                for ((i = 2; i < cword; i++)); do seen+="${words[i]} "; done
            fi
            while IFS= read -r name; do
                [[ -n $name && $name == "$dcur"* ]] || continue
                [[ $seen == *" $name "* ]] && continue
                if [[ $cur == [\'\"]* ]]; then
                    cands+=("$name")
                else
                    printf -v q '%q' "$name"
                    cands+=("$q")
                fi
            done < <(_redsem_names "$url" "$prefix" "${conn[@]}")
            ;;
        cmdname)
            compopt -o filenames 2>/dev/null
            if [[ $cur == */* ]]; then
                mapfile -t cands < <(compgen -f -- "$cur")
            else
                mapfile -t cands < <(compgen -c -- "$cur" | sort -u)
            fi
            ;;
        files)
            # COMMAND's own arguments: as its own completion would, as for sudo or timeout.
            if declare -F _command_offset >/dev/null && ((${first_raw[cmdstart]-0} > 0)); then
                _command_offset "${first_raw[cmdstart]}"
                return 0
            fi
            compopt -o filenames 2>/dev/null
            mapfile -t cands < <(compgen -f -- "$cur")
            ;;
    esac

    # Cut what precedes bash's own word (after '=' or ':').
    if [[ -n $strip ]]; then
        for i in "${!cands[@]}"; do
            [[ ${cands[i]} == "$strip"* ]] && cands[i]=${cands[i]#"$strip"}
        done
    fi
    COMPREPLY=("${cands[@]}")
    return 0
}

complete -F _redsem redsem
