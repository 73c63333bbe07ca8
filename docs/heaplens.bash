# bash completion for heaplens(1) and heaplens-memcheck; installed by `make install` into
# bash-completion's directory.
_heaplens() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local cmd=${COMP_WORDS[1]}
    [[ ${COMP_WORDS[0]##*/} == heaplens-memcheck ]] && cmd=memcheck
    if [[ $COMP_CWORD -eq 1 && $cmd != memcheck ]]; then
        COMPREPLY=($(compgen -W "run report diff html memcheck server shell attach detach --help --version" -- "$cur"))
        return
    fi
    # after the program (run: after --; memcheck: the first word that is no option) complete
    # as for that command
    local i
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ $cmd == run && ${COMP_WORDS[i]} == -- ]]; then
            _command_offset $((i + 1)) 2>/dev/null || COMPREPLY=($(compgen -f -- "$cur"))
            return
        fi
    done
    case $prev in
    -o | --output | --json | --html | --sarif | --suppressions | --collapsed | --flamegraph | \
        --pprof | --massif | --sysroot | --debug-dir | --token | --remote-token)
        COMPREPLY=($(compgen -f -- "$cur"))
        return
        ;;
    --sort)
        if [[ $cmd == diff ]]; then
            COMPREPLY=($(compgen -W "bytes allocations peak live leaked" -- "$cur"))
        else
            COMPREPLY=($(compgen -W "allocations bytes peak leaked temporary" -- "$cur"))
        fi
        return
        ;;
    --metric)
        COMPREPLY=($(compgen -W "allocations bytes peak leaked temporary" -- "$cur"))
        return
        ;;
    esac
    local report="--json --html --sarif --show-leak-kinds= --suppressions= --error-exitcode=
        --sysroot --debug-dir -q --quiet -h --help"
    local words
    case $cmd in
    run) words="-o --output -d --depth --guard= --redzone= --paint= --hoard= --guard-pages= --guard-sites= --guard-pages-before --guard-pages-abort --sample-interval= --allocator-stats --allocator-stats= --remote --remote-token --no-follow --no-scan --no-control --wait --alert-growth --alert-window
        --no-release-stacks $report --" ;;
    report) words="$report --summary --top --sort --histogram --timeline --threads --growth
        --growth-rate --from --to
        --filter --buckets --collapsed --metric --flamegraph --pprof --massif" ;;
    diff) words="--json --html --sort -n --sysroot -q --quiet -h --help" ;;
    html) words="-o --output -h --help" ;;
    server) words="--listen -o --token --count --duration -q --quiet -h --help" ;;
    attach) words="-o --output -d --depth --duration --no-scan $report" ;;
    detach) words="$report" ;;
    shell) words="--socket --token --show-leak-kinds= --suppressions= --sysroot --debug-dir -h --help" ;;
    memcheck) words="--leak-check=no --leak-check=summary --leak-check=full --show-leak-kinds=
        --errors-for-leak-kinds= --show-reachable=yes --show-possibly-lost=no --error-exitcode=
        --log-file= --log-fd= --log-socket= --xml=yes --xml-file= --xml-fd= --xml-socket=
        --suppressions= --gen-suppressions=all --num-callers= --trace-children=yes
        --trace-children=no --run-libc-freeres=yes --run-libc-freeres=no
        --run-cxx-freeres=yes --run-cxx-freeres=no --heaplens-output=
        --show-error-list=yes --tool=memcheck -q --quiet
        -v --verbose -s -h --help --help-debug --version" ;;
    esac
    if [[ $cur == -* ]]; then
        compopt -o nospace 2>/dev/null
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
        [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} != *= ]] && compopt +o nospace 2>/dev/null
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -F _heaplens heaplens heaplens-memcheck
