#!/usr/bin/env bash
# Runs each completion in its real shell (bash, zsh, fish) and checks the candidates,
# including semaphore names read live from a private redis-server, and that completion stays
# quiet and quick when Redis is down.
# Usage: check_completions.sh BUILD_DIR COMPLETIONS_DIR (the generated ones: BUILD_DIR/completions)
set -uo pipefail
build=$(cd "$1" && pwd)
for file in redsem.bash _redsem redsem.fish; do
    [ -f "$2/$file" ] || { echo "FAIL no $2/$file: build the target 'completions'"; exit 1; }
done
completions=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
export PATH="$build:$PATH"
unset REDSEM_URL REDIS_URL REDSEM_PASSWORD REDSEM_PREFIX

dir=$(mktemp -d)
redis-server --port 0 --unixsocket "$dir/r.sock" --save "" --appendonly no --dir "$dir" \
    --daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
trap 'kill "$(cat "$dir/redis.pid")" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$dir/r.sock" ] && break; sleep 0.05; done
url="unix://$dir/r.sock"
# A brand-new server: admission is closed for the loss grace unless told otherwise.
export REDSEM_LOSS_GRACE=0
redsem --url "$url" acquire alpha >/dev/null && redsem --url "$url" acquire beta >/dev/null || exit 1
# A server with a password: its names are listed only with the --password-file given.
redis-server --port 0 --unixsocket "$dir/p.sock" --requirepass secret --save "" --appendonly no \
    --dir "$dir" --daemonize yes --pidfile "$dir/p.pid" --logfile "$dir/p.log"
trap 'kill "$(cat "$dir/redis.pid")" "$(cat "$dir/p.pid")" 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do [ -S "$dir/p.sock" ] && break; sleep 0.05; done
purl="unix://$dir/p.sock"
(umask 077; echo secret > "$dir/pw")
redsem --url "$purl" --password-file "$dir/pw" acquire gamma >/dev/null || exit 1

failures=0
expect() { # expect SHELL "LINE" "EXPECTED (space-separated, sorted)" ACTUAL
    local got
    got=$(echo "$4" | awk 'NF {print $1}' | sort | tr '\n' ' ' | sed 's/ $//')
    if [ "$got" = "$3" ]; then
        echo "ok   $1: '$2' -> $got"
    else
        echo "FAIL $1: '$2' -> '$got', expected '$3'"; failures=$((failures + 1))
    fi
}

bash_complete() { # bash_complete WORD... (the last word is the one being completed)
    local words
    words=$(printf '%q ' "$@")
    bash --norc -c "source /usr/share/bash-completion/bash_completion 2>/dev/null
        source '$completions/redsem.bash'
        COMP_WORDS=($words); COMP_CWORD=\$((\${#COMP_WORDS[@]} - 1))
        COMP_LINE=\"\${COMP_WORDS[*]}\"; COMP_POINT=\${#COMP_LINE}
        _redsem; printf '%s\n' \"\${COMPREPLY[@]}\""
}
# Ours first: fish would autoload an installed redsem.fish (a package) over the one sourced.
fish_complete() { fish -c "set -p fish_complete_path '$completions'; source '$completions/redsem.fish'; complete -C '$1'"; }
zsh_complete() { COMPDIR="$completions" timeout 20 zsh -f "$here/zcomp.zsh" "$1"; }

expect bash "redsem st" "status" "$(bash_complete redsem st)"
expect bash "redsem run x --on-lost " "ignore term" "$(bash_complete redsem run x --on-lost '')"
expect bash "redsem acquire --li" "--limit" "$(bash_complete redsem acquire --li)"
expect bash "redsem --url URL status " "alpha beta" "$(bash_complete redsem --url "$url" status '')"
expect bash "redsem --url URL acquire al" "alpha" "$(bash_complete redsem --url "$url" acquire al)"
expect bash "redsem run x -- ech" "echo" "$(bash_complete redsem run x -- ech)"
expect bash "redsem run x ech" "echo" "$(bash_complete redsem run x ech)"
expect bash "redsem run x grep -" "" "$(bash_complete redsem run x grep -q)"
# COMMAND's arguments as COMMAND's own completion gives them (bash: _command_offset, as sudo).
expect bash "redsem run x ls --colo" "--color --color=" "$(bash_complete redsem run x ls --colo 2>/dev/null)"
expect bash "redsem run x -- timeout 5 ls --colo" "--color --color=" "$(bash_complete redsem run x -- timeout 5 ls --colo 2>/dev/null)"
expect bash "redsem li" "limit" "$(bash_complete redsem li)"
expect bash "redsem --url URL limit al" "alpha" "$(bash_complete redsem --url "$url" limit al)"
expect bash "redsem acquire --wh" "--while-pid" "$(bash_complete redsem acquire --wh)"
expect bash "redsem acquire --on-lost K" "KILL" "$(bash_complete redsem acquire --on-lost K)"
expect bash "redsem status --ins" "--insecure" "$(bash_complete redsem status --ins)"
expect bash "redsem --cacert DIR/r." "$dir/r.sock" "$(bash_complete redsem --cacert "$dir/r.")"
expect bash "redsem lo" "log lost" "$(bash_complete redsem lo)"
expect bash "redsem status --fo" "--format" "$(bash_complete redsem status --fo)"
expect bash "redsem status --format p" "prometheus" "$(bash_complete redsem status --format p)"
expect bash "redsem log --fo" "--follow" "$(bash_complete redsem log --fo)"
expect bash "redsem --url URL log alpha " "beta" "$(bash_complete redsem --url "$url" log alpha '')"
expect bash "redsem limit --hi" "--history" "$(bash_complete redsem limit --hi)"
expect bash "redsem doc" "doctor" "$(bash_complete redsem doc)"
expect bash "redsem d" "doctor drain" "$(bash_complete redsem d)"
expect bash "redsem --url URL pause al" "alpha" "$(bash_complete redsem --url "$url" pause al)"
expect bash "redsem drain x --" "--cacert --cacertdir --cert --connect-timeout --for --help --insecure --json --key --password-file --prefix --quiet --reason --sentinel-password-file --sni --url --wait" "$(bash_complete redsem drain x --)"
expect bash "redsem doctor --j" "--json" "$(bash_complete redsem doctor --j)"
expect bash "redsem --url URL doctor " "" "$(bash_complete redsem --url "$url" doctor '')"
expect bash "redsem --url PURL --password-file F status " "gamma" "$(bash_complete redsem --url "$purl" --password-file "$dir/pw" status '')"

expect fish "redsem st" "status" "$(fish_complete 'redsem st')"
expect fish "redsem li" "limit" "$(fish_complete 'redsem li')"
expect fish "redsem acquire --on-lost K" "KILL" "$(fish_complete 'redsem acquire --on-lost K')"
expect fish "redsem run x --on-lost " "ignore term" "$(fish_complete 'redsem run x --on-lost ')"
expect fish "redsem run x ech" "echo" "$(fish_complete 'redsem run x ech')"
expect fish "redsem run x -- ech" "echo" "$(fish_complete 'redsem run x -- ech')"
expect fish "redsem run x --kill-a" "--kill-after" "$(fish_complete 'redsem run x --kill-a')"
expect fish "redsem run x ls --colo" "--color --color=" "$(fish_complete 'redsem run x ls --colo')"
expect fish "redsem --url URL status " "alpha beta" "$(fish_complete "redsem --url $url status ")"
expect fish "redsem status -u URL " "alpha beta" "$(fish_complete "redsem status -u $url ")"
expect fish "redsem lo" "log lost" "$(fish_complete 'redsem lo')"
expect fish "redsem status --format " "json prometheus table" "$(fish_complete 'redsem status --format ')"
expect fish "redsem --url URL log " "alpha beta" "$(fish_complete "redsem --url $url log ")"
expect fish "redsem doc" "doctor" "$(fish_complete 'redsem doc')"
expect fish "redsem re" "release renew resume" "$(fish_complete 'redsem re')"
expect fish "redsem --url URL resume " "alpha beta" "$(fish_complete "redsem --url $url resume ")"
expect fish "redsem pause x --fo" "--for" "$(fish_complete 'redsem pause x --fo')"
expect fish "redsem doctor --j" "--json" "$(fish_complete 'redsem doctor --j')"
expect fish "redsem --url URL doctor " "" "$(fish_complete "redsem --url $url doctor ")"
expect fish "redsem --url PURL --password-file F status " "gamma" "$(fish_complete "redsem --url $purl --password-file $dir/pw status ")"
expect fish "redsem --url PURL --password-file=F status " "gamma" "$(fish_complete "redsem --url $purl --password-file=$dir/pw status ")"
fish_acquire=$(fish_complete 'redsem acquire --')
for option in --limit --ttl --wait --json --url --while-pid --on-lost --cacert --password-file --insecure; do
    echo "$fish_acquire" | grep -q -- "^$option" || { echo "FAIL fish: acquire -- lacks $option"; failures=$((failures + 1)); }
done

expect zsh "redsem st" "status" "$(zsh_complete 'redsem st')"
expect zsh "redsem li" "limit" "$(zsh_complete 'redsem li')"
expect zsh "redsem acquire --wh" "--while-pid" "$(zsh_complete 'redsem acquire --wh')"
expect zsh "redsem run x --on-lost " "ignore term" "$(zsh_complete 'redsem run x --on-lost ')"
expect zsh "redsem acquire --li" "--limit" "$(zsh_complete 'redsem acquire --li')"
expect zsh "redsem status --ins" "--insecure" "$(zsh_complete 'redsem status --ins')"
expect zsh "redsem --url URL status " "alpha beta" "$(zsh_complete "redsem --url $url status ")"
expect zsh "redsem --url URL acquire al" "alpha" "$(zsh_complete "redsem --url $url acquire al")"
expect zsh "redsem lo" "log lost" "$(zsh_complete 'redsem lo')"
expect zsh "redsem status --format " "json prometheus table" "$(zsh_complete 'redsem status --format ')"
expect zsh "redsem log --si" "--since" "$(zsh_complete 'redsem log --si')"
expect zsh "redsem limit x --hi" "--history" "$(zsh_complete 'redsem limit x --hi')"
expect zsh "redsem doc" "doctor" "$(zsh_complete 'redsem doc')"
expect zsh "redsem pa" "pause" "$(zsh_complete 'redsem pa')"
expect zsh "redsem --url URL drain al" "alpha" "$(zsh_complete "redsem --url $url drain al")"
expect zsh "redsem drain x --rea" "--reason" "$(zsh_complete 'redsem drain x --rea')"
expect zsh "redsem run x ls --colo" "--color" "$(zsh_complete 'redsem run x ls --colo')"
expect zsh "redsem doctor --j" "--json" "$(zsh_complete 'redsem doctor --j')"
# zsh lists the options on an empty word; doctor takes no NAME, so nothing else may come.
expect zsh "redsem --url PURL --password-file F status " "gamma" "$(zsh_complete "redsem --url $purl --password-file $dir/pw status ")"
expect zsh "redsem --url URL doctor (no options)" "" "$(zsh_complete "redsem --url $url doctor " | grep -v -- '^-')"

# Every option --help lists, and no other, is offered after "SUB --" in each shell: read from
# the option lines of each --help, not from the table the completions are generated from.
help_options() { # help_options [SUB]: the long options at the start of --help's option lines
    redsem "$@" --help | grep -oE '^  (-[A-Za-z],)?--[a-z][a-z-]*' | grep -oE -- '--[a-z-]+'
}
globals=$(help_options | grep -vx -- --version)
for sub in $(redsem --help | sed -n '/^Subcommands:/,$p' | grep -oE '^  [a-z]+'); do
    want=$( (help_options "$sub"; echo "$globals") | sort -u | tr '\n' ' ' | sed 's/ $//')
    got=$(bash_complete redsem "$sub" -- | grep -- '^--')
    expect bash "redsem $sub -- (every option)" "$want" "$got"
    got=$(fish_complete "redsem $sub --" | grep -- '^--' | sed 's/=$//')
    expect fish "redsem $sub -- (every option)" "$want" "$got"
    got=$(zsh_complete "redsem $sub --" | grep -- '^--')
    expect zsh "redsem $sub -- (every option)" "$want" "$got"
done

# Redis down: no names, nothing on stderr, no hang.
for shell in bash fish; do
    start=$(date +%s%N)
    if [ $shell = bash ]; then
        out=$(bash_complete redsem --url redis://127.0.0.1:1 status '' 2>&1)
    else
        out=$(fish_complete 'redsem --url redis://127.0.0.1:1 status ' 2>&1)
    fi
    elapsed_ms=$((($(date +%s%N) - start) / 1000000))
    # Its own connect timeout is 300ms; the bound only tells a hang from a slow start (a
    # sanitized build on a loaded machine).
    if [ -n "$out" ] || [ "$elapsed_ms" -gt 8000 ]; then
        echo "FAIL $shell with Redis down: '$out' in ${elapsed_ms}ms"; failures=$((failures + 1))
    else
        echo "ok   $shell with Redis down: nothing, in ${elapsed_ms}ms"
    fi
done

echo "$failures failed"
[ "$failures" -eq 0 ]
