# usage: zsh -f zcomp.zsh 'redsem st'   -> prints one completion candidate per line
# Drives an interactive `zsh -f -i` in a zpty, types the line and a TAB, and
# prints every match the completion system adds (compadd is wrapped).
# COMPDIR (required) names the folder holding _redsem; it is put first in $fpath.
zmodload zsh/zpty || exit 2
setup=$(mktemp) || exit 2
cat >$setup <<SETUP
PS1= PROMPT= RPROMPT=
unsetopt prompt_sp 2>/dev/null
fpath=(${COMPDIR:?COMPDIR must name the completions folder} \$fpath)
autoload -Uz compinit && compinit -u -D
zstyle ':completion:*' list-grouped false
zstyle ':completion:*' insert-tab false
_zc_begin() { print -r -- "<<Z""C-BEGIN>>" }
_zc_end() { print -r -- "<<Z""C-END>>"; exit }
compprefuncs=(_zc_begin)
comppostfuncs=(_zc_end)
compadd() {
  if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "\$@"; return; fi
  local -a __h
  builtin compadd -O __h "\$@"
  (( \$#__h )) && print -rl -- \$__h
  builtin compadd "\$@"
}
bindkey '^I' complete-word
SETUP
zpty z zsh -f -i || exit 2
zpty -w z "source $setup"
zpty -w -n z "$1"$'\t'
out=
while zpty -r z chunk; do
  out+=$chunk
  [[ $out == *'<<ZC-END>>'* ]] && break
done
zpty -d z
rm -f $setup
out=${out//$'\r'/}
out=${out##*'<<ZC-BEGIN>>'$'\n'}
out=${out%%'<<ZC-END>>'*}
print -rn -- "$out"
